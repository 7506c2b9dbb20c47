"""Tests for zoo/cli/arguments.py: `--set` parsing and the positive-integer flag type."""

import argparse

import pytest

from zoo.cli import arguments


def test_parse_overrides_reads_python_literals_booleans_and_none():
    pairs = ["d_model=256", "norm_first=true", "dropout=0.1", "cell=gru", "key_dim=None",
             "sizes=[1, 2]", " name = x=y", "flag=FALSE", "text='a b'"]
    assert arguments.parse_overrides(pairs) == {
        "d_model": 256, "norm_first": True, "dropout": 0.1, "cell": "gru", "key_dim": None,
        "sizes": [1, 2], "name": " x=y", "flag": False, "text": "a b",
    }
    assert arguments.parse_overrides(None) == {}


@pytest.mark.parametrize("pair", ["d_model", "=3", " =3"])
def test_parse_overrides_needs_key_and_value(pair):
    with pytest.raises(arguments.UserError, match="key=value"):
        arguments.parse_overrides([pair])


def test_positive_int():
    assert arguments.positive_int("7") == 7
    for text in ("0", "-2", "1.5", "x"):
        with pytest.raises(argparse.ArgumentTypeError, match="positive integer"):
            arguments.positive_int(text)
