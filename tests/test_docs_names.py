"""What the documentation names exists: every repository path, and every `zoo.`, `ka.` or
`keras_attention.` name, written in README.md, docs/ (every .md), saved_models/README.md,
benchmarks/README.md and tutorials/README.md.

A path is checked when it starts at a folder or file of the repository's top level
(`zoo/export/__init__.py`, `benchmarks/bench_cli.py`, `Makefile`), when it is a Markdown
link's target (resolved from the document's folder), and in benchmarks/README.md and
tutorials/README.md when it is a bare `*.py` name (a script beside the README; elsewhere a
bare name may be a script the document lists for the reader to save). Not checked:
placeholders (a part in capitals, `saved_models/NAME`, or with `*`, `<`, `{`, `…`), and what
commands write (`runs/`, `tuning/`, `saved_models/` but its README.md).

A name is imported: its longest module prefix (`zoo.export.int8`), then the rest read as
attributes (`MODES`); an instance attribute a class sets in `__init__` counts, and a module
that needs an optional package that is not installed (the `deploy` extra) is not checked.
"""

import importlib
import inspect
import pathlib
import re

import pytest

import keras_attention
import zoo

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCUMENTS = sorted(
    [ROOT / "README.md", ROOT / "saved_models" / "README.md", ROOT / "benchmarks" / "README.md",
     ROOT / "tutorials" / "README.md", *(ROOT / "docs").rglob("*.md")])
# The top level of the repository, where a written path starts (outputs left out).
TOP_LEVEL = (".ci", "Makefile", "README.md", "benchmarks", "docs", "keras_attention",
             "pyproject.toml", "saved_models", "tests", "tools", "tutorials", "zoo")
OUTPUTS = re.compile(r"(?:runs|tuning)(?:/|$)|saved_models/(?!README\.md$)")
PLACEHOLDER = re.compile(r"(?:^|/)[A-Z][A-Z0-9_]*(?:[./-]|$)|[*<>{}…]|\.\.\.")
PATH = re.compile(r"(?<![\w./:~*<>{}-])((?:[\w.-]+/)+[\w.-]*|[\w-]+\.py\b|Makefile\b|pyproject\.toml\b)"
                  r"(?![*<>{}…\w])")
SCRIPT_FOLDERS = (ROOT / "benchmarks", ROOT / "tutorials")  # a bare `x.py` is a script there
LINK = re.compile(r"\]\(([^)\s]+)\)")
NAME = re.compile(r"(?<![\w./-])(zoo|ka|keras_attention)((?:\.[A-Za-z_]\w*)+)")
PACKAGES = {"zoo": "zoo", "ka": "keras_attention", "keras_attention": "keras_attention"}


def written_paths(text, scripts=False):
    """The repository paths a document's text names (without placeholders and outputs);
    with `scripts`, bare `*.py` names too."""
    found = set()
    for match in PATH.finditer(text):
        path = match.group(1).rstrip(".")
        first = path.split("/", 1)[0]
        if first in TOP_LEVEL or (scripts and first.endswith(".py") and "/" not in path):
            found.add(path)
    return {path for path in found if not PLACEHOLDER.search(path) and not OUTPUTS.match(path)}


def linked_paths(text):
    """The targets of a document's Markdown links that are files of the repository."""
    prose = re.sub(r"```.*?```|`[^`\n]*`", "", text, flags=re.S)  # no links in code
    targets = {target.split("#", 1)[0] for target in LINK.findall(prose)}
    return {target for target in targets
            if target and not re.match(r"[a-z]+:", target) and not PLACEHOLDER.search(target)}


def missing_paths(text, folder):
    """The paths of `text` (a document in `folder`) that do not exist."""
    missing = [path for path in sorted(written_paths(text, scripts=folder in SCRIPT_FOLDERS))
               if not (ROOT / path).exists() and not (folder / path).exists()]
    missing += [target for target in sorted(linked_paths(text))
                if not (folder / target).exists()]
    return missing


def written_names(text):
    """The dotted `zoo.`, `ka.` and `keras_attention.` names of a text."""
    return {PACKAGES[match.group(1)] + match.group(2) for match in NAME.finditer(text)}


def _has_attribute(owner, name):
    if hasattr(owner, name):
        return True
    if not inspect.isclass(owner):
        return False
    for cls in owner.__mro__:  # dataclass fields, annotations, or `self.name = ...`
        if name in getattr(cls, "__annotations__", {}) or name in getattr(cls, "_fields", ()):
            return True
        try:
            if re.search(rf"\bself\.{name}\s*=", inspect.getsource(cls)):
                return True
        except (OSError, TypeError):
            continue
    return False


def resolves(name):
    """Whether `name` is a module, or a module's attribute path; None when it cannot be
    told here (its module needs an optional package that is not installed)."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            owner = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError as error:
            if error.name and error.name.split(".")[0] not in ("zoo", "keras_attention"):
                return None  # an optional dependency
            continue
        for attribute in parts[cut:]:
            if not _has_attribute(owner, attribute):
                return False
            owner = getattr(owner, attribute, None)
        return True
    return False


def missing_names(text):
    """The names of `text` that do not resolve."""
    return sorted(name for name in written_names(text) if resolves(name) is False)


def test_the_check_finds_a_wrong_path_and_a_wrong_name():
    text = ("Exports are written by `zoo/export.py` (see [the runs](runs.md)), "
            "`zoo.export.int8.MODES` and `ka.MultiHeadAttention`, not `zoo.export.int4` nor "
            "`ka.layers.multi_head.NoSuchLayer`; run `python benchmarks/bench_cli.py`, "
            "`zoo train --out runs/tiny`, then saved_models/NAME/1 and `bench_nothing.py`.")
    assert missing_paths(text, ROOT / "docs") == ["zoo/export.py"]
    assert missing_paths(text, ROOT / "benchmarks") == ["bench_nothing.py", "zoo/export.py", "runs.md"]
    assert missing_paths("`tools/make_*_fixtures.py`, `benchmarks/bench_*.py`", ROOT) == []
    assert missing_paths("[runs](runs.md), [gone](gone.md#x), [web](https://x.org/a.md), "
                         "`x[0](y)`", ROOT / "docs") == ["gone.md"]
    assert missing_names(text) == ["keras_attention.layers.multi_head.NoSuchLayer",
                                   "zoo.export.int4"]
    assert written_names("the lock file DIR/.zoo.lock, zoo.describe(name).num_params") == \
        {"zoo.describe"}


def test_every_document_is_read():
    names = {str(path.relative_to(ROOT)) for path in DOCUMENTS}
    assert {"README.md", "docs/math.md", "docs/experiments/README.md", "saved_models/README.md",
            "benchmarks/README.md", "tutorials/README.md"} <= names
    assert keras_attention.__name__ and zoo.__name__  # both importable here


@pytest.mark.parametrize("document", [str(path.relative_to(ROOT)) for path in DOCUMENTS])
def test_every_path_a_document_names_exists(document):
    path = ROOT / document
    assert missing_paths(path.read_text(encoding="utf-8"), path.parent) == []


@pytest.mark.parametrize("document", [str(path.relative_to(ROOT)) for path in DOCUMENTS])
def test_every_name_a_document_writes_exists(document):
    assert missing_names((ROOT / document).read_text(encoding="utf-8")) == []
