"""The house rules, read from the source of `keras_attention/`, `zoo/`, `benchmarks/` and
`tools/` (issue #63, part 3):

- no function longer than 60 lines of code;
- no project import inside a function: a module says at its top what it needs;
- no import circle between the project's modules.

A function's lines of code are its lines from `def` to its last line (decorators left
out) less its docstring's: blank lines and comments count, as they take the reader's
room too (the measure of issue #63: `export` 65, `prepare` 61). A nested function counts
towards the one around it.

A project import names `keras_attention` or `zoo` (or a module below them), or a sibling
script of `benchmarks/` or `tools/` by its bare name (those directories are on `sys.path`
when their scripts run). A module whose import must wait (an optional, heavy package) may
import that third-party package inside a function; a project module never. Where one
process must not load the project, the code it runs lives in a script of its own
(`benchmarks/zoo_engine.py`, `benchmarks/vit_zoo_export.py`, `tools/vit_paper_check.py`).
The one exception, `DEFERRED_IMPORTS`, is a script whose processes choose their Keras
backend before the project loads; it says why, and it must still need the exception.

An import circle is a cycle in the graph of every project import, those inside functions
too. `from zoo import x` is an edge to `zoo.x` where that is a module; an edge into the
top packages `zoo` and `keras_attention` is their facade being loaded, not a cycle (as in
`tests/test_layout.py`).
"""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
FOLDERS = ("keras_attention", "zoo", "benchmarks", "tools")
PACKAGES = ("keras_attention", "zoo")
SCRIPT_FOLDERS = ("benchmarks", "tools")
MAX_FUNCTION_LINES = 60
# Scripts that may import the project inside a function, and why.
DEFERRED_IMPORTS = {
    "benchmarks/bench_gpu.py": "its JAX child sets KERAS_BACKEND and hides TensorFlow before "
                               "Keras and the zoo load, its PyTorch child never loads them",
}


def _sources(root):
    return sorted(path for folder in FOLDERS for path in (root / folder).rglob("*.py"))


def _module_name(path, root):
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _docstring_lines(function):
    body = function.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        return body[0].end_lineno - body[0].lineno + 1
    return 0


def function_lengths(path):
    """`{"name:line": lines of code}` of every function (and method) in `path`."""
    return {f"{node.name}:{node.lineno}":
            node.end_lineno - node.lineno + 1 - _docstring_lines(node)
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _project_module(name, path, root):
    """The project module that the dotted `name`, imported by `path`, stands for, or None."""
    top = name.split(".")[0]
    if top in PACKAGES:
        return name
    folder = path.relative_to(root).parts[0]
    if folder in SCRIPT_FOLDERS and (root / folder / f"{top}.py").is_file():
        return f"{folder}.{name}"
    if top in SCRIPT_FOLDERS:
        return name
    return None


def _is_module(name, root):
    base = root / name.replace(".", "/")
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def project_imports(path, root):
    """`[(line, module, inside a function)]`: the project modules that `path` imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    inside = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            inside.update(id(child) for child in ast.walk(node) if child is not node)
    found = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
            names = [n if _is_module(_project_module(n, path, root) or "-", root)
                     else node.module for n in names]
        for name in names:
            module = _project_module(name, path, root)
            if module is not None:
                found.append((node.lineno, module, id(node) in inside))
    return found


def function_imports(root, allowed=()):
    """`["path:line imports module"]`: the project imports made inside a function (in the
    files of `allowed` too, where they are allowed)."""
    return [f"{path.relative_to(root)}:{line} imports {module}"
            for path in _sources(root)
            for line, module, inside_function in project_imports(path, root)
            if inside_function and str(path.relative_to(root)) not in allowed]


def long_functions(root):
    """`{"path::name:line": lines}` of the functions over `MAX_FUNCTION_LINES`."""
    return {f"{path.relative_to(root)}::{name}": count
            for path in _sources(root)
            for name, count in function_lengths(path).items() if count > MAX_FUNCTION_LINES}


def import_cycles(root):
    """The import circles, each as `a -> b -> ... -> a` (one per strongly connected set)."""
    modules = {_module_name(path, root): path for path in _sources(root)}
    graph = {name: sorted({module for _, module, _ in project_imports(path, root)
                           if module in modules and module not in PACKAGES and module != name})
             for name, path in modules.items()}
    cycles, state = [], {}

    def visit(name, trail):
        state[name] = "visiting"
        for child in graph[name]:
            if state.get(child) == "visiting":
                cycles.append(" -> ".join(trail[trail.index(child):] + [child]))
            elif child not in state:
                visit(child, trail + [child])
        state[name] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    return cycles


def test_no_function_is_longer_than_60_lines_of_code():
    assert long_functions(ROOT) == {}


def test_no_project_import_inside_a_function():
    assert function_imports(ROOT, allowed=DEFERRED_IMPORTS) == []
    # An exception is still needed: its script still imports the project inside a function.
    for path in DEFERRED_IMPORTS:
        assert any(found.startswith(path + ":") for found in function_imports(ROOT)), path


def test_no_import_circle():
    assert import_cycles(ROOT) == []


@pytest.fixture
def planted(tmp_path):
    """A copy of the four folders' layout with one violation of each rule."""
    (tmp_path / "zoo").mkdir()
    (tmp_path / "keras_attention").mkdir()
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "tools").mkdir()
    (tmp_path / "zoo" / "__init__.py").write_text("")
    (tmp_path / "keras_attention" / "__init__.py").write_text("")
    body = "\n".join(f"    x{i} = {i}  # a comment\n\n    # another" for i in range(20))
    (tmp_path / "zoo" / "long.py").write_text(
        f'def long():\n    """A docstring,\n\n    of three lines."""\n{body}\n    return x0\n')
    (tmp_path / "zoo" / "lazy.py").write_text(
        "import json\n\n\ndef later():\n    from zoo import long\n    import numpy\n"
        "    return long, numpy, json\n")
    (tmp_path / "benchmarks" / "first.py").write_text("import second\n")
    (tmp_path / "benchmarks" / "second.py").write_text("def go():\n    import first\n")
    return tmp_path


def test_the_checks_find_planted_violations(planted):
    # the def line, 20 assignments, 20 blank lines, 20 comments and the return; the
    # docstring out: 62 lines of code
    assert long_functions(planted) == {"zoo/long.py::long:1": 62}
    assert function_imports(planted) == ["benchmarks/second.py:2 imports benchmarks.first",
                                         "zoo/lazy.py:5 imports zoo.long"]
    assert import_cycles(planted) == ["benchmarks.first -> benchmarks.second -> benchmarks.first"]
