"""Translation pairs read from files: your own TSV files (`tsv`) and the machine's
gettext catalogs (`gettext`)."""

import logging
import pathlib

import numpy as np

from zoo.datasets import catalogs
from zoo.datasets.pairs import TranslationData, update_progress
from zoo.errors import ZooError
from zoo.progress import progress_bar

logger = logging.getLogger(__name__)

_BYTE_ORDER_MARK = b"\xef\xbb\xbf"
# Why a line is skipped, tested in this order on the decoded line and its tab-split
# fields; the first rule that holds names the reason. A line no rule holds for is a pair.
_LINE_RULES = (
    ("blank", lambda line, fields: not line.strip()),
    ("no_tab", lambda line, fields: len(fields) == 1),
    ("extra_tab", lambda line, fields: len(fields) > 2),
    ("empty_side", lambda line, fields: not fields[0].strip() or not fields[1].strip()),
)
_SKIP_REASONS = tuple(reason for reason, _ in _LINE_RULES) + ("invalid_utf8",)
_EXAMPLES = 5  # skipped lines (not blank ones) named in the warning


def _count_lines(path):
    """The number of lines `enumerate(open(path, "rb"))` gives, read in 1 MiB chunks."""
    lines, last = 0, b""
    with open(path, "rb") as file:
        for chunk in iter(lambda: file.read(1 << 20), b""):
            lines += chunk.count(b"\n")
            last = chunk
    return lines + (1 if last and not last.endswith(b"\n") else 0)


def _lines(path, progress):
    """`(line number, bytes)` of each line of `path`, without its line end or a BOM.

    With `progress`, the lines are counted first (a fast pass over the bytes)
    so the bar (unit "line") has a total.
    """
    total = _count_lines(path) if progress else None
    bar = progress_bar(total, "line", progress)
    with open(path, "rb") as file:
        for number, raw in enumerate(file, start=1):
            update_progress(bar, number, total)
            if number == 1 and raw.startswith(_BYTE_ORDER_MARK):
                raw = raw[len(_BYTE_ORDER_MARK):]
            yield number, raw.rstrip(b"\r\n")


def _parse_line(raw):
    """`(pair, None)` for a `source<TAB>target` line, `(None, reason)` for a skipped one."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None, "invalid_utf8"
    fields = line.split("\t")
    for reason, holds in _LINE_RULES:
        if holds(line, fields):
            return None, reason
    return (fields[0].strip(), fields[1].strip()), None


def _report_skipped(path, pairs, skipped, examples):
    """Warn about the skipped lines; raise when no line was a pair."""
    if sum(skipped.values()):
        logger.warning(
            "%s: skipped %d of %d lines (%s)%s",
            path,
            sum(skipped.values()),
            len(pairs) + sum(skipped.values()),
            ", ".join(f"{reason}: {count}" for reason, count in skipped.items() if count),
            "; first: " + ", ".join(f"line {n} {r}" for n, r in examples) if examples else "",
        )
    if not pairs:
        raise ZooError(
            f"{path} has no valid `source<TAB>target` lines; skipped: "
            f"{ {reason: count for reason, count in skipped.items() if count} }"
        )


def _read_tsv_pairs(path, progress=False):
    """Parse one `source<TAB>target` file: (pairs, skipped counts by reason)."""
    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"TSV file not found: {path}")
    pairs = []
    skipped = dict.fromkeys(_SKIP_REASONS, 0)
    examples = []  # (line number, reason) of the first skipped lines
    for number, raw in _lines(path, progress):
        pair, reason = _parse_line(raw)
        if reason is None:
            pairs.append(pair)
            continue
        skipped[reason] += 1
        if len(examples) < _EXAMPLES and reason != "blank":
            examples.append((number, reason))
    _report_skipped(path, pairs, skipped, examples)
    return pairs, skipped


def tsv(
    path,
    test_path=None,
    test_ratio=0.05,
    seed=0,
    name=None,
    source_language="",
    target_language="",
    progress=False,
):
    """Read `source<TAB>target` pairs, one a line, UTF-8 with or without BOM.

    Lines that are blank, have no tab, more than one tab, an empty side
    (after stripping spaces) or invalid UTF-8 are skipped, counted in
    `skipped` (summed over files) and logged as a warning.

    Args:
        path: the training file (or the whole data set if no `test_path`).
        test_path: a separate test file; then `test_ratio` is not used.
        test_ratio: share of `path`'s pairs held out for testing, drawn at
            random with `seed` (at least one pair when the ratio is > 0 and
            there are two pairs or more). Order within each split is kept.
        seed: NumPy seed for the split.
        name: dataset name; defaults to the file's stem.
        source_language, target_language: recorded as given.
        progress: show a progress bar (unit "line") on stdout, one per file.

    Returns:
        `TranslationData`; `metadata["skipped_by_file"]` has per-file counts.

    Raises:
        FileNotFoundError: a file is missing.
        ValueError: a file has no valid pair, or `test_ratio` is outside [0, 1).
    """
    if not (isinstance(test_ratio, (int, float)) and 0 <= test_ratio < 1):
        raise ZooError(f"test_ratio must be in [0, 1); received test_ratio={test_ratio!r}")
    pairs, skipped = _read_tsv_pairs(path, progress)
    skipped_by_file = {str(path): skipped}
    if test_path is not None:
        train_pairs = pairs
        test_pairs, test_skipped = _read_tsv_pairs(test_path, progress)
        skipped_by_file[str(test_path)] = test_skipped
    else:
        num_test = 0
        if test_ratio > 0 and len(pairs) > 1:
            num_test = min(max(1, round(test_ratio * len(pairs))), len(pairs) - 1)
        is_test = np.zeros(len(pairs), bool)
        is_test[np.random.default_rng(seed).permutation(len(pairs))[:num_test]] = True
        train_pairs = [pair for pair, test in zip(pairs, is_test) if not test]
        test_pairs = [pair for pair, test in zip(pairs, is_test) if test]
    total_skipped = {
        reason: sum(counts[reason] for counts in skipped_by_file.values())
        for reason in _SKIP_REASONS
    }
    return TranslationData(
        name=name or pathlib.Path(path).stem,
        train_pairs=train_pairs,
        test_pairs=test_pairs,
        source_language=source_language,
        target_language=target_language,
        skipped=total_skipped,
        metadata={
            "path": str(path),
            "test_path": None if test_path is None else str(test_path),
            "test_ratio": None if test_path is not None else test_ratio,
            "seed": seed,
            "skipped_by_file": skipped_by_file,
        },
    )


def gettext(language, locale_dir=None, test_ratio=0.05, seed=0, progress=False, long=False):
    """English -> `language` user-interface strings from the installed gettext catalogs.

    Real translations by people, about 40,000 pairs for `es`, `de` or `fr` on
    a Debian machine; cleaned and split by catalog as `zoo.datasets.catalogs` says.
    `long=True`: only the messages of 12 to 60 English words (`catalogs.LONG`;
    about 3,000 pairs for `es`, `de` or `fr`), the set of `gettext-long:LANG`.
    `locale_dir` defaults to `/usr/share/locale`. `progress` is accepted for
    symmetry and unused (reading takes about a second).
    """
    del progress
    train_pairs, test_pairs, metadata = catalogs.gettext_pairs(
        language, catalogs.LOCALE_DIR if locale_dir is None else locale_dir,
        test_ratio=test_ratio, seed=seed, **(catalogs.LONG if long else {}),
    )
    name = f"gettext{'-long' if long else ''}-{language}"
    logger.info("%s: %d pairs kept of %d messages", name, metadata["kept"], metadata["messages"])
    return TranslationData(
        name=name, train_pairs=train_pairs, test_pairs=test_pairs,
        source_language="en", target_language=language, metadata=metadata,
    )


