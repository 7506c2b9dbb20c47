"""Memory-efficient exact softmax attention: online softmax over key/value chunks.

`softmax(Q Kᵀ · scale) V` computed one chunk of C keys at a time with a running
maximum `m`, a running sum `l` and a running output `acc` (Rabe & Staats 2021,
"Self-attention does not need O(n²) memory"; Dao et al. 2022, FlashAttention):

    m' = max(m, max_j s_j),   l' = l·e^{m - m'} + Σ_j e^{s_j - m'},
    acc' = acc·e^{m - m'} + Σ_j e^{s_j - m'} v_j,   output = acc / l.

Only a `(B, N, T, C)` block of scores exists at any time, so the forward pass
needs O(T·C) memory instead of O(T·S). The backward pass is written out by hand
(FlashAttention's, with the log-sum-exp `L = m + log l` saved by the forward):
for each chunk it recomputes `P = exp(Q Kᵀ · scale - L)` and, with
`D = rowsum(dO ∘ O)`, `dV = Pᵀ dO`, `dS = P ∘ (dO Vᵀ - D)`, `dQ += dS K · scale`,
`dK = dSᵀ Q · scale`. Differentiating through the loop instead would keep every
chunk's scores for the backward pass: O(T·S) again.

Each Keras backend runs the loops and registers the backward pass its own way, and only
its own module is imported: `chunked_tensorflow` (`tf.while_loop`, `tf.custom_gradient`;
eager, `tf.function`, `jit_compile=True`), `chunked_jax` (`jax.lax.scan`,
`jax.custom_vjp`; eager and `jax.jit`) and `chunked_torch` (`torch.autograd.Function`).
The computation runs in float32 (also under mixed precision, like the full path's
softmax) and the result comes back in the query's dtype.

Shape legend: B batch, N heads, T queries, S keys, C chunk size, H head size.
"""

import math

import keras
from keras import ops

from keras_attention import ops as attention_ops

if keras.backend.backend() == "tensorflow":
    from keras_attention import chunked_tensorflow as _backend_chunked
elif keras.backend.backend() == "jax":
    from keras_attention import chunked_jax as _backend_chunked
elif keras.backend.backend() == "torch":
    from keras_attention import chunked_torch as _backend_chunked
else:
    _backend_chunked = None


def chunked_dot_product_attention(
    query,
    key,
    value,
    chunk_size,
    scale=1.0,
    key_mask=None,
    query_mask=None,
    attention_mask=None,
    causal=False,
):
    """Exact `softmax(Q Kᵀ · scale) V` over chunks of `chunk_size` keys (online softmax).

    Same result and gradients as the full computation with `masked_softmax` (rows
    whose keys are all masked give zeros), in O(T·C) memory for the forward pass
    and for the backward pass.

    Args:
        query: `(B, N, T, H)`.
        key: `(B, N, S, H)`.
        value: `(B, N, S, Hv)`.
        chunk_size: C, the number of keys per chunk (the last chunk is padded and
            masked when C does not divide S).
        scale: multiplier of the scores (`1/√H` for scaled dot product).
        key_mask: bool `(B, S)`, True for keys that may be attended.
        query_mask: bool `(B, T)`; a False query attends nothing (output zeros).
        attention_mask: bool broadcastable to `(B, T, S)` (rank 2 or 3).
        causal: query `t` attends only keys `<= t` (positions aligned at 0).

    Returns:
        `(B, N, T, Hv)` in the dtype of `query`.
    """
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size <= 0:
        raise ValueError(
            f"`chunk_size` must be a positive integer; received chunk_size={chunk_size!r}."
        )
    if attention_mask is not None and len(attention_mask.shape) not in (2, 3):
        raise ValueError(
            "`attention_mask` must have shape (B, T, S) or (T, S); received "
            f"attention_mask.shape={tuple(attention_mask.shape)}."
        )
    if _backend_chunked is None:
        raise NotImplementedError(
            "Chunked attention runs under the TensorFlow, JAX and PyTorch backends; "
            f"received backend={keras.backend.backend()!r}."
        )
    return _backend_chunked.attention(query, key, value, chunk_size, scale, key_mask,
                                      query_mask, attention_mask, causal)


def attend(layer, query, key, value, query_mask, value_mask, key_mask, attention_mask,
           use_causal_mask):
    """`MultiHeadAttention`'s heads `(B, N, T, Hv)` by chunks, from its call's masks.

    query `(B, N, T, H)`, key `(B, N, S, H)`, value `(B, N, S, Hv)`.
    """
    merged_key_mask = None
    for mask in (value_mask, key_mask):
        if mask is not None:
            mask = ops.cast(mask, "bool")
            merged_key_mask = mask if merged_key_mask is None else ops.logical_and(
                merged_key_mask, mask)
    if attention_mask is not None and len(attention_mask.shape) in (2, 3):
        rank = len(attention_mask.shape)
        expected = (query.shape[0], query.shape[2], key.shape[2])[-rank:]
        attention_ops._check_mask_broadcasts(attention_mask, expected, name="attention_mask")
    scale = 1.0 / math.sqrt(layer.key_dim) if layer.scoring == "scaled_dot" else 1.0
    heads = chunked_dot_product_attention(
        query, key, value, layer.chunk_size, scale=scale, key_mask=merged_key_mask,
        query_mask=query_mask, attention_mask=attention_mask, causal=use_causal_mask,
    )
    return ops.cast(heads, layer.compute_dtype)
