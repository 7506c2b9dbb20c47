"""Offline datasets: translation pairs for the seq2seq models, images for ViT.

Nothing here downloads anything, except `fashion_mnist()` as a last resort
when no local copy exists (a convenience for users; tests never take it).

Translation (all return a `TranslationData`, pairs are `(source, target)`):

* `numbers()`: German number words -> English number words, from
  `num2words` ("dreihundertvierundzwanzig" -> "three hundred and
  twenty-four"). German writes units before tens inside one compound word,
  English the other way round in separate words: the model has to learn to
  reorder, which is what attention is for (Bahdanau et al. 2015).
* `dates()`: German dates written out by `babel` ("Dienstag, 5. März 2024",
  "05.03.2024") -> ISO 8601 ("2024-03-05").
* `tsv(path)`: your own `source<TAB>target` file.
* `gettext(language)`: English -> LANG user-interface strings from the
  machine's installed `.mo` catalogs (`zoo.catalogs`), split by catalog.
* `get_translation_dataset("numbers" | "dates" | "tsv:PATH" | "gettext:LANG", **kwargs)`.

Each takes `progress=False`; with True a `keras.utils.Progbar` on stdout
counts the pairs generated or the lines read.

Images (all return an `ImageData`: uint8 images (N, H, W, C) and int labels;
it unpacks as `(x_train, y_train), (x_test, y_test), class_names`):

* `digits()`: scikit-learn's 8x8 handwritten digits (bundled with sklearn).
* `fashion_mnist(data_dir=None)`: Fashion-MNIST IDX files; by default from
  `/usr/share/datasets/fashion-mnist` (Debian package
  `dataset-fashion-mnist`).
* `images(directory, image_size)`: one sub-folder per class.
* `read_idx(path)`: the IDX reader (plain or gzip).
"""

import dataclasses
import datetime
import gzip
import logging
import pathlib

import babel
import babel.dates
import keras
import numpy as np
from num2words import num2words

from keras_attention.checks import check_int
from zoo import catalogs
from zoo.progress import progress_bar

logger = logging.getLogger(__name__)

TRANSLATION_DATASETS = ("numbers", "dates", "tsv:PATH", "gettext:LANG")
PROGRESS_EVERY = 1000  # items between two progress bar updates


def _update(bar, count, total):
    """Move `bar` to `count` every `PROGRESS_EVERY` items and at `total`."""
    if bar is not None and (count % PROGRESS_EVERY == 0 or count == total):
        bar.update(count)


@dataclasses.dataclass
class TranslationData:
    """Sentence pairs with a fixed train/test split.

    Attributes:
        name: dataset name, e.g. "numbers".
        train_pairs: list of `(source, target)` str tuples.
        test_pairs: held-out pairs, never in `train_pairs`' generation set.
        source_language, target_language: language codes, "" if unknown.
        skipped: lines skipped while reading, by reason (`tsv` only).
        metadata: how the data was made (seed, ranges, files ...).
    """

    name: str
    train_pairs: list
    test_pairs: list
    source_language: str = ""
    target_language: str = ""
    skipped: dict = dataclasses.field(default_factory=dict)
    metadata: dict = dataclasses.field(default_factory=dict)

    @property
    def train_sources(self):
        return [source for source, _ in self.train_pairs]

    @property
    def train_targets(self):
        return [target for _, target in self.train_pairs]

    @property
    def test_sources(self):
        return [source for source, _ in self.test_pairs]

    @property
    def test_targets(self):
        return [target for _, target in self.test_pairs]

    def __repr__(self):
        return (
            f"TranslationData(name={self.name!r}, train={len(self.train_pairs)}, "
            f"test={len(self.test_pairs)}, {self.source_language or '?'}->"
            f"{self.target_language or '?'}, skipped={self.skipped})"
        )


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
        raise ValueError(f"cannot draw {total} distinct values; only {sum(sizes)} exist")
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
        raise ValueError(f"max_number must be at most 999,999,999; received {max_number}")
    if num_train + num_test > max_number + 1:
        raise ValueError(
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
            raise ValueError(
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
        _update(bar, len(pairs), len(drawn))

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
        raise ValueError(f"locale must be a babel locale; received {locale!r} ({error})") from None
    if isinstance(formats, str) or not formats:
        raise ValueError(f"formats must be a non-empty list of formats; received {formats!r}")
    if not (1 <= first_year <= last_year <= 9999):
        raise ValueError(
            "need 1 <= first_year <= last_year <= 9999; received "
            f"first_year={first_year}, last_year={last_year}"
        )
    first = datetime.date(first_year, 1, 1).toordinal()
    last = datetime.date(last_year, 12, 31).toordinal()
    if num_train + num_test > last - first + 1:
        raise ValueError(
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
        _update(bar, len(pairs), num_train + num_test)
    return TranslationData(
        name="dates",
        train_pairs=pairs[num_test:],
        test_pairs=pairs[:num_test],
        source_language=locale,
        target_language="iso8601",
        metadata={"seed": seed, "formats": list(formats), "years": (first_year, last_year)},
    )


# === TSV files ===

_SKIP_REASONS = ("blank", "no_tab", "extra_tab", "empty_side", "invalid_utf8")


def _count_lines(path):
    """The number of lines `enumerate(open(path, "rb"))` gives, read in 1 MiB chunks."""
    lines, last = 0, b""
    with open(path, "rb") as file:
        for chunk in iter(lambda: file.read(1 << 20), b""):
            lines += chunk.count(b"\n")
            last = chunk
    return lines + (1 if last and not last.endswith(b"\n") else 0)


def _read_tsv_pairs(path, progress=False):  # noqa: C901 - one pass, a branch per line rule
    """Parse one `source<TAB>target` file: (pairs, skipped counts, first bad line numbers).

    With `progress`, the lines are counted first (a fast pass over the bytes)
    so the bar (unit "line") has a total.
    """
    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"TSV file not found: {path}")
    total = _count_lines(path) if progress else None
    bar = progress_bar(total, "line", progress)
    pairs = []
    skipped = dict.fromkeys(_SKIP_REASONS, 0)
    examples = []  # (line number, reason) of the first skipped lines
    with open(path, "rb") as file:
        for number, raw in enumerate(file, start=1):
            _update(bar, number, total)
            if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]  # UTF-8 byte-order mark
            raw = raw.rstrip(b"\r\n")
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                reason = "invalid_utf8"
            else:
                fields = line.split("\t")
                if not line.strip():
                    reason = "blank"
                elif len(fields) == 1:
                    reason = "no_tab"
                elif len(fields) > 2:
                    reason = "extra_tab"
                elif not fields[0].strip() or not fields[1].strip():
                    reason = "empty_side"
                else:
                    pairs.append((fields[0].strip(), fields[1].strip()))
                    continue
            skipped[reason] += 1
            if len(examples) < 5 and reason != "blank":
                examples.append((number, reason))
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
        raise ValueError(
            f"{path} has no valid `source<TAB>target` lines; skipped: "
            f"{ {reason: count for reason, count in skipped.items() if count} }"
        )
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
        raise ValueError(f"test_ratio must be in [0, 1); received test_ratio={test_ratio!r}")
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


def gettext(language, locale_dir=None, test_ratio=0.05, seed=0, progress=False):
    """English -> `language` user-interface strings from the installed gettext catalogs.

    Real translations by people, about 40,000 pairs for `es`, `de` or `fr` on
    a Debian machine; cleaned and split by catalog as `zoo.catalogs` says.
    `locale_dir` defaults to `/usr/share/locale`. `progress` is accepted for
    symmetry and unused (reading takes about a second).
    """
    del progress
    train_pairs, test_pairs, metadata = catalogs.gettext_pairs(
        language, catalogs.LOCALE_DIR if locale_dir is None else locale_dir,
        test_ratio=test_ratio, seed=seed,
    )
    logger.info("gettext:%s: %d pairs kept of %d messages", language, metadata["kept"],
                metadata["messages"])
    return TranslationData(
        name=f"gettext-{language}", train_pairs=train_pairs, test_pairs=test_pairs,
        source_language="en", target_language=language, metadata=metadata,
    )


def get_translation_dataset(spec, **kwargs):
    """Build a translation dataset from its name: "numbers", "dates", "tsv:PATH", "gettext:LANG".

    `kwargs` go to `numbers`, `dates`, `tsv` or `gettext`.
    """
    if not isinstance(spec, str):
        raise ValueError(f"spec must be a str; received {spec!r}")
    if spec == "numbers":
        return numbers(**kwargs)
    if spec == "dates":
        return dates(**kwargs)
    if spec.startswith("tsv:"):
        path = spec[len("tsv:") :]
        if not path:
            raise ValueError(f"'tsv:' needs a path, e.g. 'tsv:data/train.tsv'; received {spec!r}")
        return tsv(path, **kwargs)
    if spec.startswith("gettext:"):
        return gettext(spec[len("gettext:"):], **kwargs)
    raise ValueError(
        f"unknown translation dataset {spec!r}; available: {', '.join(TRANSLATION_DATASETS)}"
    )


# === Images ===


@dataclasses.dataclass
class ImageData:
    """Images (N, H, W, C) uint8 in 0..255 and int64 labels (N,), split in two.

    Unpacks like `keras.datasets`: `(x_train, y_train), (x_test, y_test),
    class_names = data`.
    """

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    class_names: list
    metadata: dict = dataclasses.field(default_factory=dict)

    def __iter__(self):
        return iter(((self.x_train, self.y_train), (self.x_test, self.y_test), self.class_names))

    def __repr__(self):
        return (
            f"ImageData(name={self.name!r}, x_train={self.x_train.shape}, "
            f"x_test={self.x_test.shape}, classes={len(self.class_names)})"
        )


def digits(test_ratio=0.2, seed=0, image_size=None):
    """scikit-learn's handwritten digits: 1,797 images (8, 8, 1), classes "0".."9".

    Pixel values 0..16 are scaled to 0..255 uint8. The split is stratified
    by class and fixed by `seed`. `image_size=28` resizes them (bilinear) to
    28x28, the shape of Fashion-MNIST: the tutorials' smoke runs use that
    when Fashion-MNIST is not on the machine.
    """
    # scikit-learn loads in about a second: only for the digits dataset.
    from sklearn.datasets import load_digits  # noqa: PLC0415
    from sklearn.model_selection import train_test_split  # noqa: PLC0415

    if not (isinstance(test_ratio, (int, float)) and 0 < test_ratio < 1):
        raise ValueError(f"test_ratio must be in (0, 1); received test_ratio={test_ratio!r}")
    if image_size is not None and (isinstance(image_size, bool) or not isinstance(image_size, int)
                                   or image_size < 1):
        raise ValueError(f"image_size must be a positive integer; received {image_size!r}")
    bunch = load_digits()
    images = np.round(bunch.images * (255.0 / 16.0)).astype(np.uint8)[..., None]  # (N, 8, 8, 1)
    if image_size is not None and image_size != 8:
        images = _resize(images, image_size)
    labels = bunch.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(
        images, labels, test_size=test_ratio, random_state=seed, stratify=labels
    )
    return ImageData(
        name="digits",
        x_train=x_train,
        y_train=y_train,
        x_test=x_test,
        y_test=y_test,
        class_names=[str(digit) for digit in range(10)],
        metadata={"test_ratio": test_ratio, "seed": seed},
    )


def _resize(images, size):
    """uint8 images (N, h, w, C) resized bilinearly to (N, size, size, C)."""
    resized = keras.ops.image.resize(images.astype(np.float32), (size, size),
                                     interpolation="bilinear")
    return np.clip(np.round(keras.ops.convert_to_numpy(resized)), 0, 255).astype(np.uint8)


_IDX_DTYPES = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


def read_idx(path):
    """Read an IDX file (LeCun's MNIST format), plain or gzip-compressed.

    Layout: two zero bytes, a type byte (0x08 uint8, 0x09 int8, 0x0B int16,
    0x0C int32, 0x0D float32, 0x0E float64), the number of dimensions, each
    dimension as a big-endian uint32, then the data, big-endian, row-major.

    Returns:
        `np.ndarray` with those dimensions, in native byte order.
    """
    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"IDX file not found: {path}")
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    if len(data) < 4 or data[:2] != b"\x00\x00" or data[2] not in _IDX_DTYPES:
        raise ValueError(f"{path} is not an IDX file; it starts with {data[:4]!r}")
    dtype, rank = _IDX_DTYPES[data[2]], data[3]
    header = 4 + 4 * rank
    if len(data) < header:
        raise ValueError(f"{path}: truncated IDX header ({len(data)} bytes, rank {rank})")
    shape = tuple(int(d) for d in np.frombuffer(data, ">u4", count=rank, offset=4))
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(data) - header != expected:
        raise ValueError(
            f"{path}: IDX header says shape {shape} of {dtype} ({expected} bytes) but the "
            f"file holds {len(data) - header} data bytes"
        )
    array = np.frombuffer(data, dtype, offset=header).reshape(shape)
    return array.astype(dtype.newbyteorder("="))


FASHION_MNIST_DIR = pathlib.Path("/usr/share/datasets/fashion-mnist")
FASHION_MNIST_CLASSES = [
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
]
_FASHION_MNIST_FILES = {
    "x_train": "train-images-idx3-ubyte",
    "y_train": "train-labels-idx1-ubyte",
    "x_test": "t10k-images-idx3-ubyte",
    "y_test": "t10k-labels-idx1-ubyte",
}


def _find_idx_file(directory, stem):
    # "train-images-idx3-ubyte" is also seen as "train-images.idx3-ubyte".
    dotted = stem.replace("-idx", ".idx")
    for name in (stem + ".gz", stem, dotted + ".gz", dotted):
        if (directory / name).is_file():
            return directory / name
    return None


FASHION_MNIST_PACKAGE = "dataset-fashion-mnist"


def _download_fashion_mnist():
    """`keras.datasets.fashion_mnist.load_data()`, or one clear error without network."""
    logger.warning("%s not found; downloading Fashion-MNIST with keras", FASHION_MNIST_DIR)
    try:
        return keras.datasets.fashion_mnist.load_data()
    except Exception as error:  # keras wraps URLError/OSError in a bare Exception
        reason = str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__
        raise FileNotFoundError(
            f"Fashion-MNIST not found: {FASHION_MNIST_DIR} is missing (Debian package "
            f"{FASHION_MNIST_PACKAGE}: apt-get install {FASHION_MNIST_PACKAGE}) and the download "
            f"with keras.datasets failed ({reason}); pass --data-dir DIR with the four IDX files"
        ) from error


def fashion_mnist(data_dir=None, download=True):
    """Fashion-MNIST: 60,000 + 10,000 images (28, 28, 1) uint8, 10 classes.

    Reads the four IDX files (`train-images-idx3-ubyte.gz`,
    `train-labels-idx1-ubyte.gz`, `t10k-images-idx3-ubyte.gz`,
    `t10k-labels-idx1-ubyte.gz`; `.gz` optional, `.idx` also accepted in place
    of `-idx`) from `data_dir`. Without `data_dir`: from
    `/usr/share/datasets/fashion-mnist` (Debian package
    `dataset-fashion-mnist`) when it is there, else
    `keras.datasets.fashion_mnist.load_data()`, which downloads (unless
    `download=False`).

    Raises:
        FileNotFoundError: `data_dir` was given and a file is missing, or there
            is no `data_dir`, no Debian package and no network (one line that
            names the package, `--data-dir` and what was tried).
    """
    if data_dir is None and _find_idx_file(FASHION_MNIST_DIR, _FASHION_MNIST_FILES["x_train"]):
        data_dir = FASHION_MNIST_DIR
    if data_dir is None and not download:
        raise FileNotFoundError(
            f"Fashion-MNIST not found: {FASHION_MNIST_DIR} is missing (Debian package "
            f"{FASHION_MNIST_PACKAGE}) and download=False; pass data_dir with the four IDX files"
        )
    if data_dir is None:
        (x_train, y_train), (x_test, y_test) = _download_fashion_mnist()
        source = "keras.datasets.fashion_mnist"
    else:
        data_dir = pathlib.Path(data_dir)
        arrays = {}
        for key, stem in _FASHION_MNIST_FILES.items():
            path = _find_idx_file(data_dir, stem)
            if path is None:
                raise FileNotFoundError(
                    f"{stem}[.gz] not found in {data_dir}; expected the files "
                    f"{sorted(_FASHION_MNIST_FILES.values())}"
                )
            arrays[key] = read_idx(path)
        x_train, y_train, x_test, y_test = (
            arrays["x_train"],
            arrays["y_train"],
            arrays["x_test"],
            arrays["y_test"],
        )
        source = str(data_dir)
    for images, labels in ((x_train, y_train), (x_test, y_test)):
        if images.ndim != 3 or labels.shape != images.shape[:1]:
            raise ValueError(
                f"Fashion-MNIST from {source}: expected images (N, 28, 28) and labels (N,); "
                f"received {images.shape} and {labels.shape}"
            )
    return ImageData(
        name="fashion_mnist",
        x_train=x_train.astype(np.uint8)[..., None],
        y_train=y_train.astype(np.int64),
        x_test=x_test.astype(np.uint8)[..., None],
        y_test=y_test.astype(np.int64),
        class_names=list(FASHION_MNIST_CLASSES),
        metadata={"source": source},
    )


def images(directory, image_size, test_ratio=0.2, seed=0, color_mode="rgb"):
    """Images in `directory/<class name>/*` -> resized uint8 arrays.

    Uses `keras.utils.image_dataset_from_directory` (jpeg, png, bmp, gif);
    class names are the sub-folder names, sorted; the split is fixed by
    `seed`.

    Args:
        directory: folder with one sub-folder per class.
        image_size: `(height, width)` (or an int for a square) to resize to.
        test_ratio: share of images held out, in (0, 1).
        seed: shuffling/split seed.
        color_mode: "rgb" (C=3), "grayscale" (C=1) or "rgba" (C=4).
    """
    directory = pathlib.Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"image directory not found: {directory}")
    if isinstance(image_size, int):
        image_size = (image_size, image_size)
    if len(tuple(image_size)) != 2 or min(image_size) < 1:
        raise ValueError(f"image_size must be (height, width) > 0; received {image_size!r}")
    if not (isinstance(test_ratio, (int, float)) and 0 < test_ratio < 1):
        raise ValueError(f"test_ratio must be in (0, 1); received test_ratio={test_ratio!r}")
    train, test = keras.utils.image_dataset_from_directory(
        directory,
        labels="inferred",
        label_mode="int",
        color_mode=color_mode,
        batch_size=None,
        image_size=tuple(image_size),
        shuffle=True,
        seed=seed,
        validation_split=test_ratio,
        subset="both",
        verbose=False,
    )
    class_names = list(train.class_names)

    def to_numpy(dataset):
        xs, ys = [], []
        for x, y in dataset.as_numpy_iterator():
            xs.append(np.clip(np.round(x), 0, 255).astype(np.uint8))
            ys.append(int(y))
        channels = {"rgb": 3, "grayscale": 1, "rgba": 4}[color_mode]
        if not xs:
            return np.zeros((0, *image_size, channels), np.uint8), np.zeros((0,), np.int64)
        return np.stack(xs), np.asarray(ys, np.int64)

    (x_train, y_train), (x_test, y_test) = to_numpy(train), to_numpy(test)
    return ImageData(
        name=directory.name,
        x_train=x_train,
        y_train=y_train,
        x_test=x_test,
        y_test=y_test,
        class_names=class_names,
        metadata={"directory": str(directory), "test_ratio": test_ratio, "seed": seed},
    )


# === One resolver for every dataset spec (what `zoo train --data` takes) ===

IMAGE_DATASETS = ("digits", "fashion-mnist", "images:DIR")
DATASETS = TRANSLATION_DATASETS + IMAGE_DATASETS


def dataset_kind(spec):
    """`"translation"` or `"image"` for a dataset spec, without loading anything.

    Raises:
        ValueError: `spec` names no dataset (the message lists them).
    """
    if not isinstance(spec, str):
        raise ValueError(f"spec must be a str; received {spec!r}")
    if spec in ("numbers", "dates") or spec.startswith(("tsv:", "gettext:")):
        return "translation"
    if spec in ("digits", "fashion-mnist", "fashion_mnist") or spec.startswith("images:"):
        return "image"
    raise ValueError(f"unknown dataset {spec!r}; available: {', '.join(DATASETS)}")


def _subset(rng_seed, items_or_arrays, size, what):
    """The first `size` items of a seeded permutation (all of them when `size` is None)."""
    count = len(items_or_arrays[0])
    if size is None or size >= count:
        return items_or_arrays
    check_int(what, size, 1 if what == "train_size" else 0)
    keep = np.sort(np.random.default_rng(rng_seed).permutation(count)[:size])
    return [
        item[keep] if isinstance(item, np.ndarray) else [item[i] for i in keep]
        for item in items_or_arrays
    ]


def load(
    spec,
    data_dir=None,
    *,
    train_size=None,
    test_size=None,
    test_ratio=None,
    test_path=None,
    image_size=None,
    color_mode="rgb",
    seed=0,
    progress=False,
):
    """Any dataset from its spec, as `zoo train --data SPEC` names it.

    Specs: `numbers`, `dates`, `tsv:PATH`, `gettext:LANG`, `digits`,
    `fashion-mnist`, `images:DIR`. Options that a dataset does not use are ignored.

    Args:
        spec: the dataset spec.
        data_dir: `fashion-mnist`: the folder with the IDX files (default
            `/usr/share/datasets/fashion-mnist` when present); `gettext:`: the
            locale folder (default `/usr/share/locale`).
        train_size, test_size: `numbers`/`dates`: how many pairs to generate
            (defaults 20,000/1,000 and 10,000/1,000); any other dataset: keep
            a random subset of that many (fixed by `seed`), None for all.
        test_ratio: the held-out share for `tsv:` without `test_path` and
            `gettext:` (default 0.05), `digits` and `images:` (default 0.2).
        test_path: `tsv:` only: a second file holding the test pairs.
        image_size: `images:` only: `(height, width)` or an int; required.
        color_mode: `images:` only: "rgb", "grayscale" or "rgba".
        seed: generation, split and subset seed.
        progress: `numbers`/`dates`/`tsv:` only: show a `keras.utils.Progbar`
            on stdout while pairs are generated or lines read. Image datasets
            load in about a second and show none.

    Returns:
        `TranslationData` or `ImageData`; `metadata["spec"]` is `spec`.

    Raises:
        ValueError: unknown spec, bad option; FileNotFoundError: missing file.
    """
    kind = dataset_kind(spec)
    for name, value in (("train_size", train_size), ("test_size", test_size)):
        if value is not None:
            check_int(name, value, 1 if name == "train_size" else 0)
    if kind == "translation":
        if spec in ("numbers", "dates"):
            defaults = (20_000, 1_000) if spec == "numbers" else (10_000, 1_000)
            data = get_translation_dataset(
                spec,
                num_train=defaults[0] if train_size is None else train_size,
                num_test=defaults[1] if test_size is None else test_size,
                seed=seed,
                progress=progress,
            )
        elif spec.startswith("gettext:"):
            data = get_translation_dataset(
                spec, locale_dir=data_dir, test_ratio=0.05 if test_ratio is None else test_ratio,
                seed=seed,
            )
            (data.train_pairs,) = _subset(seed, [data.train_pairs], train_size, "train_size")
            (data.test_pairs,) = _subset(seed + 1, [data.test_pairs], test_size, "test_size")
        else:
            data = get_translation_dataset(
                spec,
                test_path=test_path,
                test_ratio=0.05 if test_ratio is None else test_ratio,
                seed=seed,
                progress=progress,
            )
            (data.train_pairs,) = _subset(seed, [data.train_pairs], train_size, "train_size")
            (data.test_pairs,) = _subset(seed + 1, [data.test_pairs], test_size, "test_size")
    else:
        if spec == "digits":
            data = digits(test_ratio=0.2 if test_ratio is None else test_ratio, seed=seed)
        elif spec in ("fashion-mnist", "fashion_mnist"):
            data = fashion_mnist(data_dir)
        else:
            directory = spec[len("images:") :]
            if not directory:
                raise ValueError(f"'images:' needs a folder, e.g. 'images:photos/'; received {spec!r}")
            if image_size is None:
                raise ValueError("images: datasets need image_size=(height, width); received None")
            data = images(
                directory,
                image_size,
                test_ratio=0.2 if test_ratio is None else test_ratio,
                seed=seed,
                color_mode=color_mode,
            )
        data.x_train, data.y_train = _subset(seed, [data.x_train, data.y_train], train_size, "train_size")
        data.x_test, data.y_test = _subset(seed + 1, [data.x_test, data.y_test], test_size, "test_size")
    data.metadata["spec"] = spec
    return data
