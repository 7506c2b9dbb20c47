"""The shape of `zoo/`: one package per concern, data flowing down, no import cycle.

`decode` (the searches) and `export` (the formats) sit below the model families: they import
none, and ask the registry for a model's family object (its decoding step, its export task),
which each family package registers (issue #63, one shape per family).

Read from the source, so the test needs no import: the levels from module-level
imports, the cycles from every import, those inside functions too.
The order, bottom to top (a module may import its own level and those below):

    errors, files, locks, progress, moved,             shared plumbing
      checkpoints, torch_pickle, families
    text                                                tokenizers and special ids
    distribute, registry, description, layouts          strategies, registration, layout maps
    datasets                                            data, pipelines, preparation
    decode                                              greedy, beam, sampling over one step protocol
    export                                              the formats: SavedModels, LiteRT, ...
    transformer, seq2seq, convs2s, vit                  the model families
    plot                                                pictures
    runs                                                run directories: train, evaluate, ...
    tuning, explore                                     keras-tuner searches, the web page
    cli, __main__                                       the command line
"""

import ast
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
ZOO = ROOT / "zoo"
# The layers that run and search models, and the command line on top of them.
UPPER = ("zoo.runs", "zoo.tuning", "zoo.explore", "zoo.cli", "zoo.__main__")
LEVELS = (
    ("zoo.errors", "zoo.files", "zoo.locks", "zoo.progress", "zoo.moved", "zoo.checkpoints",
     "zoo.families"),
    ("zoo.text",),
    ("zoo.distribute", "zoo.registry", "zoo.description", "zoo.layouts"),
    ("zoo.datasets",),
    ("zoo.decode",),
    ("zoo.export",),
    ("zoo.transformer", "zoo.seq2seq", "zoo.convs2s", "zoo.vit"),
    ("zoo.plot",),
    ("zoo.runs",),
    ("zoo.tuning", "zoo.explore"),
    ("zoo.cli", "zoo.__main__"),
)
# The flat modules of `zoo/` besides the packages: a new one needs a reason.
# errors: `ZooError`, the user's mistakes, raised at every level, so it sits below them all.
# locks: one writer per directory, which `runs`, `tuning` and `cli` take, beside `files`.
# layouts: `zoo.layout_map`, for JAX's ModelParallel: not in `distribute`, whose package
# imports TensorFlow (tf.distribute), so that it works where TensorFlow is not installed.
FLAT = {"__init__", "__main__", "checkpoints", "description", "errors", "families", "files",
        "layouts", "locks", "moved", "progress"}


def _module_name(path):
    parts = path.relative_to(ZOO.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path, inside_functions=False):
    """The zoo modules that `path` imports at module level (`from zoo import x` -> zoo.x),
    and with `inside_functions` those that its functions import too."""
    names = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree) if inside_functions else tree.body:
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names if alias.name.startswith("zoo"))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("zoo"):
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                is_module = (ZOO.parent / candidate.replace(".", "/")).with_suffix(".py").is_file() \
                    or (ZOO.parent / candidate.replace(".", "/") / "__init__.py").is_file()
                names.add(candidate if is_module else node.module)
    return names


GRAPH = {_module_name(path): _imports(path) for path in ZOO.rglob("*.py")}
# A function's import closes a cycle as surely as a module's, only later.
EVERY_IMPORT = {_module_name(path): _imports(path, inside_functions=True)
                for path in ZOO.rglob("*.py")}


def _is_upper(name):
    return any(name == upper or name.startswith(upper + ".") for upper in UPPER)


@pytest.mark.parametrize("module", sorted(name for name in GRAPH if not _is_upper(name)
                                          and name != "zoo"))
def test_lower_layers_do_not_import_the_upper_ones(module):
    assert not [name for name in GRAPH[module] if _is_upper(name)]


def test_no_import_cycle_between_modules():
    # The package `zoo` itself is the public facade (it re-exports zoo.tuning's
    # `hypermodel`): an edge into it is the package being loaded, not a cycle.
    graph = {name: {n for n in imports if n != "zoo" and n in GRAPH and n != name}
             for name, imports in EVERY_IMPORT.items() if name != "zoo"}
    visiting, done = set(), set()

    def visit(name, path):
        if name in done:
            return
        assert name not in visiting, "import cycle: " + " -> ".join(path + [name])
        visiting.add(name)
        for child in sorted(graph.get(name, ())):
            visit(child, path + [name])
        visiting.discard(name)
        done.add(name)

    for name in sorted(graph):
        visit(name, [])


def _level(name):
    for level, prefixes in enumerate(LEVELS):
        if any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes):
            return level
    return None


@pytest.mark.parametrize("module", sorted(name for name in GRAPH if name != "zoo"))
def test_every_module_has_a_level_and_imports_only_its_level_or_below(module):
    assert _level(module) is not None, f"{module} belongs to no level of LEVELS"
    upward = [name for name in GRAPH[module]
              if name != "zoo" and _level(name) is not None and _level(name) > _level(module)]
    assert not upward, f"{module} (level {_level(module)}) imports upward: {upward}"


def test_zoo_holds_packages_and_a_few_flat_modules():
    flat = {path.stem for path in ZOO.glob("*.py")}
    assert flat == FLAT, f"new flat modules: {sorted(flat - FLAT)}; gone: {sorted(FLAT - flat)}"


MAX_MODULE_LINES = 400


def test_every_module_is_at_most_400_lines():
    """A module a reader can hold: none of `zoo/` or `keras_attention/` grows past 400 lines."""
    modules = sorted(ZOO.rglob("*.py")) + sorted((ROOT / "keras_attention").rglob("*.py"))
    assert len(modules) > 100
    lines = {str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
             for path in modules}
    assert {path: count for path, count in lines.items() if count > MAX_MODULE_LINES} == {}


@pytest.mark.large
def test_import_zoo_leaves_the_heavy_optional_packages_unloaded():
    """`import zoo` (and `zoo list`) loads keras-tuner, tensorflow-text, sentencepiece,
    safetensors, TF Serving's protos and sacrebleu only when a command needs them.
    (matplotlib, scipy and scikit-learn are left out: `import keras` loads them.)"""
    heavy = ("keras_tuner", "tensorflow_text", "sentencepiece", "safetensors",
             "tensorflow_serving", "sacrebleu")
    code = ("import sys, zoo, zoo.text; zoo.list(); "
            f"print([m for m in {heavy!r} if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"
    # What is loaded lazily is still there on first use.
    from zoo import text

    assert text.WordPieceTokenizer.__module__ == "zoo.text.wordpiece"
    assert text.UNK_ID == 1 and text.marian.__name__ == "zoo.text.marian"


def test_every_file_using_the_session_runs_is_in_their_work_unit():
    """conftest.SHARED_RUN_FILES names exactly the test files that use the session's trained
    runs: a file missing from it would train and export them again on the other worker."""
    import conftest

    pattern = re.compile(r"\b(numbers_run|numbers_export|fashion_run)\b")
    users = {path.name for path in (ROOT / "tests").glob("test_*.py")
             if pattern.search(path.read_text(encoding="utf-8"))}
    users.discard("test_layout.py")
    assert users == set(conftest.SHARED_RUN_FILES)
    assert set(conftest.HEAVIEST_FILES[:len(users)]) == users  # the largest work unit first
