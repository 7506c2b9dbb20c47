"""int8 weights for the layers Keras' `model.quantize("int8")` cannot reach by itself.

Keras' int8 scheme (`keras.layers.Dense.quantize("int8")`), which this module applies to the
attention projections of `MultiHeadAttention` and to the tied output projection
`y Eᵀ` of `TokenAndPositionEmbedding`:

- a kernel W `(K, N)` is stored as int8 with one float scale per output unit,
  `s_w[j] = 127 / max_k |W[k, j]|`, `W_q = round(W · s_w)`, so that `W ≈ W_q / s_w`;
- at call time each input row is quantized the same way, `s_x[i] = 127 / max_k |x[i, k]|`;
- the product runs on int8 with int32 sums, and `x W ≈ (x_q W_q) / (s_x s_wᵀ)`.

On TensorFlow everything is core ops (`MatMul`/`BatchMatMulV3` on int8 with an int32 output),
so a quantized model exports to a SavedModel of core ops, as TF Serving's model server links them;
on JAX and PyTorch the products are `keras.ops.matmul` of the int8 operands, summed in int32.

Reference: Jacob et al., "Quantization and Training of Neural Networks for Efficient
Integer-Arithmetic-Only Inference", CVPR 2018 (symmetric per-channel weights, section 2).
"""

import keras
from keras import ops

if keras.backend.backend() == "tensorflow":
    import tensorflow as tf

INT8_RANGE = (-127, 127)


def quantize_kernel(kernel, contracting_axes=1):
    """A float kernel -> `(int8 kernel, float scale)`, one scale per output unit.

    kernel: `(K_1, …, K_c, N_1, …)` with its first `contracting_axes` axes summed over in the
    product; the scale has the shape of the remaining axes `(N_1, …)`.
    """
    axes = tuple(range(contracting_axes))
    values, scale = keras.quantizers.abs_max_quantize(
        kernel, axis=axes, value_range=INT8_RANGE, to_numpy=True
    )
    return values, ops.reshape(scale, tuple(kernel.shape[contracting_axes:]))


def int8_matmul(inputs, kernel, scale, dtype):
    """`inputs (M, K) @ (kernel / scale)` with int8 operands and int32 sums.

    inputs: float `(M, K)`; kernel: int8 `(K, N)`; scale: float `(N,)` -> `(M, N)` in `dtype`.
    """
    rows, row_scale = keras.quantizers.abs_max_quantize(inputs, axis=-1, value_range=INT8_RANGE)
    products = _int32_matmul(rows, kernel)  # (M, N)
    return ops.cast(products, dtype) / (ops.cast(row_scale, dtype) * ops.cast(scale, dtype))


def int8_tied_logits(rows, table, table_scale, dtype, table_major=False):
    """`rows (M, D) @ (table / table_scale)ᵀ`: logits `(M, V)` from an int8 token table.

    table: int8 `(V, D)` with one scale per token `(V,)` (Keras' int8 `Embedding`).
    `table_major=True` computes `(E_q x_qᵀ)ᵀ`, the layout XLA:CPU wants for the table
    (`zoo.transformer.decoding.tied_logits`); otherwise MatMul reads `E_qᵀ` in place (`transpose_b`).
    """
    quantized, row_scale = keras.quantizers.abs_max_quantize(rows, axis=-1, value_range=INT8_RANGE)
    if table_major:
        products = ops.transpose(_int32_matmul(table, quantized, transpose_b=True))
    else:
        products = _int32_matmul(quantized, table, transpose_b=True)
    return ops.cast(products, dtype) / (ops.cast(row_scale, dtype) * ops.cast(table_scale, dtype))


def _int32_matmul(a, b, transpose_b=False):
    """`a @ b` (or `a @ bᵀ`) of int8 operands, summed in int32."""
    if keras.backend.backend() == "tensorflow":
        return tf.matmul(a, b, transpose_b=transpose_b, output_type=tf.int32)
    if transpose_b:
        b = ops.transpose(b)
    return ops.matmul(ops.cast(a, "int32"), ops.cast(b, "int32"))


def add_int8_kernel(layer, name, shape, contracting_axes=1):
    """An int8 kernel `name` `shape` and its scale `name + "_scale"` (the remaining axes) on
    `layer`, both non-trainable, created in this order; returns the kernel."""
    kernel = layer.add_weight(name=name, shape=shape, initializer="zeros", dtype="int8",
                              trainable=False)
    scale = layer.add_weight(name=f"{name}_scale", shape=tuple(shape[contracting_axes:]),
                             initializer="ones", trainable=False)
    setattr(layer, f"{name}_scale", scale)
    return kernel


def quantize_kernels(layer, contracting_axes):
    """Replace float kernels of `layer` by int8 ones in place, and mark it quantized.

    contracting_axes: `{attribute name: number of leading axes summed over}`. Each kernel is
    deleted and re-created with `add_int8_kernel` (kernel, then its scale: the order `build`
    follows for an int8 layer, so that saved variables line up), then filled.
    """
    for name, contracting in contracting_axes.items():
        values = ops.convert_to_numpy(getattr(layer, name))
        delattr(layer, name)
        kernel = add_int8_kernel(layer, name, values.shape, contracting)
        setattr(layer, name, kernel)
        quantized, scale = quantize_kernel(values, contracting)
        kernel.assign(quantized)
        getattr(layer, f"{name}_scale").assign(scale)
    layer._is_quantized = True  # Keras' flag: the policy below must not quantize again
    layer.dtype_policy = quantized_policy(layer)


def quantized_policy(layer):
    """The dtype policy of `layer` once its weights are int8 (`"int8_from_<its policy>"`)."""
    return keras.dtype_policies.get(f"int8_from_{layer.dtype_policy.name}")
