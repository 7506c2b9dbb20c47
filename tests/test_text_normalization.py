"""Tests for zoo/text/normalization.py: normalisation and the split into words, checked
against the expected strings written out by hand."""

import pytest
import tensorflow as tf

from zoo.text import normalization


def to_lists(ragged):
    return [[word.decode("utf-8") for word in row] for row in ragged.to_list()]


def test_split_words_keeps_punctuation_and_symbols_as_words():
    words = normalization.split_words(tf.constant(["Hallo, Welt!  5€ (ok)", "", "dreißig\tvier"]))
    assert to_lists(words) == [
        ["hallo", ",", "welt", "!", "5", "€", "(", "ok", ")"], [], ["dreißig", "vier"]
    ]


def test_normalize_repairs_bytes_and_blanks_control_characters():
    strings = tf.constant([b"a\xffb", "x\x00y\u200bz".encode(), "ＡＢ ﬁ".encode()])
    assert [s.decode("utf-8") for s in normalization.normalize(strings).numpy()] == [
        "a\ufffdb", "x y z", "ab fi"
    ]
    kept = normalization.normalize(tf.constant(["ＡＢ"]), lower_case=False,
                                   normalization_form=None)
    assert kept.numpy()[0].decode("utf-8") == "ＡＢ"


@pytest.mark.parametrize("options, message", [
    (dict(lower_case="yes"), "lower_case"),
    (dict(normalization_form="NFX"), "normalization_form"),
])
def test_bad_options_are_named(options, message):
    with pytest.raises(ValueError, match=message):
        normalization.normalize(tf.constant(["a"]), **options)
