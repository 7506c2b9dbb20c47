"""Generated translation tasks: number words (`numbers`) and written-out dates (`dates`).

Both draw distinct items with a NumPy seed, so the same seed gives the same
split and no test item occurs in training.
"""

import datetime

import babel
import babel.dates
import numpy as np
from num2words import num2words

from keras_attention.checks import check_int
from zoo.datasets.pairs import TranslationData, update_progress
from zoo.errors import ZooError
from zoo.progress import progress_bar


def _stratified_sample(rng, strata, total):
    """Draw `total` distinct ints, as evenly as possible from each `(low, high)`
    stratum (inclusive); a stratum smaller than its share gives all it has."""
    sizes = [high - low + 1 for low, high in strata]
    quotas = [0] * len(strata)
    remaining, open_strata = total, list(range(len(strata)))
    while remaining > 0 and open_strata:
        share = max(1, remaining // len(open_strata))
        for index in list(open_strata):
            take = min(share, sizes[index] - quotas[index], remaining)
            quotas[index] += take
            remaining -= take
            if quotas[index] == sizes[index]:
                open_strata.remove(index)
            if remaining == 0:
                break
    if remaining:
        raise ZooError(f"cannot draw {total} distinct values; only {sum(sizes)} exist")
    drawn = [
        low + rng.choice(size, quota, replace=False)
        for (low, _), size, quota in zip(strata, sizes, quotas)
        if quota
    ]
    return rng.permutation(np.concatenate(drawn))


def numbers(
    num_train=20_000,
    num_test=1_000,
    seed=0,
    max_number=999_999,
    source_language="de",
    target_language="en",
    progress=False,
):
    """Number words in `source_language` -> the same number in `target_language`.

    Numbers are drawn without replacement from 0..`max_number`, evenly over
    the number of digits (as many 3-digit as 6-digit numbers, all of 0..99
    when there is room), so short numbers are not drowned out. The first
    `num_test` drawn are the test set: no test number occurs in training.
    About 3 s for the default 21,000 pairs.

    Args:
        num_train, num_test: number of pairs in each split.
        seed: NumPy seed; the same seed gives the same split.
        max_number: the largest number (at most 999,999,999).
        source_language, target_language: `num2words` language codes.
        progress: show a progress bar (unit "pair") on stdout.

    Returns:
        `TranslationData`; `metadata["train_numbers"]`/`["test_numbers"]`
        hold the numbers.

    Example:

    >>> data = numbers(num_train=100, num_test=10)
    >>> data.train_pairs[0]  # doctest: +SKIP
    ('dreihundertvierundzwanzig', 'three hundred and twenty-four')
    """
    check_int("num_train", num_train, 1)
    check_int("num_test", num_test, 0)
    check_int("max_number", max_number, 1)
    if max_number > 999_999_999:
        raise ZooError(f"max_number must be at most 999,999,999; received {max_number}")
    if num_train + num_test > max_number + 1:
        raise ZooError(
            f"num_train + num_test must be at most max_number + 1 = {max_number + 1}; "
            f"received num_train={num_train}, num_test={num_test}"
        )
    for name, language in (
        ("source_language", source_language),
        ("target_language", target_language),
    ):
        try:
            num2words(1, lang=language)
        except NotImplementedError:
            raise ZooError(
                f"{name} must be a language num2words knows; received {language!r}"
            ) from None

    digits = len(str(max_number))
    strata = [
        (0 if d == 1 else 10 ** (d - 1), min(10**d - 1, max_number)) for d in range(1, digits + 1)
    ]
    rng = np.random.default_rng(seed)
    drawn = [int(n) for n in _stratified_sample(rng, strata, num_train + num_test)]
    test_numbers, train_numbers = drawn[:num_test], drawn[num_test:]
    bar = progress_bar(len(drawn), "pair", progress)
    pairs = []
    for n in drawn:
        pairs.append((num2words(n, lang=source_language), num2words(n, lang=target_language)))
        update_progress(bar, len(pairs), len(drawn))

    return TranslationData(
        name="numbers",
        train_pairs=pairs[num_test:],
        test_pairs=pairs[:num_test],
        source_language=source_language,
        target_language=target_language,
        metadata={
            "seed": seed,
            "max_number": max_number,
            "train_numbers": train_numbers,
            "test_numbers": test_numbers,
        },
    )


def dates(
    num_train=10_000,
    num_test=1_000,
    seed=0,
    locale="de_DE",
    formats=("full", "long", "medium"),
    first_year=1900,
    last_year=2099,
    progress=False,
):
    """Dates written by `babel` in `locale` -> ISO 8601 dates.

    "Dienstag, 5. März 2024" (full), "5. März 2024" (long), "05.03.2024"
    (medium) -> "2024-03-05". Each date gets one format, drawn at random.
    Dates are distinct; no test date occurs in training. ("short" is left
    out by default: its two-digit year is ambiguous.)

    Args:
        num_train, num_test: number of pairs in each split.
        seed: NumPy seed.
        locale: a babel locale, e.g. "de_DE", "fr_FR", "en_US".
        formats: babel date formats ("full", "long", "medium", "short") or
            CLDR patterns such as "d. MMMM y".
        first_year, last_year: the range of years (inclusive).
        progress: show a progress bar (unit "pair") on stdout.

    Returns:
        `TranslationData` with target language "iso8601".
    """
    check_int("num_train", num_train, 1)
    check_int("num_test", num_test, 0)
    try:
        babel.Locale.parse(locale)
    except (ValueError, babel.UnknownLocaleError) as error:
        raise ZooError(f"locale must be a babel locale; received {locale!r} ({error})") from None
    if isinstance(formats, str) or not formats:
        raise ZooError(f"formats must be a non-empty list of formats; received {formats!r}")
    if not (1 <= first_year <= last_year <= 9999):
        raise ZooError(
            "need 1 <= first_year <= last_year <= 9999; received "
            f"first_year={first_year}, last_year={last_year}"
        )
    first = datetime.date(first_year, 1, 1).toordinal()
    last = datetime.date(last_year, 12, 31).toordinal()
    if num_train + num_test > last - first + 1:
        raise ZooError(
            f"num_train + num_test must be at most the {last - first + 1} days between "
            f"{first_year} and {last_year}; received num_train={num_train}, num_test={num_test}"
        )
    rng = np.random.default_rng(seed)
    ordinals = first + rng.choice(last - first + 1, num_train + num_test, replace=False)
    chosen_formats = rng.integers(0, len(formats), num_train + num_test)
    bar = progress_bar(num_train + num_test, "pair", progress)
    pairs = []
    for ordinal, format_index in zip(ordinals.tolist(), chosen_formats.tolist()):
        day = datetime.date.fromordinal(ordinal)
        source = babel.dates.format_date(day, format=formats[format_index], locale=locale)
        pairs.append((source, day.isoformat()))
        update_progress(bar, len(pairs), num_train + num_test)
    return TranslationData(
        name="dates",
        train_pairs=pairs[num_test:],
        test_pairs=pairs[:num_test],
        source_language=locale,
        target_language="iso8601",
        metadata={"seed": seed, "formats": list(formats), "years": (first_year, last_year)},
    )


