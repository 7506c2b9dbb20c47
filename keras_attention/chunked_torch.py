"""Chunked attention on PyTorch: a `torch.autograd.Function` looping over the key chunks.

The PyTorch backend's `keras_attention.chunked.chunked_dot_product_attention` (the online
softmax and FlashAttention's backward pass are written out there; their steps are
`keras_attention.chunked_steps`). The forward pass keeps the running maximum, sum and
output over the chunks and saves only the inputs, the output and the log-sum-exp; the
backward pass recomputes each chunk's probabilities from the log-sum-exp. Only one
chunk's `(B, N, T, C)` scores are alive at a time in either pass. The computation runs
in float32 (also under mixed precision).

Shape legend: B batch, N heads, T queries, S keys, C chunk size, nc number of chunks,
H head size, Hv value size.
"""

import torch
from keras import ops

from keras_attention import chunked_steps


def attention(query, key, value, chunk_size, scale, key_mask, query_mask, attention_mask,
              causal):
    """`chunked_dot_product_attention`, its arguments checked: `(B, N, T, Hv)`."""
    query, key, value = (ops.convert_to_tensor(x) for x in (query, key, value))
    dtype = query.dtype
    query, key, value = (x.to(torch.float32) for x in (query, key, value))
    masks = chunked_steps.ChunkMasks.build(key.shape[2], chunk_size, key_mask, query_mask,
                                           attention_mask, causal)
    # Scaling, padding and cutting into chunks are differentiated by PyTorch itself.
    output = _ChunkedAttention.apply(query * scale, chunked_steps.split(key, chunk_size),
                                     chunked_steps.split(value, chunk_size), masks)
    return output.to(dtype)


class _ChunkedAttention(torch.autograd.Function):
    """`softmax(Q Kᵀ) V` of the (scaled) query `(B, N, T, H)` and the key and value chunks
    `(nc, B, N, C, ·)`, under `chunked_steps.ChunkMasks`."""

    @staticmethod
    def forward(ctx, query, key_chunks, value_chunks, masks):
        state = chunked_steps.initial_state(query, value_chunks.shape[-1])
        for j in range(key_chunks.shape[0]):
            state = chunked_steps.forward_step(state, query, key_chunks[j], value_chunks[j],
                                               masks(j, query.shape[2]))
        output, log_sum_exp = chunked_steps.finish(state)
        ctx.save_for_backward(query, key_chunks, value_chunks, output, log_sum_exp)
        ctx.masks = masks  # the call's own masks, never differentiated
        return output

    @staticmethod
    def backward(ctx, d_output):
        """FlashAttention's backward pass, chunk by chunk: dQ summed, dK and dV per chunk."""
        query, key_chunks, value_chunks, output, log_sum_exp = ctx.saved_tensors
        d_output = d_output.contiguous()
        d_output_dot_output = chunked_steps.row_dot(d_output, output)  # D, (B, N, T)
        d_query = torch.zeros_like(query)
        d_keys, d_values = torch.empty_like(key_chunks), torch.empty_like(value_chunks)
        for j in range(key_chunks.shape[0]):
            d_query_part, d_keys[j], d_values[j] = chunked_steps.backward_step(
                query, key_chunks[j], value_chunks[j], ctx.masks(j, query.shape[2]), d_output,
                log_sum_exp, d_output_dot_output)
            d_query += d_query_part
        return d_query, d_keys, d_values, None  # no gradient for the masks
