"""What a layer does differently while XLA compiles it, so that a decoding step of one
sentence runs XLA:CPU's multi-threaded dot kernel on every weight matrix.

A step of one sentence (greedy or sampled decoding at batch 1) multiplies one row by each
weight matrix: a matrix-vector product. XLA:CPU runs a plain dot on the intra-op threads,
but it fuses into the product what is next to it, and emits the fusion as its own loop on
one thread:

- an `add` after the product (an "output fusion"): `add_bias` writes a bias as
  `x - (-b)`, which XLA does not fuse and which equals `x + b` exactly;
- a reshape of the kernel before it (a bitcast): `unfused` puts the reshaped kernel behind
  an optimization barrier.

Measured on a 2-core Intel Xeon VM (AVX-512), an OPUS-MT-sized decoder (d 512, 6 layers,
58,101 tokens) at batch 1: 16.6 ms per greedy step without either, 13.2 with `add_bias`,
9.7 with both (docs/experiments/jit_export_batch1.md, part 5).
"""

import keras
from keras import ops

if keras.backend.backend() == "tensorflow":
    import tensorflow as tf
    from tensorflow.compiler.tf2xla.ops import gen_xla_ops  # XLA's optimization barrier
    from tensorflow.python.ops import control_flow_util  # the XLA context (no public API)


def in_xla_context():
    """Whether the TensorFlow graph being traced will be compiled by XLA (inside a
    `tf.function(jit_compile=True)`, its loops and conditionals included); False on other
    backends and in eager mode."""
    return (
        keras.backend.backend() == "tensorflow"
        and tf.inside_function()
        and control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph())
    )


def add_bias(x, bias):
    """`x + bias`; inside XLA written `x - (-bias)`, which XLA:CPU does not fuse into the
    matrix product that made x. The same values either way."""
    if in_xla_context():
        return x - ops.negative(bias)
    return x + bias


def dense(layer, inputs):
    """`layer(inputs)` for a built `keras.layers.Dense`. Inside XLA, with float weights and a
    bias, the same product, bias (by `add_bias`) and activation, computed here."""
    plain = (not in_xla_context() or not layer.use_bias or layer.quantization_mode is not None
             or getattr(layer, "lora_enabled", False))
    if plain:
        return layer(inputs)
    dtype = layer.compute_dtype
    outputs = ops.matmul(ops.cast(inputs, dtype), ops.cast(layer.kernel, dtype))
    outputs = add_bias(outputs, ops.cast(layer.bias, dtype))
    return layer.activation(outputs) if layer.activation is not None else outputs


def unfused(weight):
    """`weight` as it is; inside XLA behind an optimization barrier, so that a reshaped
    kernel reaches its product as a buffer. Without it XLA:CPU fuses the reshape into a
    one-row product and runs the fusion as a plain loop: 0.4 ms instead of under 0.2 ms
    for a 512 × 512 product on the machine above."""
    return _barrier(weight) if in_xla_context() else weight


def _barrier(x):
    """XLA's optimization barrier on x, with the identity as its gradient (TensorFlow
    registers none for it)."""

    @tf.custom_gradient
    def barrier(value):
        return gen_xla_ops.xla_optimization_barrier([value])[0], lambda upstream: upstream

    return barrier(x)
