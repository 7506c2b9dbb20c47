"""Tests for zoo/datasets/translation_files.py: TSV reading (and its progress bar)."""

import logging

import pytest

from zoo import datasets
from zoo.datasets import translation_files


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
    assert translation_files._count_lines(path) == lines
    with open(path, "rb") as file:
        assert sum(1 for _ in file) == lines


