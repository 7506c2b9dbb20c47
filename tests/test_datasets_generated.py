"""Tests for zoo/datasets/generated.py: the number-words and dates tasks."""

import datetime

import pytest
from num2words import num2words

from zoo import datasets


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


@pytest.mark.parametrize("generate", [datasets.numbers, datasets.dates])
def test_generated_datasets_show_progress_only_when_asked(capsys, generate):
    quiet = generate(num_train=1500, num_test=100, seed=3)
    assert capsys.readouterr().out == ""
    shown = generate(num_train=1500, num_test=100, seed=3, progress=True)
    out = capsys.readouterr().out
    assert "1000/1600" in out and "1600/1600" in out and "pair" in out
    assert (shown.train_pairs, shown.test_pairs) == (quiet.train_pairs, quiet.test_pairs)


