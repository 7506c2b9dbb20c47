"""The mask of one attention call: padding, causal and explicit masks merged in one place.

One convention (see `keras_attention.ops`): boolean, True = may attend; padding
masks `(B, T)` / `(B, S)`, attention masks `(B, T, S)` or `(T, S)`. The result
is `(B, 1, T, S)` (or a broadcastable shape), the same for every head.
"""

from keras import ops

from keras_attention import ops as attention_ops


def check_attention_mask(attention_mask, query_shape, key_shape):
    """Raise a ValueError unless `attention_mask` is `(B, T, S)` or `(T, S)` and broadcasts.

    `query_shape` `(B, T, ·)` and `key_shape` `(B, S, ·)` give the static sizes.
    """
    rank = len(attention_mask.shape)
    if rank not in (2, 3):
        raise ValueError(
            "`attention_mask` must have shape (B, T, S) or (T, S); received "
            f"attention_mask.shape={tuple(attention_mask.shape)}."
        )
    expected = (query_shape[0], query_shape[1], key_shape[1])[-rank:]
    attention_ops._check_mask_broadcasts(attention_mask, expected, name="attention_mask")


def call_mask(query, value, query_mask=None, value_mask=None, key_mask=None,
              attention_mask=None, use_causal_mask=False):
    """The merged mask of a `MultiHeadAttention` call, `(B, 1, T, S)`, or None.

    Args:
        query: `(B, T, ·)`; value: `(B, S, ·)` (only their shapes are read).
        query_mask: `(B, T)`; value_mask, key_mask: `(B, S)`.
        attention_mask: `(B, T, S)` or `(T, S)`.
        use_causal_mask: query `t` attends only keys `<= t`.
    """
    masks = []
    if query_mask is not None:
        masks.append(ops.expand_dims(ops.cast(query_mask, "bool"), -1))  # (B, T, 1)
    for padding in (value_mask, key_mask):
        if padding is not None:
            masks.append(ops.expand_dims(ops.cast(padding, "bool"), -2))  # (B, 1, S)
    if attention_mask is not None:
        check_attention_mask(attention_mask, query.shape, value.shape)
        masks.append(attention_mask)
    if use_causal_mask:
        masks.append(attention_ops.causal_mask(ops.shape(query)[1], ops.shape(value)[1]))
    mask = attention_ops.merge_masks(*masks)
    if mask is None:
        return None
    if len(mask.shape) == 3:
        mask = ops.expand_dims(mask, 1)  # (B, 1, T, S): the same for every head
    return mask
