"""Tests for zoo/datasets.py: offline translation data, TSV reading, images, IDX."""

import datetime
import gzip
import logging

import numpy as np
import pytest
from num2words import num2words

from zoo import datasets

# === numbers ===


def test_numbers_pairs_split_and_disjointness():
    data = datasets.numbers(num_train=600, num_test=100, seed=5)
    assert (len(data.train_pairs), len(data.test_pairs)) == (600, 100)
    train_numbers = data.metadata["train_numbers"]
    test_numbers = data.metadata["test_numbers"]
    assert not set(train_numbers) & set(test_numbers)
    assert len(set(train_numbers)) == 600 and len(set(test_numbers)) == 100
    assert not set(data.train_sources) & set(data.test_sources)
    for number, (source, target) in zip(
        train_numbers[:50] + test_numbers[:50], data.train_pairs[:50] + data.test_pairs[:50]
    ):
        assert source == num2words(number, lang="de")
        assert target == num2words(number, lang="en")
    assert all(0 <= n <= 999_999 for n in train_numbers + test_numbers)
    assert (data.source_language, data.target_language) == ("de", "en")


def test_numbers_cover_every_length_and_keep_real_compounds():
    data = datasets.numbers(num_train=3000, num_test=100, seed=0)
    lengths = {len(str(n)) for n in data.metadata["train_numbers"]}
    assert lengths == {1, 2, 3, 4, 5, 6}
    assert all(" " not in source for source in data.train_sources)  # one compound word
    assert ("dreihundertvierundzwanzig", "three hundred and twenty-four") in (
        data.train_pairs + data.test_pairs
    )  # all 900 three-digit numbers fit in 3,100 draws


def test_numbers_fixed_by_seed():
    first = datasets.numbers(num_train=200, num_test=20, seed=1)
    again = datasets.numbers(num_train=200, num_test=20, seed=1)
    other = datasets.numbers(num_train=200, num_test=20, seed=2)
    assert first.train_pairs == again.train_pairs and first.test_pairs == again.test_pairs
    assert first.train_pairs != other.train_pairs


def test_numbers_small_range_uses_every_number():
    data = datasets.numbers(num_train=90, num_test=10, max_number=99)
    assert sorted(data.metadata["train_numbers"] + data.metadata["test_numbers"]) == list(
        range(100)
    )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(num_train=95, num_test=10, max_number=99), "at most max_number"),
        (dict(num_train=0), "num_train"),
        (dict(num_test=-1), "num_test"),
        (dict(source_language="xx"), "source_language"),
        (dict(max_number=10**10), "max_number"),
    ],
)
def test_numbers_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        datasets.numbers(**kwargs)


# === dates ===


def test_dates_pairs_are_correct_and_disjoint():
    data = datasets.dates(num_train=300, num_test=50, seed=0)
    assert (len(data.train_pairs), len(data.test_pairs)) == (300, 50)
    assert not set(data.train_targets) & set(data.test_targets)
    for source, target in data.train_pairs + data.test_pairs:
        day = datetime.date.fromisoformat(target)
        assert 1900 <= day.year <= 2099
        assert str(day.year) in source
    german_months = {"Januar", "Februar", "März", "Juli", "Oktober", "Dezember"}
    assert any(month in source for source in data.train_sources for month in german_months)
    assert any("." in source and source[:2].isdigit() for source in data.train_sources)


def test_dates_rejects_bad_arguments():
    with pytest.raises(ValueError, match="locale"):
        datasets.dates(locale="xx_YY_bad")
    with pytest.raises(ValueError, match="formats"):
        datasets.dates(formats="long")
    with pytest.raises(ValueError, match="days"):
        datasets.dates(num_train=400, num_test=0, first_year=2000, last_year=2000)


# === tsv ===


def write(path, data):
    path.write_bytes(data)
    return path


def test_tsv_skips_and_counts_bad_lines(tmp_path, caplog):
    path = write(
        tmp_path / "pairs.tsv",
        b"\xef\xbb\xbfeins\tone\r\n"  # BOM and CRLF
        b"\n"  # blank
        b"   \t  \n"  # blank (only whitespace)
        b"zwei two\n"  # no tab
        b"drei\tthree\tmore\n"  # extra tab
        b"\tfour\n"  # empty source
        b"vier\t \n"  # empty target
        b"f\xfcnf\tfive\n"  # latin-1, invalid UTF-8
        b"  f\xc3\xbcnf \t five  \n"  # spaces around sides are stripped
        b"sechs\tsix",  # no final newline
    )
    with caplog.at_level(logging.WARNING, logger="zoo.datasets"):
        data = datasets.tsv(path, test_ratio=0)
    assert data.train_pairs == [("eins", "one"), ("fünf", "five"), ("sechs", "six")]
    assert data.test_pairs == []
    assert data.skipped == {
        "blank": 2,
        "no_tab": 1,
        "extra_tab": 1,
        "empty_side": 2,
        "invalid_utf8": 1,
    }
    assert data.name == "pairs"
    messages = " ".join(record.getMessage() for record in caplog.records)
    assert "skipped 7 of 10 lines" in messages and "no_tab: 1" in messages
    assert "line 4 no_tab" in messages


def test_tsv_clean_file_logs_nothing(tmp_path, caplog):
    path = write(tmp_path / "clean.tsv", "eins\tone\nzwei\ttwo\n".encode())
    with caplog.at_level(logging.WARNING, logger="zoo.datasets"):
        data = datasets.tsv(path, test_ratio=0)
    assert data.train_pairs == [("eins", "one"), ("zwei", "two")]
    assert sum(data.skipped.values()) == 0
    assert not caplog.records


def test_tsv_ratio_split_is_disjoint_and_fixed_by_seed(tmp_path):
    lines = "".join(f"quelle {i}\tziel {i}\n" for i in range(200))
    path = write(tmp_path / "big.tsv", lines.encode())
    data = datasets.tsv(path, test_ratio=0.1, seed=4)
    assert (len(data.train_pairs), len(data.test_pairs)) == (180, 20)
    assert not set(data.train_pairs) & set(data.test_pairs)
    assert sorted(data.train_pairs + data.test_pairs) == sorted(
        (f"quelle {i}", f"ziel {i}") for i in range(200)
    )
    # order within a split is the file's order
    assert data.train_pairs == sorted(data.train_pairs, key=lambda p: int(p[0].split()[1]))
    assert datasets.tsv(path, test_ratio=0.1, seed=4).test_pairs == data.test_pairs
    assert datasets.tsv(path, test_ratio=0.1, seed=5).test_pairs != data.test_pairs
    tiny = datasets.tsv(write(tmp_path / "tiny.tsv", b"a\tb\nc\td\n"), test_ratio=0.01)
    assert (len(tiny.train_pairs), len(tiny.test_pairs)) == (1, 1)


def test_tsv_with_separate_test_file(tmp_path):
    train = write(tmp_path / "train.tsv", b"a\tb\nc\td\nbad line\n")
    test = write(tmp_path / "test.tsv", b"\xef\xbb\xbfe\tf\n\n")
    data = datasets.tsv(train, test_path=test)
    assert data.train_pairs == [("a", "b"), ("c", "d")]
    assert data.test_pairs == [("e", "f")]
    assert data.skipped["no_tab"] == 1 and data.skipped["blank"] == 1
    assert data.metadata["skipped_by_file"][str(test)]["blank"] == 1


def test_tsv_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no-such.tsv"):
        datasets.tsv(tmp_path / "no-such.tsv")
    train = write(tmp_path / "train.tsv", b"a\tb\n")
    with pytest.raises(FileNotFoundError, match="missing-test.tsv"):
        datasets.tsv(train, test_path=tmp_path / "missing-test.tsv")
    empty = write(tmp_path / "empty.tsv", b"\n no tab here \n\t\n")
    with pytest.raises(ValueError, match="no valid"):
        datasets.tsv(empty)
    with pytest.raises(ValueError, match="test_ratio"):
        datasets.tsv(train, test_ratio=1.0)


def test_get_translation_dataset(tmp_path):
    data = datasets.get_translation_dataset("numbers", num_train=20, num_test=5)
    assert data.name == "numbers" and len(data.train_pairs) == 20
    assert datasets.get_translation_dataset("dates", num_train=10, num_test=2).name == "dates"
    path = write(tmp_path / "x.tsv", b"a\tb\nc\td\n")
    data = datasets.get_translation_dataset(f"tsv:{path}", test_ratio=0.5)
    assert len(data.train_pairs) == 1 and len(data.test_pairs) == 1
    with pytest.raises(ValueError, match="numbers, dates, tsv:PATH"):
        datasets.get_translation_dataset("wmt14")
    with pytest.raises(ValueError, match="needs a path"):
        datasets.get_translation_dataset("tsv:")


# === Progress bars ===


@pytest.mark.parametrize("generate", [datasets.numbers, datasets.dates])
def test_generated_datasets_show_progress_only_when_asked(capsys, generate):
    quiet = generate(num_train=1500, num_test=100, seed=3)
    assert capsys.readouterr().out == ""
    shown = generate(num_train=1500, num_test=100, seed=3, progress=True)
    out = capsys.readouterr().out
    assert "1000/1600" in out and "1600/1600" in out and "pair" in out
    assert (shown.train_pairs, shown.test_pairs) == (quiet.train_pairs, quiet.test_pairs)


def test_tsv_progress_counts_every_line_of_each_file(capsys, tmp_path):
    lines = "".join(f"quelle {i}\tziel {i}\n" for i in range(2499)) + "kein tab\nletzte\tlast"
    train = write(tmp_path / "train.tsv", lines.encode())
    test = write(tmp_path / "test.tsv", b"a\tb\n\nc\td\n")
    quiet = datasets.tsv(train, test_path=test)
    assert capsys.readouterr().out == ""
    shown = datasets.tsv(train, test_path=test, progress=True)
    out = capsys.readouterr().out
    assert "2501/2501" in out and "3/3" in out and "line" in out
    assert (shown.train_pairs, shown.test_pairs, shown.skipped) == (
        quiet.train_pairs,
        quiet.test_pairs,
        quiet.skipped,
    )


@pytest.mark.parametrize(
    "data, lines", [(b"", 0), (b"a\n", 1), (b"a", 1), (b"a\n\nb", 3), (b"\n" * 5, 5)]
)
def test_count_lines_matches_the_reader(tmp_path, data, lines):
    path = write(tmp_path / "x.tsv", data)
    assert datasets._count_lines(path) == lines
    with open(path, "rb") as file:
        assert sum(1 for _ in file) == lines


def test_load_passes_progress_to_text_datasets_only(capsys, tmp_path):
    data = datasets.load("numbers", train_size=50, test_size=5, progress=True)
    assert "55/55" in capsys.readouterr().out and len(data.train_pairs) == 50
    path = write(tmp_path / "x.tsv", b"a\tb\nc\td\n")
    datasets.load(f"tsv:{path}", test_ratio=0.5, progress=True)
    assert "2/2" in capsys.readouterr().out
    datasets.load("digits", progress=True)  # images load in about a second: no bar
    assert capsys.readouterr().out == ""
    datasets.load("dates", train_size=20, test_size=2)
    assert capsys.readouterr().out == ""


# === IDX files ===


def idx_bytes(array, type_code):
    header = bytes([0, 0, type_code, array.ndim]) + np.asarray(array.shape, ">u4").tobytes()
    return header + array.tobytes()


@pytest.mark.parametrize(
    "dtype, type_code",
    [(np.uint8, 0x08), (np.int8, 0x09), (">i2", 0x0B), (">i4", 0x0C), (">f4", 0x0D), (">f8", 0x0E)],
)
def test_read_idx_types_plain_and_gzip(tmp_path, rng, dtype, type_code):
    array = (rng.standard_normal((3, 4, 5)) * 50).astype(dtype)
    data = idx_bytes(array, type_code)
    plain = write(tmp_path / "x-idx3", data)
    packed = write(tmp_path / "x-idx3.gz", gzip.compress(data))
    for path in (plain, packed):
        result = datasets.read_idx(path)
        assert result.shape == (3, 4, 5)
        assert result.dtype.isnative
        np.testing.assert_array_equal(result, array)


def test_read_idx_rejects_bad_files(tmp_path):
    with pytest.raises(ValueError, match="not an IDX file"):
        datasets.read_idx(write(tmp_path / "a", b"PK\x03\x04rest"))
    labels = np.arange(10, dtype=np.uint8)
    with pytest.raises(ValueError, match="10 bytes"):
        datasets.read_idx(write(tmp_path / "b", idx_bytes(labels, 0x08)[:-1]))
    with pytest.raises(FileNotFoundError, match="nope"):
        datasets.read_idx(tmp_path / "nope")


def write_fashion_files(directory, rng, num_train=12, num_test=5, dotted=False, compress=True):
    directory.mkdir()
    arrays = {
        "train-images-idx3-ubyte": rng.integers(0, 256, (num_train, 28, 28), dtype=np.uint8),
        "train-labels-idx1-ubyte": rng.integers(0, 10, num_train, dtype=np.uint8),
        "t10k-images-idx3-ubyte": rng.integers(0, 256, (num_test, 28, 28), dtype=np.uint8),
        "t10k-labels-idx1-ubyte": rng.integers(0, 10, num_test, dtype=np.uint8),
    }
    for stem, array in arrays.items():
        name = stem.replace("-idx", ".idx") if dotted else stem
        data = idx_bytes(array, 0x08)
        if compress:
            write(directory / (name + ".gz"), gzip.compress(data))
        else:
            write(directory / name, data)
    return arrays


@pytest.mark.parametrize("dotted, compress", [(False, True), (True, False)])
def test_fashion_mnist_from_a_directory(tmp_path, rng, dotted, compress):
    arrays = write_fashion_files(tmp_path / "fm", rng, dotted=dotted, compress=compress)
    (x_train, y_train), (x_test, y_test), class_names = datasets.fashion_mnist(tmp_path / "fm")
    assert x_train.shape == (12, 28, 28, 1) and x_train.dtype == np.uint8
    assert x_test.shape == (5, 28, 28, 1)
    np.testing.assert_array_equal(x_train[..., 0], arrays["train-images-idx3-ubyte"])
    np.testing.assert_array_equal(y_test, arrays["t10k-labels-idx1-ubyte"])
    assert y_train.dtype == np.int64
    assert class_names[0] == "T-shirt/top" and len(class_names) == 10


def test_fashion_mnist_missing_file(tmp_path, rng):
    write_fashion_files(tmp_path / "fm", rng)
    (tmp_path / "fm" / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(FileNotFoundError, match="t10k-labels-idx1-ubyte"):
        datasets.fashion_mnist(tmp_path / "fm")



def test_fashion_mnist_without_files_and_without_download(tmp_path, monkeypatch):
    missing = tmp_path / "missing"
    monkeypatch.setattr(datasets, "FASHION_MNIST_DIR", missing)
    with pytest.raises(FileNotFoundError, match="dataset-fashion-mnist") as raised:
        datasets.fashion_mnist(download=False)
    assert str(missing) in str(raised.value) and "\n" not in str(raised.value)

@pytest.mark.skipif(
    not (datasets.FASHION_MNIST_DIR / "train-images-idx3-ubyte.gz").is_file(),
    reason="Debian package dataset-fashion-mnist not installed",
)
def test_fashion_mnist_debian_package():
    data = datasets.fashion_mnist()
    assert data.x_train.shape == (60000, 28, 28, 1) and data.x_test.shape == (10000, 28, 28, 1)
    assert data.y_train[:10].tolist() == [9, 0, 0, 3, 0, 2, 7, 2, 5, 5]
    assert np.bincount(data.y_test).tolist() == [1000] * 10


# === digits and image folders ===


def test_digits():
    data = datasets.digits(seed=0)
    (x_train, y_train), (x_test, y_test), class_names = data
    assert x_train.shape[1:] == (8, 8, 1) and x_train.dtype == np.uint8
    assert len(x_train) + len(x_test) == 1797 and len(x_test) == 360
    assert x_train.max() == 255 and x_train.min() == 0
    assert class_names == [str(d) for d in range(10)]
    assert set(np.unique(y_test)) == set(range(10))  # stratified
    np.testing.assert_array_equal(datasets.digits(seed=0).y_test, y_test)


def test_digits_resized_to_fashion_mnist_size():
    small, large = datasets.digits(seed=0), datasets.digits(seed=0, image_size=28)
    assert large.x_train.shape == (len(small.x_train), 28, 28, 1) and large.x_train.dtype == np.uint8
    np.testing.assert_array_equal(large.y_test, small.y_test)
    # Bilinear resizing keeps each image's mean brightness (within rounding).
    np.testing.assert_allclose(large.x_test.mean(axis=(1, 2, 3)), small.x_test.mean(axis=(1, 2, 3)),
                               atol=4.0)
    with pytest.raises(ValueError, match="image_size"):
        datasets.digits(image_size=0)

def test_images_from_directory(tmp_path, rng):
    from PIL import Image

    for name, value in (("cats", 40), ("dogs", 200)):
        (tmp_path / name).mkdir()
        for i in range(5):
            pixels = np.full((10, 14, 3), value, np.uint8)
            Image.fromarray(pixels).save(tmp_path / name / f"{i}.png")
    data = datasets.images(tmp_path, image_size=(6, 7), test_ratio=0.2, seed=1)
    assert data.class_names == ["cats", "dogs"]
    assert data.x_train.shape == (8, 6, 7, 3) and data.x_test.shape == (2, 6, 7, 3)
    assert data.x_train.dtype == np.uint8
    for x, y in zip(data.x_train, data.y_train):
        assert int(x.mean()) == (40 if y == 0 else 200)
    with pytest.raises(FileNotFoundError, match="missing"):
        datasets.images(tmp_path / "missing", 8)
