"""Argument checks shared by the layers and the zoo: reject bad input early and
say what was received.

The one home of argument checks: the layers, losses and schedules here, the
zoo's model configs (`check_fields` in their `__post_init__`), decoding and
the export all raise through `check`, so every message reads
"`name` must be <requirement>; received name=<value>." (the export's start
with "export: ").

Integers are Python ints and numbers Python ints or floats (what a config
writes to JSON); bools are neither. `numpy=True` also accepts numpy scalars
(decoding's arguments, which callers often take from arrays).
"""

import numbers


class ArgumentError(ValueError):
    """An argument that breaks its rule: a mistake of the caller's, not a bug of the library.

    `zoo.errors.ZooError` extends it for the zoo's own user errors; the command line
    prints both as one line (exit code 2).
    """


def is_int(value, numpy=False):
    """Whether `value` is an int (with `numpy`, also a numpy integer), not a bool."""
    return isinstance(value, numbers.Integral if numpy else int) and not isinstance(value, bool)


def is_number(value, numpy=False):
    """Whether `value` is an int or a float (with `numpy`, any real scalar), not a bool."""
    kinds = numbers.Real if numpy else (int, float)
    return isinstance(value, kinds) and not isinstance(value, bool)


def check(name, value, requirement, holds, prefix=""):
    """Raise `ArgumentError` (a `ValueError`) "`name` must be {requirement}; received
    name=value." unless `holds`."""
    if not holds:
        raise ArgumentError(f"{prefix}`{name}` must be {requirement}; received {name}={value!r}.")


def _interval(minimum, maximum, open_minimum, open_maximum):
    """"in [0, 1)", ">= 2", "> 0", "<= 5" or "" for the bounds given."""
    if minimum is not None and maximum is not None:
        return f"in {'(' if open_minimum else '['}{minimum}, {maximum}{')' if open_maximum else ']'}"
    if minimum is not None:
        return f"{'>' if open_minimum else '>='} {minimum}"
    if maximum is not None:
        return f"{'<' if open_maximum else '<='} {maximum}"
    return ""


def _within(value, minimum, maximum, open_minimum, open_maximum):
    # Written so that NaN fails every bound.
    above = minimum is None or (value > minimum if open_minimum else value >= minimum)
    below = maximum is None or (value < maximum if open_maximum else value <= maximum)
    return bool(above and below)


def check_int(name, value, minimum=None, maximum=None, *, allow_none=False, numpy=False,
              prefix=""):
    """Raise `ValueError` unless `value` is an int in [minimum, maximum] (either bound may
    be None; None itself passes with `allow_none`)."""
    if value is None and allow_none:
        return
    bounds = _interval(minimum, maximum, False, False)
    holds = is_int(value, numpy) and _within(value, minimum, maximum, False, False)
    check(name, value, f"an int {bounds}".strip(), holds, prefix)


def check_positive_int(name, value, allow_none=False):
    """Raise `ValueError` unless `value` is an int > 0 (or None with `allow_none`)."""
    if value is None and allow_none:
        return
    check(name, value, "a positive integer", is_int(value) and value > 0)


def check_number(name, value, minimum=None, maximum=None, *, open_minimum=False,
                 open_maximum=False, numpy=False, prefix=""):
    """Raise `ValueError` unless `value` is a number between the bounds (closed unless
    `open_minimum` / `open_maximum`; either may be None). NaN never passes."""
    bounds = _interval(minimum, maximum, open_minimum, open_maximum)
    holds = is_number(value, numpy) and _within(value, minimum, maximum, open_minimum, open_maximum)
    check(name, value, f"a number {bounds}".strip(), holds, prefix)


def check_positive_number(name, value, allow_none=False):
    """Raise `ValueError` unless `value` is a number > 0 (or None with `allow_none`)."""
    if value is None and allow_none:
        return
    check_number(name, value, 0, open_minimum=True)


def check_rate(name, value):
    """Raise `ValueError` unless `value` is a number in [0, 1) (a dropout rate, label smoothing)."""
    check_number(name, value, 0, 1, open_maximum=True)


def check_choice(name, value, choices, prefix=""):
    """Raise `ValueError` unless `value` is one of `choices`."""
    check(name, value, f"one of {tuple(choices)}", value in tuple(choices), prefix)


def check_fields(config, check_field, *names, **options):
    """`check_field(name, getattr(config, name), **options)` for each field name: the checks
    of a config dataclass's `__post_init__`, e.g.
    `check_fields(self, check_rate, "dropout", "label_smoothing")`."""
    for name in names:
        check_field(name, getattr(config, name), **options)


def check_at_most_one(config, *names):
    """Raise `ValueError` unless at most one of the fields `names` of `config` is set (not
    None), e.g. Keras' `clipnorm` and `global_clipnorm`, of which an optimizer takes one."""
    given = [name for name in names if getattr(config, name) is not None]
    if len(given) > 1:
        first, second = given[:2]
        one_of = ", ".join(f"`{name}`" for name in names)
        check(second, getattr(config, second),
              f"None when {first}={getattr(config, first)!r} (at most one of {one_of} is set)",
              False)


# === The shapes of attention inputs (`MultiHeadAttention.build` and `call`) ===


def check_rank_3(name, shape):
    """Raise `ValueError` unless `shape` is `(batch, length, features)`."""
    if len(shape) != 3:
        raise ValueError(
            f"`{name}` must have rank 3 (batch, length, features); "
            f"received {name}.shape={tuple(shape)}."
        )


def check_same_length(key_shape, value_shape):
    """Raise `ValueError` when the known lengths S of `key` and `value` differ."""
    if key_shape[1] is not None and value_shape[1] is not None and key_shape[1] != value_shape[1]:
        raise ValueError(
            "`key` and `value` must have the same length S; received "
            f"key.shape={tuple(key_shape)}, value.shape={tuple(value_shape)}."
        )


def check_attention_shapes(query_shape, value_shape, key_shape):
    """The shapes an attention layer is built for: rank 3, known feature sizes, one S."""
    for name, shape in (("query", query_shape), ("value", value_shape), ("key", key_shape)):
        check_rank_3(name, shape)
        if shape[-1] is None:
            raise ValueError(
                f"The feature size (last axis) of `{name}` must be known; "
                f"received {name}.shape={tuple(shape)}."
            )
    check_same_length(key_shape, value_shape)


def check_attention_inputs(query, value, key, feature_sizes):
    """The tensors of a call against what the layer was built for.

    `feature_sizes`: `{"query": Dq, "key": Dk, "value": Dv}`. Checks rank 3, those
    feature sizes, one batch size and one length S for key and value.
    """
    batch_sizes = set()
    for name, tensor in (("query", query), ("value", value), ("key", key)):
        check_rank_3(name, tensor.shape)
        expected = feature_sizes[name]
        if tensor.shape[-1] is not None and tensor.shape[-1] != expected:
            raise ValueError(
                f"`{name}` has {tensor.shape[-1]} features but the layer was built for "
                f"{expected}; received {name}.shape={tuple(tensor.shape)}."
            )
        if tensor.shape[0] is not None:
            batch_sizes.add(tensor.shape[0])
    if len(batch_sizes) > 1:
        raise ValueError(
            "`query`, `key` and `value` must have the same batch size; received "
            f"query.shape={tuple(query.shape)}, key.shape={tuple(key.shape)}, "
            f"value.shape={tuple(value.shape)}."
        )
    check_same_length(key.shape, value.shape)


# === The shapes of a decoder's attention (`BahdanauAttention` and its kin) ===


def check_step_attention_shapes(query_shape, value_shape, key_shape=None):
    """The shapes a decoder's attention is built for: one query `(B, Dq)` or T of them
    `(B, T, Dq)`, value and key `(B, S, D)`. Returns the key's shape (the value's if None)."""
    key_shape = value_shape if key_shape is None else key_shape
    if len(query_shape) not in (2, 3):
        raise ValueError(
            "`query` must have shape (B, Dq) or (B, T, Dq); received "
            f"query.shape={tuple(query_shape)}."
        )
    for name, shape in (("value", value_shape), ("key", key_shape)):
        if len(shape) != 3:
            raise ValueError(
                f"`{name}` must have shape (B, S, D); received {name}.shape={tuple(shape)}."
            )
    return key_shape


def check_query_features(query, query_kernel):
    """Raise `ValueError` when `query` has not the feature size the layer was built for (the
    rows of its `query_kernel`)."""
    if query.shape[-1] is not None and query.shape[-1] != query_kernel.shape[0]:
        raise ValueError(
            f"`query` has {query.shape[-1]} features but the layer was built for "
            f"{query_kernel.shape[0]}; received query.shape={tuple(query.shape)}."
        )


def check_previous_alignment(query, previous_alignment):
    """Raise `ValueError` unless `α_{t-1}` is `(B, S)` for a query `(B, Dq)` and `(B, T, S)`
    for queries `(B, T, Dq)`."""
    if len(previous_alignment.shape) != len(query.shape):
        raise ValueError(
            "`previous_alignment` must be (B, S) for a query (B, Dq) and (B, T, S) for "
            f"queries (B, T, Dq); received query.shape={tuple(query.shape)}, "
            f"previous_alignment.shape={tuple(previous_alignment.shape)}."
        )
