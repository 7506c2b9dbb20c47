"""Real translations from the machine's gettext catalogs: `--data gettext:LANG`.

Every installed program that is translated ships compiled catalogs,
`/usr/share/locale/<LANG>/LC_MESSAGES/<program>.mo`: English user-interface
strings and their human translations. `gettext_pairs("es")` reads them all
with Python's `gettext` module and cleans them into sentence pairs:

* the header entry is dropped; a plural entry keeps its singular form;
  a message context (`msgctxt`) is not part of the text;
* leading and trailing whitespace is stripped; a message that still spans
  several lines or holds a tab (usage texts, option tables) is dropped;
* a catalog that Python's `gettext` cannot read (a few are not UTF-8) is
  skipped and listed in the metadata;
* accelerator marks are removed: GTK's `_File` and Qt's `&Open` (a single
  mark before a letter), and the `(_F)` that some translations append;
* printf and brace placeholders (`%s`, `%1$d`, `{name}`) are kept: a
  translator copies them, and so should a model;
* a pair whose translation equals its source (untranslated), or whose sides
  are longer than `max_words` words, is dropped; pairs are de-duplicated.

The long-sentence set (`--data gettext-long:LANG`, `gettext_pairs(...,
**LONG)`) keeps only messages whose English has 12 to 60 words: help texts,
descriptions, error explanations. A message wrapped over several lines of
prose (no line indented or starting with "-", no tab: not an option table)
is kept there too, its lines joined by spaces on both sides.

The split is by catalog: whole `.mo` files are held out for the test set
(drawn with `seed` until they hold `test_ratio` of the pairs), so that the
near-duplicate strings of one program never sit on both sides; a training
pair whose source also appears in the test set is dropped as well.
"""

import collections
import gettext
import pathlib
import re

import numpy as np

from zoo.errors import ZooError

LOCALE_DIR = pathlib.Path("/usr/share/locale")

# A GTK or Qt mnemonic: one "_" or "&" right before a letter, at a word start.
_ACCELERATOR = re.compile(r"(?:(?<=^)|(?<=[\s(\[\"'«¿¡/]))[_&](?=\w)")
_TRAILING_ACCELERATOR = re.compile(r"\s*\([_&]\w\)")  # "Datei(_F)" in CJK translations
_DROP_REASONS = ("multiline", "untranslated", "too_long", "too_short", "empty", "duplicate",
                 "in_test")
# `gettext_pairs` options of the long-sentence set (`gettext-long:LANG`).
LONG = {"min_words": 12, "max_words": 60, "paragraphs": True}


def languages(locale_dir=LOCALE_DIR):
    """The language folders of `locale_dir` that hold at least one `.mo` catalog."""
    locale_dir = pathlib.Path(locale_dir)
    if not locale_dir.is_dir():
        return []
    return sorted(
        path.name for path in locale_dir.iterdir()
        if path.is_dir() and any((path / "LC_MESSAGES").glob("*.mo"))
    )


def catalog_paths(language, locale_dir=LOCALE_DIR):
    """The `.mo` files of `language`, sorted; a one-line error lists the languages found."""
    if not isinstance(language, str) or not language or "/" in language:
        raise ZooError(f"gettext: needs a language code such as 'es'; received {language!r}")
    paths = sorted((pathlib.Path(locale_dir) / language / "LC_MESSAGES").glob("*.mo"))
    if not paths:
        found = languages(locale_dir)
        listed = ", ".join(found) if found else "none"
        raise FileNotFoundError(
            f"no gettext catalogs for {language!r} in {locale_dir}/{language}/LC_MESSAGES; "
            f"languages with catalogs here: {listed}"
        )
    return paths


def strip_accelerator(text):
    """`text` without a keyboard accelerator mark (`_File`, `&Open`, `Datei(_F)`)."""
    text = _TRAILING_ACCELERATOR.sub("", text)
    marks = _ACCELERATOR.findall(text)
    if len(marks) == 1 and text.count(marks[0]) == 1:
        text = _ACCELERATOR.sub("", text)
    return text


def read_catalog(path):
    """The raw `(English, translation)` messages of one `.mo` file, in file order.

    The header is skipped, a plural entry gives its singular form, and a
    message context is removed from the English side.
    """
    with open(path, "rb") as file:
        catalog = gettext.GNUTranslations(file)._catalog
    messages = []
    for key, translation in catalog.items():
        if isinstance(key, tuple):  # (msgid, n): plural forms
            if key[1] != 0:
                continue
            key = key[0]
        if not key:
            continue  # the header
        messages.append((key.split("\x04", 1)[-1], translation))
    return messages


def clean_pair(source, target, max_words, min_words=0, paragraphs=False):
    """`(source, target)` cleaned, or the reason it is dropped (a str from _DROP_REASONS).

    `min_words`: fewer English words is "too_short"; `paragraphs`: lines of wrapped
    prose are joined by spaces instead of dropped as "multiline".
    """
    source, target = source.strip(), target.strip()
    if not source or not target:
        return "empty"
    if paragraphs and _is_paragraph(source) and _is_paragraph(target):
        source, target = " ".join(source.split()), " ".join(target.split())
    if any(c in text for text in (source, target) for c in "\n\t"):
        return "multiline"
    source, target = strip_accelerator(source), strip_accelerator(target)
    if source == target:
        return "untranslated"
    if max(len(source.split()), len(target.split())) > max_words:
        return "too_long"
    if len(source.split()) < min_words:
        return "too_short"
    return source, target


def _is_paragraph(text):
    """Lines of wrapped prose: no tab, no empty line, none indented or starting with "-"."""
    lines = text.split("\n")
    return "\t" not in text and all(line and not line[0].isspace() and not line.startswith("-")
                                    for line in lines)


def _split_catalogs(sizes, test_ratio, seed):
    """Names of the catalogs held out: a seeded order, until `test_ratio` of the pairs."""
    names = sorted(sizes)
    order = np.random.default_rng(seed).permutation(len(names))
    total, held, test = sum(sizes.values()), 0, set()
    for index in order:
        if held >= test_ratio * total or len(test) == len(names) - 1:
            break
        test.add(names[index])
        held += sizes[names[index]]
    return test


def gettext_pairs(language, locale_dir=LOCALE_DIR, test_ratio=0.05, seed=0, max_words=40,
                  min_words=0, paragraphs=False):
    """English -> `language` pairs from the installed catalogs, split by catalog.

    `min_words`, `paragraphs` (and `max_words`): see `clean_pair`; `**LONG` gives the
    long-sentence set.

    Returns:
        `(train_pairs, test_pairs, metadata)`: lists of `(source, target)`
        str tuples; `metadata` has the catalogs on each side and the counts
        (`messages` read, `kept`, and `dropped` by reason).

    Raises:
        FileNotFoundError: no catalog for `language` (the line lists those found).
        ValueError: `test_ratio` outside [0, 1), or nothing left after cleaning.
    """
    if not (isinstance(test_ratio, (int, float)) and 0 <= test_ratio < 1):
        raise ZooError(f"test_ratio must be in [0, 1); received test_ratio={test_ratio!r}")
    dropped = collections.Counter({reason: 0 for reason in _DROP_REASONS})
    by_catalog, seen, messages, unreadable = {}, set(), 0, []
    for path in catalog_paths(language, locale_dir):
        try:
            raw = read_catalog(path)
        except (OSError, UnicodeDecodeError, ValueError):  # not UTF-8 (a few), or damaged
            unreadable.append(path.name)
            continue
        pairs = []
        for source, target in raw:
            messages += 1
            cleaned = clean_pair(source, target, max_words, min_words, paragraphs)
            if isinstance(cleaned, str):
                dropped[cleaned] += 1
            elif cleaned in seen:
                dropped["duplicate"] += 1
            else:
                seen.add(cleaned)
                pairs.append(cleaned)
        if pairs:
            by_catalog[path.stem] = pairs
    if not by_catalog:
        raise ZooError(f"no usable pair in the {language!r} catalogs of {locale_dir}")
    test_names = _split_catalogs({k: len(v) for k, v in by_catalog.items()}, test_ratio, seed)
    test = [pair for name in sorted(test_names) for pair in by_catalog[name]]
    test_sources = {source for source, _ in test}
    train = []
    for name in sorted(set(by_catalog) - test_names):
        for pair in by_catalog[name]:
            if pair[0] in test_sources:
                dropped["in_test"] += 1
            else:
                train.append(pair)
    metadata = {
        "locale_dir": str(locale_dir), "language": language, "messages": messages,
        "kept": len(train) + len(test), "dropped": dict(dropped),
        "unreadable_catalogs": unreadable,
        "train_catalogs": sorted(set(by_catalog) - test_names),
        "test_catalogs": sorted(test_names), "max_words": max_words, "min_words": min_words,
        "paragraphs": paragraphs,
        "test_ratio": test_ratio, "seed": seed,
    }
    return train, test, metadata
