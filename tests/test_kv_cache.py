"""Tests for keras_attention/kv_cache.py: buffer writes, the buffer's mask and the
decoding-step product, against NumPy."""

import keras
import numpy as np
import pytest

from keras_attention import kv_cache
from keras_attention.layers.multi_head import MultiHeadAttention

from backends import BACKEND, compiled, to_numpy


@pytest.mark.parametrize("axis", [2, 3])
@pytest.mark.parametrize("steps, index", [(1, 0), (1, 5), (3, 2), (2, 4)])
def test_write_positions_matches_numpy(rng, axis, steps, index):
    cache = rng.normal(size=(2, 3, 6, 6)).astype("float32")
    new_shape = list(cache.shape)
    new_shape[axis] = steps
    new = rng.normal(size=new_shape).astype("float32")
    expected = cache.copy()
    where = [slice(None)] * 4
    where[axis] = slice(index, index + steps)
    expected[tuple(where)] = new
    written = kv_cache.write_positions(cache, new, np.int32(index), axis)
    np.testing.assert_array_equal(np.asarray(written), expected)


def test_cache_mask_self_and_cross_attention(rng):
    value_mask = rng.random((2, 6)) > 0.3
    own = np.asarray(kv_cache.cache_mask(value_mask, np.int32(2), 3, 6))  # queries at 2, 3, 4
    expected = (np.arange(6)[None, :] <= np.arange(2, 5)[:, None])[None] & value_mask[:, None]
    np.testing.assert_array_equal(np.broadcast_to(own, (2, 1, 3, 6)), expected[:, None])
    cross = np.asarray(kv_cache.cache_mask(value_mask, None, 1, 6))
    np.testing.assert_array_equal(np.broadcast_to(cross, (2, 1, 1, 6)),
                                  value_mask[:, None, None, :])
    assert kv_cache.cache_mask(None, None, 1, 6) is None


@pytest.mark.parametrize("queries", [1, 3])
def test_batched_matmul_matches_numpy(rng, queries):
    a = rng.normal(size=(2, 4, queries, 5)).astype("float32")
    b = rng.normal(size=(2, 4, 5, 7)).astype("float32")
    np.testing.assert_allclose(np.asarray(kv_cache.batched_matmul(a, b)), a @ b, rtol=1e-5,
                               atol=1e-6)


def _op_types(fn):
    import tensorflow as tf

    return {op.type for op in tf.function(fn).get_concrete_function().graph.get_operations()}


@pytest.mark.tensorflow_only
def test_only_the_cached_decoding_step_uses_batch_mat_mul_v3(rng):
    """The V3 product pays in cached decoding steps only (see `batched_matmul`): a
    TensorFlow op, read from the traced graph."""
    import tensorflow as tf

    layer = MultiHeadAttention(2, 4)
    query = tf.constant(rng.normal(size=(1, 1, 8)).astype("float32"))  # one query
    value = tf.constant(rng.normal(size=(1, 5, 8)).astype("float32"))
    layer(query, value)
    assert "BatchMatMulV3" not in _op_types(lambda: layer(query, value))
    key_cache, value_cache = layer.empty_cache(1, 5)
    step = _op_types(lambda: layer.call_with_cache(query, key_cache, value_cache, cache_index=2)[0])
    assert "BatchMatMulV3" in step


def _step_function(layer, jit_compile=False):
    """`layer.call_with_cache` as a decoding step `(query, keys, values, index)`: compiled
    by XLA (`backends.compiled`), else traced into a graph (`tf.function`, as an exported
    decoder runs it) on TensorFlow and called eagerly on the other backends."""

    def step(query, keys, values, index):
        return layer.call_with_cache(query, keys, values, cache_index=index)

    if jit_compile:
        step = compiled(step)
        if step is None:
            pytest.skip("PyTorch has no XLA compilation here (backends.compiled); the eager "
                        "steps are checked by the jit_compile=False case")
        return step
    if BACKEND == "tensorflow":
        import tensorflow as tf

        return tf.function(step)
    return step


def _steps(layer, x, step):
    """`x` `(B, T, D)` one position at a time through `step` (a `call_with_cache`)."""
    keys, values = layer.empty_cache(x.shape[0], x.shape[1])
    outputs = []
    for t in range(x.shape[1]):
        index = keras.ops.convert_to_tensor(t, "int32")
        output, keys, values = step(x[:, t : t + 1], keys, values, index)
        outputs.append(to_numpy(output).astype("float32"))
    return np.concatenate(outputs, 1)


@pytest.mark.parametrize("jit_compile", [False, True])
def test_cached_steps_equal_the_causal_call_compiled_or_not(rng, jit_compile):
    """The one-query products of a step (BatchMatMulV3 on TensorFlow), also under XLA."""
    x = keras.ops.convert_to_tensor(rng.normal(size=(2, 4, 8)).astype("float32"))
    layer = MultiHeadAttention(2, 4)
    full = to_numpy(layer(x, x, use_causal_mask=True))
    step = _step_function(layer, jit_compile)
    np.testing.assert_allclose(_steps(layer, x, step), full, atol=1e-5)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_cached_steps_under_mixed_precision(rng, policy):
    """Half-precision buffers with a float32 input (as `zoo.decode` steps get): BatchMatMulV3
    has no kernel for mixed operands, so the product falls back to `ops.matmul`."""
    x = rng.normal(size=(2, 4, 8)).astype("float32")
    reference = MultiHeadAttention(2, 4)
    expected = to_numpy(reference(x, x, use_causal_mask=True))
    keras.mixed_precision.set_global_policy(policy)
    try:
        layer = MultiHeadAttention(2, 4)
        layer(x, x)
        layer.set_weights(reference.get_weights())
        steps = _steps(layer, keras.ops.convert_to_tensor(x), _step_function(layer))
    finally:
        keras.mixed_precision.set_global_policy("float32")
    np.testing.assert_allclose(steps, expected, atol=5e-2)


@pytest.mark.parametrize("scoring", ["scaled_dot", "additive"])
def test_caches_that_grow_give_the_steps_of_caches_of_the_whole_length(rng, scoring):
    """`grow_cache` pads the buffers with zeros (keys key-major or not): steps over buffers
    of 2 positions grown to 3, then 6, give the causal call's outputs, as decoding does with
    caches that double (`zoo.decode.search_steps.growing_loop`)."""
    x = keras.ops.convert_to_tensor(rng.normal(size=(2, 6, 8)).astype("float32"))
    layer = MultiHeadAttention(2, 4, scoring=scoring)
    full = to_numpy(layer(x, x, use_causal_mask=True))
    keys, values = layer.empty_cache(2, 2)
    outputs = []
    for t in range(6):
        if t in (2, 3):
            before = to_numpy(keys)
            keys, values = layer.grow_cache(keys, values, {2: 3, 3: 6}[t])
            grown = to_numpy(keys)
            axis = 3 if scoring != "additive" else 2
            np.testing.assert_array_equal(np.take(grown, range(before.shape[axis]), axis), before)
            assert not np.take(grown, range(before.shape[axis], grown.shape[axis]), axis).any()
        index = keras.ops.convert_to_tensor(t, "int32")
        output, keys, values = layer.call_with_cache(x[:, t : t + 1], keys, values, index)
        outputs.append(to_numpy(output))
    assert to_numpy(values).shape == (2, 2, 6, 4)
    np.testing.assert_allclose(np.concatenate(outputs, 1), full, atol=1e-5)
