"""`keras_attention.checks`, the one home of argument checks: what passes, what is
refused, and the one message shape every caller (layers, zoo configs, decoding,
export) raises."""

import math

import numpy as np
import pytest

from keras_attention import checks


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: checks.check_int("n", 0, 1), "`n` must be an int >= 1; received n=0."),
        (lambda: checks.check_int("n", 9, 2, 8), "`n` must be an int in [2, 8]; received n=9."),
        (lambda: checks.check_int("n", True, 0), "`n` must be an int >= 0; received n=True."),
        (lambda: checks.check_int("n", np.int64(3), 1), "`n` must be an int >= 1; received n=np.int64(3)."),
        (lambda: checks.check_int("n", 1.0, 1), "`n` must be an int >= 1; received n=1.0."),
        (lambda: checks.check_positive_int("units", 0), "`units` must be a positive integer; received units=0."),
        (lambda: checks.check_rate("dropout", 1.0), "`dropout` must be a number in [0, 1); received dropout=1.0."),
        (lambda: checks.check_rate("dropout", False), "`dropout` must be a number in [0, 1); received dropout=False."),
        (lambda: checks.check_positive_number("lr", 0.0), "`lr` must be a number > 0; received lr=0.0."),
        (lambda: checks.check_number("alpha", math.nan, 0), "`alpha` must be a number >= 0; received alpha=nan."),
        (lambda: checks.check_number("x", 0, 0, 1, open_minimum=True), "`x` must be a number in (0, 1]; received x=0."),
        (lambda: checks.check_number("x", "1", 0), "`x` must be a number >= 0; received x='1'."),
        (lambda: checks.check_choice("cell", "rnn", ["gru", "lstm"]),
         "`cell` must be one of ('gru', 'lstm'); received cell='rnn'."),
        (lambda: checks.check_int("top_k", 0, 1, prefix="export: "),
         "export: `top_k` must be an int >= 1; received top_k=0."),
    ],
)
def test_refusals_say_what_was_received(call, message):
    with pytest.raises(ValueError) as caught:
        call()
    assert str(caught.value) == message


def test_accepted_values_pass():
    checks.check_int("n", 2, 2, 8)
    checks.check_int("n", 8, 2, 8)
    checks.check_int("n", None, 1, allow_none=True)
    checks.check_int("n", np.int32(3), 1, numpy=True)
    checks.check_positive_int("units", None, allow_none=True)
    checks.check_rate("dropout", 0)
    checks.check_number("x", 1, 0, 1, open_minimum=True)
    checks.check_number("alpha", np.float32(0.5), 0, numpy=True)
    checks.check_choice("cell", "gru", ("gru", "lstm"))


def test_check_fields_checks_each_named_field():
    class Config:
        dropout, attention_dropout, units = 0.1, 1.5, 4

    checks.check_fields(Config, checks.check_rate, "dropout")
    with pytest.raises(ValueError, match="`attention_dropout` must be a number in"):
        checks.check_fields(Config, checks.check_rate, "dropout", "attention_dropout")
    Config.units = None
    checks.check_fields(Config, checks.check_positive_int, "units", allow_none=True)


def test_check_at_most_one_refuses_two_fields_set_and_names_both():
    class Clipping:
        global_clipnorm, clipnorm = 1.0, None

    checks.check_at_most_one(Clipping, "global_clipnorm", "clipnorm")
    Clipping.global_clipnorm = None
    checks.check_at_most_one(Clipping, "global_clipnorm", "clipnorm")  # neither: no clipping
    Clipping.global_clipnorm, Clipping.clipnorm = 1.0, 0.5
    with pytest.raises(ValueError) as caught:
        checks.check_at_most_one(Clipping, "global_clipnorm", "clipnorm")
    assert str(caught.value) == (
        "`clipnorm` must be None when global_clipnorm=1.0 (at most one of `global_clipnorm`, "
        "`clipnorm` is set); received clipnorm=0.5.")
    checks.check_positive_number("clipnorm", None, allow_none=True)
    with pytest.raises(ValueError, match="received clipnorm=None"):
        checks.check_positive_number("clipnorm", None)
