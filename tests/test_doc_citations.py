"""The documentation the code cites exists: every `docs/....md` path (and `#section` of it)
named in `zoo/` and `keras_attention/`, and every module `docs/math.md` names.

Reads files only (no import), so it is quick.
"""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
SOURCES = sorted(path for package in ("zoo", "keras_attention")
                 for path in (ROOT / package).rglob("*.py"))
CITATION = re.compile(r"\bdocs/[\w./-]+?\.md(?:#[\w-]+)?")
MATH = ROOT / "docs" / "math.md"


def slug(heading):
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces to '-'."""
    text = heading.strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path):
    return {slug(line.lstrip("#")) for line in path.read_text(encoding="utf-8").splitlines()
            if re.match(r"#{1,6} ", line)}


def citations():
    found = []
    for path in SOURCES:
        for match in CITATION.finditer(path.read_text(encoding="utf-8")):
            found.append((str(path.relative_to(ROOT)), match.group()))
    return found


def test_slug_is_githubs():
    assert slug(" Additive (Bahdanau) attention") == "additive-bahdanau-attention"
    assert slug("The recipe, as it stands") == "the-recipe-as-it-stands"
    assert slug("Beam search with the GNMT length penalty") == \
        "beam-search-with-the-gnmt-length-penalty"


def test_the_code_cites_its_math_in_docs():
    cited = {citation for _, citation in citations()}
    assert len({c for c in cited if c.startswith("docs/math.md#")}) >= 10, cited


@pytest.mark.parametrize("source, citation", citations())
def test_every_cited_doc_and_section_exists(source, citation):
    name, _, section = citation.partition("#")
    path = ROOT / name
    assert path.is_file(), f"{source} cites {citation}: {name} does not exist"
    if section:
        assert section in anchors(path), (
            f"{source} cites {citation}: {name} has no such section; it has "
            f"{sorted(anchors(path))}")


def test_no_code_cites_a_math_file_outside_the_repository():
    gone = "MATH" + ".md"  # spelled apart so that this file does not cite it
    places = [ROOT / "zoo", ROOT / "keras_attention", ROOT / "tests", ROOT / "benchmarks",
              ROOT / "tutorials"]
    citing = [str(path.relative_to(ROOT)) for place in places for path in place.rglob("*.py")
              if gone in path.read_text(encoding="utf-8")]
    assert not citing


def _resolves(dotted):
    """Whether `a.b.c` is a module of the repository, or a name defined at the top of one
    (or named in its table of lazily loaded names)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:cut])
        module = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        if not module.is_file():
            continue
        rest = parts[cut:]
        if not rest:
            return True
        text = module.read_text(encoding="utf-8")
        # Defined, imported, or in a package's table of names loaded on first use (PEP 562).
        return len(rest) == 1 and re.search(
            rf"^(?:class |def )?{re.escape(rest[0])}\b|^    {re.escape(rest[0])},?$|"
            rf"import .*\b{re.escape(rest[0])}\b|^    \"{re.escape(rest[0])}\": \"", text,
            re.MULTILINE) is not None
    return False


def test_every_module_math_md_names_exists():
    text = MATH.read_text(encoding="utf-8")
    named = set(re.findall(r"`((?:keras_attention|zoo)(?:\.\w+)+)", text))
    assert len(named) >= 20, named
    assert not [name for name in sorted(named) if not _resolves(name)]
    # Each section says which module implements it and where the formula comes from.
    sections = re.split(r"^## ", text, flags=re.MULTILINE)[1:]
    for section in sections:
        title = section.splitlines()[0]
        if title != "Cost per layer":
            assert "\nCode: " in section and re.search(r"\nPapers?: ", section), title
