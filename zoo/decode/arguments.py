"""The argument checks every search of `zoo.decode` shares: the source ids, the special
ids and `max_length` (greedy, beam search and sampling call them before tracing)."""

import tensorflow as tf

from keras_attention import checks
from zoo.text.special import PAD_ID


def check_ids(**ids):
    """Each id an integer >= 0 (numpy integers too), `end_id` different from `pad_id`."""
    for name, value in ids.items():
        checks.check(name, value, "an integer id >= 0", checks.is_int(value, numpy=True) and value >= 0)
    if ids["end_id"] == ids["pad_id"]:
        raise ValueError(f"`end_id` must differ from `pad_id`; both are {ids['pad_id']}.")


def check_common(source, max_length, start_id, end_id, pad_id=PAD_ID):
    """`(source, max_length)`: int32 `(B, S)` ids, and None, a Python int >= 1 or an int32
    scalar tensor; `ValueError` for anything else (or bad special ids). A copying model's
    source, `{"source": ids, "source_extended": extended ids}`, is checked and returned as
    such a dict."""
    if isinstance(source, dict):
        ids, _ = check_common(source["source"], max_length, start_id, end_id, pad_id)
        extended, max_length = check_common(source["source_extended"], max_length, start_id,
                                            end_id, pad_id)
        return {"source": ids, "source_extended": extended}, max_length
    source = tf.convert_to_tensor(source)
    if source.shape.rank != 2:
        raise ValueError(f"`source` must have shape (B, S); received source.shape={source.shape}.")
    if not source.dtype.is_integer:
        raise ValueError(f"`source` must hold integer ids; received dtype {source.dtype.name}.")
    source = tf.cast(source, tf.int32)
    check_ids(start_id=start_id, end_id=end_id, pad_id=pad_id)
    if max_length is None:
        return source, None
    if checks.is_int(max_length, numpy=True):
        checks.check_int("max_length", max_length, 1, numpy=True)
        return source, int(max_length)
    if isinstance(max_length, (tf.Tensor, tf.Variable)) or hasattr(max_length, "dtype"):
        max_length = tf.convert_to_tensor(max_length)
        if max_length.shape.rank != 0 or not max_length.dtype.is_integer:
            raise ValueError(
                "`max_length` must be an int or a scalar int tensor; received "
                f"shape {max_length.shape}, dtype {max_length.dtype.name}."
            )
        return source, tf.cast(max_length, tf.int32)
    raise ValueError(f"`max_length` must be None, an int or a scalar int tensor; received {max_length!r}.")


def check_jit_length(max_length, jit_compile):
    """`jit_compile=True` needs a static output length: None or a Python int."""
    if jit_compile and not (max_length is None or isinstance(max_length, int)):
        raise ValueError(
            "`jit_compile=True` needs a static output length: `max_length` must be None "
            f"or a Python int; received {max_length!r}."
        )


EXTRA_LENGTH = 50  # default maximum output length = source length + 50


def output_size(source, max_length, pad_id=PAD_ID):
    """`(width, limit)` of a decoding: the output's columns (an int or a scalar tensor) and
    each row's most tokens, int32 `(B,)`: `max_length`, or by default each row's source
    length (non-padding tokens) + `EXTRA_LENGTH` in `S + EXTRA_LENGTH` columns."""
    lengths = tf.reduce_sum(tf.cast(tf.not_equal(source, pad_id), tf.int32), axis=1)  # (B,)
    if max_length is None:
        static = source.shape[1]
        width = static + EXTRA_LENGTH if static is not None else tf.shape(source)[1] + EXTRA_LENGTH
        return width, lengths + EXTRA_LENGTH
    return max_length, tf.fill(tf.shape(lengths), max_length)
