"""Argument checks shared by the layers and the zoo: reject bad input early and
say what was received."""


def check_positive_int(name, value, allow_none=False):
    """Raise `ValueError` unless `value` is an int > 0 (or None with `allow_none`)."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"`{name}` must be a positive integer; received {name}={value!r}.")


def check_int(name, value, minimum):
    """Raise `ValueError` unless `value` is an int >= `minimum` (bools are not ints here)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}; received {name}={value!r}")


def check_rate(name, value):
    """Raise `ValueError` unless `value` is a number in [0, 1)."""
    if not (isinstance(value, (int, float)) and 0.0 <= value < 1.0):
        raise ValueError(f"`{name}` must be a float in [0, 1); received {name}={value!r}.")


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
