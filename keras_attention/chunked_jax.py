"""Chunked attention on JAX: `jax.lax.scan` over the key chunks, `jax.custom_vjp`.

The JAX backend's `keras_attention.chunked.chunked_dot_product_attention` (the online
softmax and FlashAttention's backward pass are written out there; their steps are
`keras_attention.chunked_steps`). The forward pass scans the chunks carrying the running
maximum, sum and output; the backward pass scans them again, recomputing each chunk's
probabilities from the saved log-sum-exp, carrying dQ and stacking each chunk's dK and
dV. Only one chunk's `(B, N, T, C)` scores are alive at a time in either pass, eagerly
and under `jax.jit`. The computation runs in float32 (also under mixed precision).

Shape legend: B batch, N heads, T queries, S keys, C chunk size, nc number of chunks,
H head size, Hv value size.
"""

import functools

import jax
import jax.numpy as jnp

from keras_attention import chunked_steps


def attention(query, key, value, chunk_size, scale, key_mask, query_mask, attention_mask,
              causal):
    """`chunked_dot_product_attention`, its arguments checked: `(B, N, T, Hv)`."""
    dtype = jnp.asarray(query).dtype
    query, key, value = (jnp.asarray(x, jnp.float32) for x in (query, key, value))
    masks = chunked_steps.ChunkMasks.build(key.shape[2], chunk_size, key_mask, query_mask,
                                           attention_mask, causal)
    # Scaling, padding and cutting into chunks are differentiated by JAX itself.
    output = _attention(masks.static, query * scale, chunked_steps.split(key, chunk_size),
                        chunked_steps.split(value, chunk_size), masks.tensors)
    return output.astype(dtype)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _attention(static, query, key_chunks, value_chunks, mask_tensors):
    """`softmax(Q Kᵀ) V` of the (scaled) query and the key and value chunks
    `(nc, B, N, C, ·)`; `static` and `mask_tensors` make the `ChunkMasks`."""
    return _forward(static, query, key_chunks, value_chunks, mask_tensors)[0]


def _forward(static, query, key_chunks, value_chunks, mask_tensors):
    """Online softmax over the chunks: output `(B, N, T, Hv)`, log-sum-exp `(B, N, T)`."""
    masks = chunked_steps.ChunkMasks(*static, *mask_tensors)
    query_length = query.shape[2]

    def body(state, chunk):
        j, key, value = chunk
        return chunked_steps.forward_step(state, query, key, value,
                                          masks(j, query_length)), None

    chunks = (jnp.arange(key_chunks.shape[0]), key_chunks, value_chunks)
    state, _ = jax.lax.scan(body, chunked_steps.initial_state(query, value_chunks.shape[-1]),
                            chunks)
    return chunked_steps.finish(state)


def _attention_forward(static, query, key_chunks, value_chunks, mask_tensors):
    output, log_sum_exp = _forward(static, query, key_chunks, value_chunks, mask_tensors)
    return output, (query, key_chunks, value_chunks, mask_tensors, output, log_sum_exp)


def _attention_backward(static, saved, d_output):
    """FlashAttention's backward pass, chunk by chunk: dQ summed, dK and dV per chunk."""
    query, key_chunks, value_chunks, mask_tensors, output, log_sum_exp = saved
    masks = chunked_steps.ChunkMasks(*static, *mask_tensors)
    query_length = query.shape[2]
    d_output_dot_output = chunked_steps.row_dot(d_output, output)  # D, (B, N, T)

    def body(d_query, chunk):
        j, key, value = chunk
        d_query_part, d_key, d_value = chunked_steps.backward_step(
            query, key, value, masks(j, query_length), d_output, log_sum_exp,
            d_output_dot_output)
        return d_query + d_query_part, (d_key, d_value)

    chunks = (jnp.arange(key_chunks.shape[0]), key_chunks, value_chunks)
    d_query, (d_keys, d_values) = jax.lax.scan(body, jnp.zeros_like(query), chunks)
    return d_query, d_keys, d_values, None  # no gradient for the masks


_attention.defvjp(_attention_forward, _attention_backward)
