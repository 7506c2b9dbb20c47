"""Attention pooling as functions of tensors (docs/math.md#attention-pooling).

Every function works on any Keras 3 backend tensor through `keras.ops`.

Mask convention (one for the whole library): a boolean tensor, `True` where a
query may attend to a key. Padding masks have shape `(B, S)`; attention masks
`(B, T, S)` (or anything that broadcasts to the scores).

Shape legend: B batch, T queries (target length), S keys/values (source
length), D feature size, N heads, H head size.
"""

import math

import keras
import numpy as np
from keras import ops


def large_negative_number(dtype):
    """The score given to masked positions: very negative, finite in `dtype`.

    float16 cannot hold -1e9, so half precision gets -65500 (its largest
    finite magnitude is 65504); everything else gets -1e9.
    """
    if keras.backend.standardize_dtype(dtype) == "float16":
        return -65500.0
    return -1e9


def causal_mask(n, m=None):
    """Lower-triangular boolean mask: query `i` may attend key `j` iff `j <= i`.

    Args:
        n: number of queries (T).
        m: number of keys (S); defaults to `n`. Positions are aligned at 0,
            as in `keras.layers.MultiHeadAttention(use_causal_mask=True)`.

    Returns:
        bool tensor of shape `(n, m)`.
    """
    m = n if m is None else m
    rows = ops.expand_dims(ops.arange(n, dtype="int32"), 1)  # (T, 1)
    cols = ops.expand_dims(ops.arange(m, dtype="int32"), 0)  # (1, S)
    return ops.greater_equal(rows, cols)


def padding_mask(ids, pad_id=0):
    """Boolean mask `(B, S)`: `True` where `ids` is a real token (not `pad_id`)."""
    return ops.not_equal(ids, pad_id)


def _check_mask_broadcasts(mask, scores_shape, name="mask"):
    """Raise a ValueError if `mask` cannot broadcast to the scores (static shapes)."""
    mask_shape = tuple(mask.shape)
    if len(mask_shape) > len(scores_shape):
        raise ValueError(
            f"`{name}` has rank {len(mask_shape)} but the attention scores have rank "
            f"{len(scores_shape)}; it cannot broadcast. Received {name}.shape={mask_shape}, "
            f"scores shape={tuple(scores_shape)}."
        )
    for m_dim, s_dim in zip(mask_shape[::-1], tuple(scores_shape)[::-1]):
        if m_dim is None or s_dim is None or m_dim == 1 or m_dim == s_dim:
            continue
        raise ValueError(
            f"`{name}` cannot broadcast to the attention scores: every dimension must be 1 "
            f"or equal the scores' dimension. Received {name}.shape={mask_shape}, "
            f"scores shape={tuple(scores_shape)}."
        )


def masked_softmax(scores, mask=None, axis=-1):
    """Softmax over `axis` that ignores positions where `mask` is False.

    Masked positions get a large negative score before the softmax and exactly
    0 weight after it, so a row whose keys are all masked gives zeros, never NaN.

    Args:
        scores: float tensor, e.g. `(B, N, T, S)`.
        mask: optional bool tensor broadcastable to `scores`.
        axis: the axis to normalise over (the key axis).

    Returns:
        Tensor shaped like `scores`: non-negative, rows sum to 1 (or 0 where
        every key is masked).
    """
    if mask is None:
        return ops.softmax(scores, axis=axis)
    _check_mask_broadcasts(mask, scores.shape)
    mask = ops.cast(mask, "bool")
    scores = ops.where(mask, scores, large_negative_number(scores.dtype))
    weights = ops.softmax(scores, axis=axis)
    return ops.where(mask, weights, ops.zeros_like(weights))


def attend(scores, value, value_mask=None, single_step=False, dtype=None):
    """Alignment and context of one set of attention scores over a padded source.

    The last step of additive (Bahdanau) and location-aware attention: a masked
    softmax over the source axis, computed in float32, then the weighted sum of
    the values.

    Args:
        scores: `(B, T, S)` float tensor.
        value: `(B, S, Dv)`.
        value_mask: optional bool `(B, S)`, True = may attend.
        single_step: the `T = 1` axis was added for one query: drop it again.
        dtype: the dtype of the weights (the layer's compute dtype); default the
            value's.

    Returns:
        `(context, weights)`: `(B, T, Dv)` and `(B, T, S)`, or `(B, Dv)` and
        `(B, S)` with `single_step`.
    """
    mask = None if value_mask is None else ops.expand_dims(ops.cast(value_mask, "bool"), 1)
    weights = masked_softmax(ops.cast(scores, "float32"), mask)  # (B, T, S)
    weights = ops.cast(weights, dtype or value.dtype)
    context = ops.matmul(weights, value)  # (B, T, Dv)
    if single_step:
        context, weights = ops.squeeze(context, 1), ops.squeeze(weights, 1)
    return context, weights


def scaled_dot_product_attention(
    query,
    key,
    value,
    mask=None,
    scale=None,
    dropout_rate=0.0,
    training=False,
    return_weights=False,
    seed=None,
):
    """`softmax(Q Kᵀ · scale) V`, scaled dot-product attention
    (docs/math.md#scaled-dot-product-attention).

    Args:
        query: `(..., T, D)`.
        key: `(..., S, D)`.
        value: `(..., S, Dv)`.
        mask: optional bool tensor broadcastable to `(..., T, S)`; True = attend.
        scale: multiplier of the scores; defaults to `1/√D`. Pass `1.0` for the
            plain dot product.
        dropout_rate: dropout on the attention weights (only when `training`).
        training: whether dropout is applied.
        return_weights: also return the attention weights `(..., T, S)`.
        seed: a `keras.random.SeedGenerator` or int for the dropout.

    Returns:
        `(..., T, Dv)`, and the weights when `return_weights=True`.
    """
    depth = query.shape[-1]
    if depth is not None and key.shape[-1] is not None and depth != key.shape[-1]:
        raise ValueError(
            "query and key must have the same feature size for dot-product scoring. "
            f"Received query.shape={tuple(query.shape)}, key.shape={tuple(key.shape)}."
        )
    if key.shape[-2] is not None and value.shape[-2] is not None:
        if key.shape[-2] != value.shape[-2]:
            raise ValueError(
                "key and value must have the same length (one value per key). "
                f"Received key.shape={tuple(key.shape)}, value.shape={tuple(value.shape)}."
            )
    if scale is None:
        scale = 1.0 / math.sqrt(depth)
    scores = ops.matmul(query, ops.swapaxes(key, -1, -2))  # (..., T, S)
    scores = ops.multiply(scores, ops.cast(scale, scores.dtype))
    weights = masked_softmax(scores, mask)
    attended = weights
    if training and dropout_rate > 0.0:
        attended = keras.random.dropout(weights, dropout_rate, seed=seed)
    output = ops.matmul(attended, value)  # (..., T, Dv)
    if return_weights:
        return output, weights
    return output


def additive_scores(query, key, score_kernel, query_kernel=None, key_kernel=None):
    """Bahdanau's additive scoring `a(q, k) = w_vᵀ tanh(W_q q + W_k k)`.

    Args:
        query: `(..., T, Dq)`.
        key: `(..., S, Dk)`.
        score_kernel: `w_v`, shape `(U,)` (or broadcastable to `(..., T, S, U)`,
            e.g. `(N, 1, 1, U)` for one `w_v` per head).
        query_kernel: `W_q`, shape `(Dq, U)`; `None` if `query` is already
            projected to `U` features.
        key_kernel: `W_k`, shape `(Dk, U)`; `None` if `key` is already projected.

    Returns:
        Scores `(..., T, S)`.
    """
    if query_kernel is not None:
        query = ops.matmul(query, query_kernel)  # (..., T, U)
    if key_kernel is not None:
        key = ops.matmul(key, key_kernel)  # (..., S, U)
    if query.shape[-1] is not None and key.shape[-1] is not None:
        if query.shape[-1] != key.shape[-1]:
            raise ValueError(
                "Projected query and key must have the same size U for additive scoring. "
                f"Received {tuple(query.shape)} and {tuple(key.shape)}."
            )
    features = ops.tanh(ops.expand_dims(query, -2) + ops.expand_dims(key, -3))  # (..., T, S, U)
    return ops.sum(features * score_kernel, axis=-1)  # (..., T, S)


def sinusoidal_encoding(length, depth, max_wavelength=10000):
    """The fixed positional encodings of "Attention Is All You Need".

    `P[i, 2j] = sin(i / max_wavelength^(2j/depth))`,
    `P[i, 2j+1] = cos(i / max_wavelength^(2j/depth))`. An odd `depth` ends
    with a sine column.

    Returns:
        float32 numpy array of shape `(length, depth)`.
    """
    if length < 0 or depth <= 0:
        raise ValueError(
            f"length must be >= 0 and depth > 0; received length={length}, depth={depth}."
        )
    positions = np.arange(length, dtype=np.float64)[:, None]  # (L, 1)
    pair_index = np.arange(0, depth, 2, dtype=np.float64)  # 2j
    frequencies = 1.0 / np.power(float(max_wavelength), pair_index / depth)  # ω_j
    angles = positions * frequencies[None, :]  # (L, ceil(depth/2))
    encoding = np.zeros((length, depth), dtype=np.float64)
    encoding[:, 0::2] = np.sin(angles)
    encoding[:, 1::2] = np.cos(angles[:, : depth // 2])
    return encoding.astype("float32")


def merge_masks(*masks):
    """Logical AND of the masks that are not None (broadcasting); None if all are None."""
    merged = None
    for mask in masks:
        if mask is None:
            continue
        mask = ops.cast(mask, "bool")
        merged = mask if merged is None else ops.logical_and(merged, mask)
    return merged


def repeat_rows(x, copies):
    """`x` `(B, ...)` with each row repeated `copies` times, `(B·copies, ...)`: row b's k-th
    copy is row `b·copies + k` (a beam search's rows); `x` itself when `copies` is 1."""
    return x if copies == 1 else ops.repeat(x, copies, axis=0)
