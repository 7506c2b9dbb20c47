"""Chunked (online-softmax) attention equals the full path: outputs, gradients, masks, XLA,
memory; under every Keras backend (tests/backends.py).

Shape legend: B batch, N heads, T queries, S keys, C chunk size, H head size.
"""

import math
import os

import keras
import numpy as np
import pytest
from keras import ops

import keras_attention as ka
from keras_attention.chunked import chunked_dot_product_attention

import backends
from backends import BACKEND, to_numpy

B, N, T, S, H = 2, 2, 7, 11, 4


def _x(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype("float32")


def _masks(seed=0):
    rng = np.random.default_rng(seed)
    key_mask = np.ones((B, S), bool)
    key_mask[1, 6:] = False  # padding
    query_mask = np.ones((B, T), bool)
    query_mask[0, 5:] = False
    attention_mask = rng.random((B, T, S)) > 0.4
    attention_mask[1, 2] = False  # a query that attends nothing
    return key_mask, query_mask, attention_mask


def _numpy_weights(q, k, scale, mask):
    """`masked_softmax(q kᵀ · scale)` in float64 `(B, N, T, S)`; rows with no visible key
    give zeros."""
    scores = np.einsum("bnth,bnsh->bnts", q, k).astype("float64") * scale
    scores = np.where(mask, scores, -np.inf)
    row_max = np.max(scores, axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)
    weights = np.where(mask, np.exp(scores - row_max), 0.0)
    totals = weights.sum(-1, keepdims=True)
    return np.where(totals > 0, weights / np.where(totals > 0, totals, 1.0), 0.0)


def _numpy_attention(q, k, v, scale, mask):
    return np.einsum("bnts,bnsh->bnth", _numpy_weights(q, k, scale, mask), v)


def _numpy_gradients(q, k, v, scale, mask, d_output):
    """The gradients of `sum(attention(q, k, v) ∘ d_output)` w.r.t. q, k, v, in float64:
    `dV = Pᵀ dO`, `dS = P ∘ (dO Vᵀ - rowsum(dO Vᵀ ∘ P))`, `dQ = dS K · scale`,
    `dK = dSᵀ Q · scale` (the softmax's Jacobian, with all of P at once)."""
    weights = _numpy_weights(q, k, scale, mask)  # P
    d_weights = np.einsum("bnth,bnsh->bnts", d_output, v)
    d_scores = weights * (d_weights - np.sum(d_weights * weights, axis=-1, keepdims=True))
    return (np.einsum("bnts,bnsh->bnth", d_scores, k) * scale,
            np.einsum("bnts,bnth->bnsh", d_scores, q) * scale,
            np.einsum("bnts,bnth->bnsh", weights, d_output))


MASK_CASES = ["none", "key", "causal", "query", "explicit", "all"]


def _kernel_masks(case):
    key_mask, query_mask, attention_mask = _masks()
    kwargs = {
        "none": {},
        "key": {"key_mask": key_mask},
        "causal": {"causal": True},
        "query": {"query_mask": query_mask},
        "explicit": {"attention_mask": attention_mask},
        "all": {"key_mask": key_mask, "query_mask": query_mask,
                "attention_mask": attention_mask, "causal": True},
    }[case]
    mask = np.ones((B, 1, T, S), bool)
    if "key_mask" in kwargs:
        mask &= key_mask[:, None, None, :]
    if "query_mask" in kwargs:
        mask &= query_mask[:, None, :, None]
    if "attention_mask" in kwargs:
        mask &= attention_mask[:, None]
    if kwargs.get("causal"):
        mask &= np.tril(np.ones((T, S), bool))
    return kwargs, mask


def _qkv():
    return _x(B, N, T, H), _x(B, N, S, H, seed=1), _x(B, N, S, 3, seed=2)


@pytest.mark.parametrize("chunk_size", [1, 4, 11, 16])
@pytest.mark.parametrize("case", MASK_CASES)
def test_kernel_matches_numpy(case, chunk_size):
    q, k, v = _qkv()
    kwargs, mask = _kernel_masks(case)
    scale = 1.0 / math.sqrt(H)
    actual = chunked_dot_product_attention(q, k, v, chunk_size, scale=scale, **kwargs)
    np.testing.assert_allclose(to_numpy(actual), _numpy_attention(q, k, v, scale, mask),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("explicit", [(1, T, S), (B, T, 1), (T, S), (1, 1, S)])
def test_kernel_broadcasts_the_attention_mask(explicit):
    """An attention mask of rank 2, or with a dimension of 1 (B, T or S)."""
    q, k, v = _qkv()
    attention_mask = np.random.default_rng(4).random(explicit) > 0.3
    mask = np.broadcast_to(attention_mask, (B, T, S))[:, None]
    actual = chunked_dot_product_attention(q, k, v, 4, scale=0.5, attention_mask=attention_mask)
    np.testing.assert_allclose(to_numpy(actual), _numpy_attention(q, k, v, 0.5, mask),
                               rtol=1e-5, atol=1e-5)


def _full_attention(q, k, v, scale, mask):
    scores = ops.matmul(q, ops.swapaxes(k, -1, -2)) * scale
    return ops.matmul(ka.masked_softmax(scores, mask), v)


@pytest.mark.parametrize("chunk_size", [3, 11])
@pytest.mark.parametrize("case", MASK_CASES)
def test_kernel_gradients_match_numpy_and_the_full_softmax(case, chunk_size):
    """The hand-written backward pass against the softmax's Jacobian in NumPy, and against
    the backend's own differentiation of the full path."""
    q, k, v = _qkv()
    kwargs, mask = _kernel_masks(case)
    projection = _x(B, N, T, 3, seed=3)  # dO
    scale = 0.5
    expected = _numpy_gradients(q, k, v, scale, mask, projection)

    def full(q, k, v):
        return ops.sum(ops.multiply(_full_attention(q, k, v, scale, mask), projection))

    def chunked(q, k, v):
        output = chunked_dot_product_attention(q, k, v, chunk_size, scale=scale, **kwargs)
        return ops.sum(ops.multiply(output, projection))

    for attention in (full, chunked):
        _, gradients = backends.gradients(attention, [q, k, v])
        for actual, wanted, name in zip(gradients, expected, "qkv"):
            assert np.all(np.isfinite(actual)), (attention.__name__, name)
            np.testing.assert_allclose(actual, wanted, rtol=1e-5, atol=1e-5,
                                       err_msg=f"{attention.__name__} d{name}")


@pytest.mark.skipif(BACKEND == "torch", reason="no XLA compilation under PyTorch "
                    "(tests/backends.py, `compiled`); the eager tests above ran")
@pytest.mark.parametrize("case", ["none", "all"])
def test_kernel_compiled_by_xla_matches_numpy(case):
    """The forward and backward passes compiled together (`jax.jit`, XLA on TensorFlow)."""
    q, k, v = _qkv()
    kwargs, mask = _kernel_masks(case)
    projection = _x(B, N, T, 3, seed=3)

    def loss(q, k, v):
        output = chunked_dot_product_attention(q, k, v, 4, scale=0.5, **kwargs)
        return ops.sum(ops.multiply(output, projection))

    value, gradients = backends.compiled_gradients(loss, [q, k, v])
    np.testing.assert_allclose(value, np.sum(_numpy_attention(q, k, v, 0.5, mask) * projection),
                               rtol=1e-5, atol=1e-4)
    for actual, wanted in zip(gradients, _numpy_gradients(q, k, v, 0.5, mask, projection)):
        np.testing.assert_allclose(actual, wanted, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_inputs_are_computed_in_float32(dtype):
    q, k, v = (ops.cast(x, dtype) for x in _qkv())
    kwargs, mask = _kernel_masks("all")
    actual = chunked_dot_product_attention(q, k, v, 4, scale=0.5, **kwargs)
    assert keras.backend.standardize_dtype(actual.dtype) == dtype
    inputs = [to_numpy(ops.cast(x, "float32")) for x in (q, k, v)]
    np.testing.assert_allclose(to_numpy(ops.cast(actual, "float32")),
                               _numpy_attention(*inputs, 0.5, mask), rtol=0, atol=2e-2)


def test_bad_kernel_arguments_raise():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="chunk_size=True"):
        chunked_dot_product_attention(q, k, v, True)
    with pytest.raises(ValueError, match=r"attention_mask.shape=\(7,\)"):
        chunked_dot_product_attention(q, k, v, 4, attention_mask=np.ones((T,), bool))


def _layer_pair(chunk_size, **kwargs):
    full = ka.MultiHeadAttention(num_heads=N, key_dim=H, name="full", **kwargs)
    chunked = ka.MultiHeadAttention(num_heads=N, key_dim=H, chunk_size=chunk_size,
                                    name="chunked", **kwargs)
    return full, chunked


def _outputs_and_gradients(layer, query, value, call_kwargs, compiled=False):
    """The layer's output and the gradients of `sum(output ∘ projection)` w.r.t. its
    weights and inputs (`value` None: self-attention), eagerly or compiled by XLA."""
    projection = _x(B, query.shape[1], layer.output_dim or query.shape[-1], seed=5)
    inputs = [query] if value is None else [query, value]

    def output(query, value=None):
        return layer(query, query if value is None else value, **call_kwargs)

    def loss(*inputs):
        return ops.sum(ops.multiply(output(*inputs), projection))

    if compiled:
        actual = backends.compiled(output)(*inputs)
        _, gradients = backends.compiled_gradients(loss, inputs, layer.trainable_weights)
    else:
        actual = output(*inputs)
        _, gradients = backends.gradients(loss, inputs, layer.trainable_weights)
    return to_numpy(actual), gradients


def _assert_same(actual, expected):
    (output, gradients), (expected_output, expected_gradients) = actual, expected
    np.testing.assert_allclose(output, expected_output, rtol=1e-5, atol=1e-5)
    assert len(gradients) == len(expected_gradients)
    for g, e in zip(gradients, expected_gradients):
        assert np.all(np.isfinite(g))
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


# Each mask of the layer once, and each chunk size against n = 10 (divides it, does not,
# larger than it): the kernel's own chunk sizes x masks are test_kernel_matches_numpy's.
LAYER_CASES = {
    "none": ({}, 32),
    "causal": ({"use_causal_mask": True}, 2),
    "padding": ({"padding": True}, 5),
    "explicit": ({"explicit": True}, 2),
    "all": ({"padding": True, "explicit": True, "use_causal_mask": True}, 5),
}


@pytest.mark.parametrize("case", list(LAYER_CASES))
def test_layer_matches_the_full_path(case):
    """Eagerly; compiled by XLA too with every mask at once ("all": the same ops as each
    mask alone), where the backend compiles (not PyTorch)."""
    key_mask, _, _ = _masks()
    call_kwargs, chunk_size = LAYER_CASES[case]
    call_kwargs = dict(call_kwargs)
    if call_kwargs.pop("padding", False):
        call_kwargs.update(query_mask=key_mask[:, :10], value_mask=key_mask[:, :10])
    if call_kwargs.pop("explicit", False):
        call_kwargs["attention_mask"] = np.random.default_rng(3).random((B, 10, 10)) > 0.4
    full, chunked = _layer_pair(chunk_size)
    x = _x(B, 10, 6)
    full(x, x)
    chunked(x, x)
    chunked.set_weights(full.get_weights())
    expected = _outputs_and_gradients(full, x, None, call_kwargs)
    _assert_same(_outputs_and_gradients(chunked, x, None, call_kwargs), expected)
    if case == "all" and BACKEND != "torch":
        _assert_same(_outputs_and_gradients(chunked, x, None, call_kwargs, compiled=True),
                     expected)


def test_cross_attention_matches_the_full_path():
    full, chunked = _layer_pair(4, scoring="dot", value_dim=3, output_dim=5)
    query, value = _x(B, T, 6), _x(B, S, 8, seed=1)
    key_mask, _, attention_mask = _masks()
    call_kwargs = {"value_mask": key_mask, "attention_mask": attention_mask}
    full(query, value)
    chunked(query, value)
    chunked.set_weights(full.get_weights())
    expected = _outputs_and_gradients(full, query, value, call_kwargs)
    _assert_same(_outputs_and_gradients(chunked, query, value, call_kwargs,
                                        compiled=BACKEND != "torch"), expected)


def test_fully_masked_rows_give_the_output_bias_and_finite_gradients():
    full, chunked = _layer_pair(3)
    x = _x(B, 6, 6)
    value_mask = np.zeros((B, 6), bool)
    value_mask[0, :2] = True  # batch 1 attends nothing at all
    full(x, x)
    chunked(x, x)
    for w in full.weights:
        w.assign(_x(*w.shape, seed=7) * 0.3)
    chunked.set_weights(full.get_weights())
    expected = _outputs_and_gradients(full, x, None, {"value_mask": value_mask})
    actual = _outputs_and_gradients(chunked, x, None, {"value_mask": value_mask})
    np.testing.assert_allclose(actual[0][1], np.broadcast_to(to_numpy(full.output_bias), (6, 6)),
                               atol=1e-6)
    _assert_same(actual, expected)


def test_model_fit_trains_as_the_full_path():
    """Two SGD steps of `model.fit` (a compiled train step under TensorFlow and JAX) leave
    the same weights with `chunk_size` as without."""
    x = _x(4, 9, 6)
    y = _x(4, 9, 6, seed=1)
    weights = []
    for chunk_size in (None, 4):
        keras.utils.set_random_seed(0)
        inputs = keras.Input((9, 6))
        attention = ka.MultiHeadAttention(num_heads=N, key_dim=H, chunk_size=chunk_size)
        model = keras.Model(inputs, attention(inputs, inputs, use_causal_mask=True))
        model.compile(keras.optimizers.SGD(0.5), "mse")
        initial = [to_numpy(w) for w in model.weights]
        history = model.fit(x, y, batch_size=2, epochs=1, shuffle=False, verbose=0)
        assert np.isfinite(history.history["loss"][-1])
        weights.append([to_numpy(w) for w in model.weights])
        assert not all(np.array_equal(a, b) for a, b in zip(initial, weights[-1]))
    for chunked, full in zip(weights[1], weights[0]):
        np.testing.assert_allclose(chunked, full, rtol=1e-4, atol=1e-5)


@pytest.mark.tensorflow_only
def test_unknown_length_under_tf_function():
    import tensorflow as tf

    full, chunked = _layer_pair(4)
    x = _x(B, 9, 6)
    full(x, x)
    chunked(x, x)
    chunked.set_weights(full.get_weights())
    function = tf.function(
        lambda x: chunked(x, x, use_causal_mask=True),
        input_signature=[tf.TensorSpec((None, None, 6), tf.float32)],
    )
    for length in (3, 9):
        np.testing.assert_allclose(
            function(x[:, :length]).numpy(),
            full(x[:, :length], x[:, :length], use_causal_mask=True).numpy(),
            rtol=1e-5, atol=1e-5,
        )


def test_config_round_trip_keeps_chunk_size():
    layer = ka.MultiHeadAttention(num_heads=2, key_dim=4, chunk_size=64)
    config = layer.get_config()
    assert config["chunk_size"] == 64
    assert ka.MultiHeadAttention.from_config(config).chunk_size == 64
    assert ka.MultiHeadAttention(num_heads=2, key_dim=4).get_config()["chunk_size"] is None


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"chunk_size": 0}, "chunk_size=0"),
        ({"chunk_size": 2.0}, "chunk_size=2.0"),
        ({"chunk_size": 4, "scoring": "additive"}, "scoring='additive'"),
        ({"chunk_size": 4, "dropout": 0.1}, "dropout=0.1"),
    ],
)
def test_bad_arguments_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ka.MultiHeadAttention(num_heads=2, key_dim=4, **kwargs)


def test_attention_scores_are_refused():
    layer = ka.MultiHeadAttention(num_heads=2, key_dim=4, chunk_size=4)
    x = _x(B, 5, 6)
    with pytest.raises(ValueError, match="return_attention_scores"):
        layer(x, x, return_attention_scores=True)
    symbolic = keras.Input((5, 6))
    with pytest.raises(ValueError, match="return_attention_scores"):
        layer(symbolic, symbolic, return_attention_scores=True)


# === Memory: one chunk of scores at a time, forward and backward ===


# TensorFlow's CPU allocator is one per process, and its peak counts the tensors of every
# thread, including whatever an earlier test left running in the same pytest worker. So the
# measurement runs in a process of its own: 177 and 237 MiB (tf.function, eager) were once read
# in a CI worker that had run other test files first, against 137 and 136 in a fresh process,
# on a 2-core AVX2 AMD EPYC VM.
_TAPE_MEMORY_SCRIPT = """
import json, sys
import numpy as np
import tensorflow as tf
from keras_attention.chunked import chunked_dot_product_attention


def step(q, k, v):
    with tf.GradientTape() as tape:
        tape.watch([q, k, v])
        out = chunked_dot_product_attention(q, k, v, 1024, scale=0.25)
        loss = tf.reduce_sum(out * out)
    return tape.gradient(loss, [q, k, v])


def peak_mib(run, q, k, v):
    run(q[:, :, :1024], k[:, :, :1024], v[:, :, :1024])  # warm-up at one chunk
    tf.config.experimental.reset_memory_stats("CPU:0")
    held = tf.config.experimental.get_memory_info("CPU:0")["current"]
    run(q, k, v)
    return (tf.config.experimental.get_memory_info("CPU:0")["peak"] - held) / 2**20


rng = np.random.default_rng(0)
q, k, v = (tf.constant(rng.normal(size=(1, 4, 4096, 16)).astype("float32")) for _ in range(3))
json.dump({"in_function": peak_mib(tf.function(step), q, k, v),
           "eager": peak_mib(step, q, k, v)}, sys.stdout)
"""


@pytest.mark.large
@pytest.mark.tensorflow_only
def test_eager_calls_under_a_tape_keep_the_memory_bound_of_tf_function():
    """n = 4,096 keys in chunks of 1,024 under a `GradientTape`: the eager call's peak memory
    (TensorFlow's BFC allocator on the CPU, above what was held before) stays within 10% of the
    same step in `tf.function`. Recorded op by op, each chunk's (1, 4, 4096, 1024) scores would
    be kept for the backward pass: about 1 GB, not 0.14."""
    import json
    import subprocess
    import sys

    env = {**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPU_ALLOCATOR_USE_BFC": "true"}
    result = subprocess.run([sys.executable, "-c", _TAPE_MEMORY_SCRIPT], capture_output=True,
                            text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    peaks = json.loads(result.stdout)
    assert 64 < peaks["in_function"] < 512, peaks  # O(T·C) blocks of 64 MiB: measured, bounded
    assert peaks["eager"] <= 1.1 * peaks["in_function"], peaks


def _loss_of(attention):
    return lambda q, k, v: ops.sum(attention(q, k, v) ** 2)


def _chunked_256(q, k, v):
    return chunked_dot_product_attention(q, k, v, 256, scale=0.25)


def _full(q, k, v):
    return _full_attention(q, k, v, 0.25, None)


@pytest.mark.skipif(BACKEND != "jax", reason="XLA's memory analysis of a jax.jit program; "
                    "the TensorFlow and PyTorch backends have their own memory tests")
def test_jax_gradient_step_memory_grows_linearly_in_the_length():
    """`jax.jit(jax.grad(sum(attention²)))` at T = S = n, 4 heads of 16, C = 256: XLA's
    scratch memory is a few (1, 4, n, 256) blocks for the chunked path (42, 84, 168 MiB at
    n = 2,048, 4,096, 8,192 when measured), doubling with n, a sixth of the (1, 4, n, n)
    scores at 8,192 (1,024 MiB); the full path's is several score tensors (192, 768, 3,072).
    Compiled, not run."""
    import jax

    def scratch_mib(attention, length):
        shape = jax.ShapeDtypeStruct((1, 4, length, 16), "float32")
        step = jax.jit(jax.grad(_loss_of(attention), argnums=(0, 1, 2)))
        analysis = step.lower(shape, shape, shape).compile().memory_analysis()
        return analysis.temp_size_in_bytes / 2**20

    lengths = (2048, 4096, 8192)
    chunked = [scratch_mib(_chunked_256, n) for n in lengths]
    full = [scratch_mib(_full, n) for n in lengths]
    _assert_linear_and_below_the_scores(lengths, chunked, full)


def _assert_linear_and_below_the_scores(lengths, chunked, full):
    """Memories in MiB at T = S = n (4 heads, C = 256): the chunked path's a few blocks
    (1, 4, n, C), doubling with n, below half the scores at the longest; the full path's
    above the scores (1, 4, n, n)."""
    for n, chunked_mib, full_mib in zip(lengths, chunked, full):
        assert chunked_mib < 8 * (4 * n * 256 * 4 / 2**20), (n, chunked)
        assert full_mib > 4 * n * n * 4 / 2**20, (n, full)
    assert chunked[-1] < (4 * lengths[-1] ** 2 * 4 / 2**20) / 2, chunked
    for shorter, longer in zip(chunked, chunked[1:]):
        assert 1.5 < longer / shorter < 2.5, chunked  # linear in n, not quadratic


def _torch_peak_mib(attention, length):
    """Peak of PyTorch's CPU allocations during a forward and backward pass of
    `sum(attention²)` at T = S = `length`, above what was held before: the allocation and
    free events of the profiler (`profile_memory=True`), summed in the order they came."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 4, length, 16, generator=generator, requires_grad=True)
               for _ in range(3))
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as profiler:
        _loss_of(attention)(q, k, v).backward()
    events = sorted((event.start_ns(), event.nbytes())
                    for event in profiler.profiler.kineto_results.events()
                    if event.name() == "[memory]")
    held = peak = 0
    for _, size in events:
        held += size
        peak = max(peak, held)
    return peak / 2**20


@pytest.mark.skipif(BACKEND != "torch", reason="PyTorch's profiler; the TensorFlow and JAX "
                    "backends have their own memory tests")
def test_torch_gradient_step_memory_grows_linearly_in_the_length():
    """A forward and backward pass at T = S = n, 4 heads of 16, C = 256: the chunked path's
    peak is a few (1, 4, n, 256) blocks (42 and 84 MiB at n = 2,048 and 4,096 when
    measured), doubling with n, a third of the (1, 4, n, n) scores at 4,096 (256 MiB); the
    full path's holds several score tensors (193 and 770 MiB)."""
    lengths = (2048, 4096)
    chunked = [_torch_peak_mib(_chunked_256, n) for n in lengths]
    full = [_torch_peak_mib(_full, n) for n in lengths]
    _assert_linear_and_below_the_scores(lengths, chunked, full)
