"""Chunked attention on TensorFlow: `tf.while_loop` over the key chunks, `tf.custom_gradient`.

The TensorFlow backend's `keras_attention.chunked.chunked_dot_product_attention` (the
online softmax and FlashAttention's backward pass are written out there). The steps of
the loops are `keras_attention.chunked_steps`', which JAX and PyTorch loop over too; this
module cuts the keys into chunks and builds each chunk's mask with TensorFlow's own
operations, so that it works in eager mode, under `tf.function` and under
`jit_compile=True`, also with lengths unknown until the graph runs. The computation runs
in float32 (also under mixed precision).

Shape legend: B batch, N heads, T queries, S keys, C chunk size, H head size.
"""

import tensorflow as tf

from keras_attention import chunked_steps


def _chunked(tensor, num_chunks, chunk_size, fill=0):
    """`(B, N, S, ·)` -> `(num_chunks, B, N, C, ·)`, padded with `fill` to num_chunks·C."""
    pad = num_chunks * chunk_size - tf.shape(tensor)[2]
    tensor = tf.pad(tensor, [[0, 0], [0, 0], [0, pad], [0, 0]], constant_values=fill)
    shape = tf.shape(tensor)
    tensor = tf.reshape(tensor, [shape[0], shape[1], num_chunks, chunk_size, shape[3]])
    return tf.transpose(tensor, [2, 0, 1, 3, 4])


class _ChunkMasks:
    """The mask of the `(B, N, T, C)` scores of chunk `j`: key padding, causal, explicit."""

    def __init__(self, query_length, key_length, num_chunks, chunk_size, key_mask,
                 query_mask, attention_mask, mask_per_key, causal):
        self.chunk_size = chunk_size
        self.key_length = key_length
        self.causal = causal
        self.query_positions = tf.range(query_length)  # (T,)
        self.key_mask = None
        if key_mask is not None:  # (B, S) -> (nc, B, 1, 1, C)
            padded = tf.pad(tf.cast(key_mask, tf.bool), [[0, 0], [0, num_chunks * chunk_size
                                                                  - key_length]])
            padded = tf.reshape(padded, [tf.shape(padded)[0], num_chunks, 1, 1, chunk_size])
            self.key_mask = tf.transpose(padded, [1, 0, 2, 3, 4])
        self.query_mask = None
        if query_mask is not None:
            self.query_mask = tf.cast(query_mask, tf.bool)[:, None, :, None]  # (B, 1, T, 1)
        self.attention_mask = None
        self.attention_mask_per_chunk = False
        if attention_mask is not None:
            mask = attention_mask[:, None]  # (B, 1, T, S), any of B, T, S may be 1
            if not mask_per_key:  # S is 1
                self.attention_mask = mask
            else:
                pad = num_chunks * chunk_size - key_length
                mask = tf.pad(mask, [[0, 0], [0, 0], [0, 0], [0, pad]])
                shape = tf.shape(mask)
                mask = tf.reshape(mask, [shape[0], 1, shape[2], num_chunks, chunk_size])
                self.attention_mask = tf.transpose(mask, [3, 0, 1, 2, 4])  # (nc, B, 1, T, C)
                self.attention_mask_per_chunk = True

    def __call__(self, j):
        key_positions = j * self.chunk_size + tf.range(self.chunk_size)  # (C,)
        mask = (key_positions < self.key_length)[None, None, None, :]  # (1, 1, 1, C)
        if self.causal:
            mask = tf.logical_and(mask, self.query_positions[:, None] >= key_positions[None, :])
        if self.key_mask is not None:
            mask = tf.logical_and(mask, self.key_mask[j])
        if self.query_mask is not None:
            mask = tf.logical_and(mask, self.query_mask)
        if self.attention_mask is not None:
            chunk_mask = self.attention_mask[j] if self.attention_mask_per_chunk else (
                self.attention_mask)
            mask = tf.logical_and(mask, chunk_mask)
        return mask


def _forward(query, key_chunks, value_chunks, masks, num_chunks):
    """Online softmax over the chunks: output `(B, N, T, Hv)` and log-sum-exp `(B, N, T)`."""
    rows = tf.shape(query)[:3]  # (B, N, T)
    value_size = tf.shape(value_chunks)[-1]

    def body(j, *state):
        state = chunked_steps.forward_step(state, query, key_chunks[j], value_chunks[j],
                                           masks(j))
        return (j + 1, *state)

    _, *state = tf.while_loop(
        lambda j, *_: j < num_chunks,
        body,
        (
            tf.constant(0),
            tf.fill(rows, tf.constant(chunked_steps.MASKED, tf.float32)),  # m
            tf.zeros(rows),  # l
            tf.zeros(tf.concat([rows, [value_size]], 0)),  # acc
        ),
        parallel_iterations=1,  # one chunk of scores alive at a time
    )
    return chunked_steps.finish(state)


def _backward(d_output, query, key_chunks, value_chunks, output, log_sum_exp, masks,
              num_chunks):
    """FlashAttention's backward pass, chunk by chunk: dQ, and dK, dV per chunk."""
    row_dot = chunked_steps.row_dot(d_output, output)  # D, (B, N, T)

    def body(j, d_query, d_keys, d_values):
        d_query_part, d_key, d_value = chunked_steps.backward_step(
            query, key_chunks[j], value_chunks[j], masks(j), d_output, log_sum_exp, row_dot)
        return j + 1, d_query + d_query_part, d_keys.write(j, d_key), d_values.write(j, d_value)

    _, d_query, d_keys, d_values = tf.while_loop(
        lambda j, *_: j < num_chunks,
        body,
        (
            tf.constant(0),
            tf.zeros_like(query),
            tf.TensorArray(tf.float32, size=num_chunks),
            tf.TensorArray(tf.float32, size=num_chunks),
        ),
        parallel_iterations=1,
    )
    return d_query, d_keys.stack(), d_values.stack()


def _unchunked(chunks, length):
    """`(nc, B, N, C, ·)` -> `(B, N, S, ·)`, the padding cut off."""
    chunks = tf.transpose(chunks, [1, 2, 0, 3, 4])
    shape = tf.shape(chunks)
    merged = tf.reshape(chunks, [shape[0], shape[1], shape[2] * shape[3], shape[4]])
    return merged[:, :, :length]


def attention(query, key, value, chunk_size, scale, key_mask, query_mask, attention_mask,
              causal):
    """`chunked_dot_product_attention`, its arguments checked: `(B, N, T, Hv)`."""
    mask_per_key = False
    if attention_mask is not None:
        # The mask's rank, and whether it varies along the keys, are read here, where its
        # shape is exact: the graph function's later traces relax the shapes of their
        # arguments (`reduce_retracing`), in which a rank or a dimension may be unknown.
        attention_mask = tf.cast(attention_mask, tf.bool)
        if attention_mask.shape.rank == 2:
            attention_mask = attention_mask[None]  # (1, T, S)
        mask_per_key = attention_mask.shape[-1] != 1
    if tf.executing_eagerly():
        # Called eagerly (a notebook, a GradientTape without tf.function), every op of the
        # chunk loop would run and be recorded by the tape one by one, keeping each
        # chunk's scores: O(T·S) memory again. As one graph function the tape records a
        # single op, whose gradient is the hand-written backward pass.
        return _graph_attention(query, key, value, chunk_size, scale, key_mask, query_mask,
                                attention_mask, mask_per_key, causal)
    return _attention(query, key, value, chunk_size, scale, key_mask, query_mask,
                      attention_mask, mask_per_key, causal)


def _attention(query, key, value, chunk_size, scale, key_mask, query_mask, attention_mask,
               mask_per_key, causal):
    """`chunked_dot_product_attention` once its arguments are checked; attention_mask bool
    `(B|1, T|1, S|1)`, `mask_per_key` whether its S is not 1."""
    dtype = query.dtype
    query, key, value = (tf.cast(x, tf.float32) for x in (query, key, value))
    query_length, key_length = tf.shape(query)[2], tf.shape(key)[2]
    num_chunks = (key_length + chunk_size - 1) // chunk_size
    masks = _ChunkMasks(query_length, key_length, num_chunks, chunk_size, key_mask,
                        query_mask, attention_mask, mask_per_key, causal)

    @tf.custom_gradient
    def online_attention(query, key, value):
        scaled_query = query * scale
        key_chunks = _chunked(key, num_chunks, chunk_size)  # (nc, B, N, C, H)
        value_chunks = _chunked(value, num_chunks, chunk_size)  # (nc, B, N, C, Hv)
        output, log_sum_exp = _forward(scaled_query, key_chunks, value_chunks, masks, num_chunks)

        def gradient(d_output):
            d_query, d_keys, d_values = _backward(
                d_output, scaled_query, key_chunks, value_chunks, output, log_sum_exp, masks,
                num_chunks,
            )
            # The keys' gradient dSᵀ (Q · scale) already holds the scale.
            return d_query * scale, _unchunked(d_keys, key_length), _unchunked(
                d_values, key_length)

        return output, gradient

    return tf.cast(online_attention(query, key, value), dtype)


# Python arguments (chunk size, scale, mask_per_key, causal) are part of the trace key;
# masks that are None too.
_graph_attention = tf.function(_attention, reduce_retracing=True, autograph=False)
