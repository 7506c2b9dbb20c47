"""Fused attention: `keras.ops.dot_product_attention` for `MultiHeadAttention`'s heads, where
the backend has a fused kernel (`MultiHeadAttention(flash_attention=...)`).

`keras.ops.dot_product_attention` is `jax.nn.dot_product_attention` on JAX (cuDNN's flash
attention in half precision on an Ampere or later GPU, Keras's splash attention on a TPU,
XLA's einsums on the CPU), `torch.nn.functional.scaled_dot_product_attention` on PyTorch
(flash, memory-efficient or math kernels) and einsums and a softmax on TensorFlow. The layer's
explicit path stays the reference: the tests check both agree (outputs and gradients, 1e-5 in
float32) with padding, causal and combined masks, fully masked queries included.

- `fused_by_default()`: where `flash_attention=None` takes the op.
- `uses_fused(layer, ...)`: whether one call takes it.
- `attend(layer, ...)`: the heads `(B, T, N, Hv)` by the op, from the call's inputs and masks.

Which kernel the op runs is the backend's choice; we pass it Keras's global setting
(`keras.config.is_flash_attention_enabled()`: None lets the backend pick its flash kernel, as
`keras.layers.MultiHeadAttention` does by default; False, after
`keras.config.disable_flash_attention()`, rules that kernel out). Never True, which fails on a
CPU: the layer's `flash_attention=True` asks for the fused op, not for a kernel. Unlike
Keras's layer, the layer's `flash_attention=False` always means the explicit path.

Shape legend: B batch, T queries, S keys, N heads, H head size, Hv value head size.
"""

import math

import keras
from keras import ops

from keras_attention import masks

# JAX's device platform decides `fused_by_default`; it is asked only there.
if keras.backend.backend() == "jax":
    import jax

PROJECTIONS = ("query", "key", "value")


def fused_by_default():
    """Whether `MultiHeadAttention(flash_attention=None)` computes its attention with
    `keras.ops.dot_product_attention` on this backend and device (when the call allows it).

    - PyTorch: yes, on every device (`scaled_dot_product_attention`: flash,
      memory-efficient or math kernels; on the CPU too, as fast as the explicit path or
      faster: 0.6-1.0× its time forward and backward, benchmarks/README.md).
    - JAX: on a GPU or TPU (`jax.nn.dot_product_attention`: cuDNN's flash attention in half
      precision on an Ampere or later GPU; Keras's splash attention on a TPU), not on the
      CPU, where the op is XLA's reference einsums, 1.1-1.5× the explicit path's time.
    - TensorFlow: no; its op is the same einsums and softmax as the explicit path (no fused
      kernel), so its exports, serving graphs, XLA programs and speed stay the explicit
      path's.
    """
    backend = keras.backend.backend()
    if backend == "jax":
        return jax.default_backend() != "cpu"
    return backend == "torch"


def check_flash_attention(flash_attention, scoring, chunk_size):
    """Raise a ValueError unless `flash_attention` is None or a bool that the layer allows."""
    if flash_attention not in (None, True, False):
        raise ValueError("`flash_attention` must be None, True or False; received "
                         f"flash_attention={flash_attention!r}.")
    if flash_attention is True and (scoring == "additive" or chunk_size is not None):
        raise ValueError(
            "flash_attention=True computes `keras.ops.dot_product_attention`, a dot-product "
            f"attention over all keys at once; received scoring={scoring!r}, "
            f"chunk_size={chunk_size}. Use flash_attention=None or False."
        )


def _fused_mask(mask, query_length, key_length):
    """A call's merged mask (`masks.call_mask`, or None) made ready for the fused op:
    `(mask, attends)`, the mask `(B or 1, 1, T, S)` (cuDNN takes it as a bias, which must
    have both lengths), and `attends` `(B, T, 1, 1)`, whether each query has a key to
    attend (None without a mask).

    A query with no key to attend is given every key in the mask, and its heads are set
    to zero afterwards (`where(attends, …)`), as the explicit path's zero weights give:
    the op then never sees an empty row, whose result (a uniform average, or NaN) and
    gradients depend on its kernel, and the zeroed rows pass no gradient back.
    """
    if mask is None:
        return None, None
    while len(mask.shape) < 4:
        mask = ops.expand_dims(mask, 0)  # (T, S) -> (1, 1, T, S)
    mask = ops.broadcast_to(mask, (ops.shape(mask)[0], 1, query_length, key_length))
    attends = ops.any(mask, axis=-1, keepdims=True)  # (B, 1, T, 1)
    mask = ops.logical_or(mask, ops.logical_not(attends))
    return mask, ops.transpose(attends, (0, 2, 1, 3))  # (B, T, 1, 1)


def _dot_product_attention(query, key, value, mask, is_causal, scale):
    """`keras.ops.dot_product_attention` on query `(B, T, N, H)`, key `(B, S, N, H)`, value
    `(B, S, N, Hv)`, bool mask broadcastable to `(B, N, T, S)` -> `(B, T, N, Hv)`.

    JAX's op takes values of the keys' head size only: where Hv != H, the smaller of the
    two is padded with zeros (zero query and key features add nothing to `q·k`; zero
    value features give output features that are cut off).
    """
    key_size, value_size = query.shape[-1], value.shape[-1]
    padded = keras.backend.backend() == "jax" and key_size != value_size
    if padded:
        size = max(key_size, value_size)
        query, key, value = (
            ops.pad(x, ((0, 0), (0, 0), (0, 0), (0, size - x.shape[-1])))
            for x in (query, key, value))
    # The flash *kernel* flag: Keras's global setting (None = where possible; False after
    # `keras.config.disable_flash_attention()`), as `keras.layers.MultiHeadAttention` gives
    # by default. Never True, which raises where no flash kernel runs (a CPU).
    kernel = False if keras.config.is_flash_attention_enabled() is False else None
    heads = ops.dot_product_attention(
        query, key, value, mask=mask, scale=scale, is_causal=is_causal, flash_attention=kernel)
    return heads[..., :value_size] if padded else heads


def uses_fused(layer, training, return_attention_scores):
    """Whether this call of `layer` (a `MultiHeadAttention`) computes its attention with
    `keras.ops.dot_product_attention` (its `flash_attention`); a ValueError where True
    cannot."""
    if layer.flash_attention is False or layer.chunk_size is not None:
        return False  # (True with chunk_size was refused at construction)
    dropout_active = bool(training) and layer.dropout > 0.0
    if layer.flash_attention is True:
        if return_attention_scores or dropout_active:
            raise ValueError(
                "flash_attention=True computes no attention weights and drops none: it "
                "cannot return them or apply attention dropout in training; received "
                f"return_attention_scores={return_attention_scores}, "
                f"dropout={layer.dropout}, training={training}. Use "
                "flash_attention=None (the explicit path for such calls) or False."
            )
        return True
    return (layer.scoring != "additive" and not return_attention_scores
            and not dropout_active and fused_by_default())


def attend(layer, query, value, key, self_attention, query_mask, value_mask, key_mask,
           attention_mask, use_causal_mask):
    """`layer`'s heads `(B, T, N, Hv)` by `keras.ops.dot_product_attention`, from its call's
    inputs `(B, T, Dq)`, `(B, S, Dv)`, `(B, S, Dk)` and masks.

    A causal mask alone goes as `is_causal=True` (PyTorch's flash kernel takes no
    other mask). Otherwise the call's merged mask goes as `mask` (`_fused_mask`).
    """
    if self_attention:
        q, k, v = layer._project(query, PROJECTIONS, heads_first=False)
    else:
        (q,) = layer._project(query, ("query",), heads_first=False)
        k, v = layer._project_key_value(value, key, (), heads_first=False)
    causal_only = use_causal_mask and all(
        m is None for m in (query_mask, value_mask, key_mask, attention_mask))
    mask = None if causal_only else masks.call_mask(
        query, value, query_mask, value_mask, key_mask, attention_mask, use_causal_mask)
    mask, attends = _fused_mask(mask, ops.shape(q)[1], ops.shape(k)[1])
    heads = _dot_product_attention(
        q, k, v, mask, causal_only,
        scale=1.0 / math.sqrt(layer.key_dim) if layer.scoring == "scaled_dot" else 1.0)
    if attends is None:
        return heads
    return ops.where(attends, heads, ops.zeros_like(heads))
