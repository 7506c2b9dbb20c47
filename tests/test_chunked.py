"""Chunked (online-softmax) attention equals the full path: outputs, gradients, masks, XLA.

Shape legend: B batch, N heads, T queries, S keys, C chunk size, H head size.
"""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_attention as ka
from keras_attention.chunked import chunked_dot_product_attention

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


def _numpy_attention(q, k, v, scale, mask):
    """`masked_softmax(q kᵀ · scale) v` in float64; rows with no visible key give zeros."""
    scores = np.einsum("bnth,bnsh->bnts", q, k).astype("float64") * scale
    scores = np.where(mask, scores, -np.inf)
    row_max = np.max(scores, axis=-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)
    weights = np.where(mask, np.exp(scores - row_max), 0.0)
    totals = weights.sum(-1, keepdims=True)
    weights = np.where(totals > 0, weights / np.where(totals > 0, totals, 1.0), 0.0)
    return np.einsum("bnts,bnsh->bnth", weights, v)


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


@pytest.mark.parametrize("chunk_size", [1, 4, 11, 16])
@pytest.mark.parametrize("case", MASK_CASES)
def test_kernel_matches_numpy(case, chunk_size):
    q, k, v = _x(B, N, T, H), _x(B, N, S, H, seed=1), _x(B, N, S, 3, seed=2)
    kwargs, mask = _kernel_masks(case)
    scale = 1.0 / math.sqrt(H)
    actual = chunked_dot_product_attention(q, k, v, chunk_size, scale=scale, **kwargs)
    np.testing.assert_allclose(actual.numpy(), _numpy_attention(q, k, v, scale, mask),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("chunk_size", [3, 11])
@pytest.mark.parametrize("case", MASK_CASES)
def test_kernel_gradients_match_the_full_softmax(case, chunk_size):
    q, k, v = (tf.constant(a) for a in (_x(B, N, T, H), _x(B, N, S, H, seed=1), _x(B, N, S, 3, seed=2)))
    kwargs, mask = _kernel_masks(case)
    projection = tf.constant(_x(B, N, T, 3, seed=3))
    scale = 0.5

    def full(q, k, v):
        scores = tf.matmul(q, k, transpose_b=True) * scale
        return tf.matmul(ka.masked_softmax(scores, tf.constant(mask)), v)

    def chunked(q, k, v):
        return chunked_dot_product_attention(q, k, v, chunk_size, scale=scale, **kwargs)

    gradients = []
    for attention in (full, chunked):
        with tf.GradientTape() as tape:
            tape.watch([q, k, v])
            loss = tf.reduce_sum(attention(q, k, v) * projection)
        gradients.append([g.numpy() for g in tape.gradient(loss, [q, k, v])])
    for expected, actual, name in zip(*gradients, "qkv"):
        assert np.all(np.isfinite(actual)), name
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5, err_msg=name)


def _layer_pair(chunk_size, **kwargs):
    full = ka.MultiHeadAttention(num_heads=N, key_dim=H, name="full", **kwargs)
    chunked = ka.MultiHeadAttention(num_heads=N, key_dim=H, chunk_size=chunk_size,
                                    name="chunked", **kwargs)
    return full, chunked


def _outputs_and_gradients(layer, query, value, call_kwargs, jit_compile=None):
    projection = tf.constant(_x(B, query.shape[1], layer.output_dim or query.shape[-1], seed=5))
    self_attention = value is None

    def step(query, value):
        inputs = [query] if self_attention else [query, value]
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            output = layer(query, query if self_attention else value, **call_kwargs)
            loss = tf.reduce_sum(output * projection)
        return output, tape.gradient(loss, inputs + layer.trainable_weights)

    if jit_compile is not None:
        step = tf.function(step, jit_compile=jit_compile)
    output, gradients = step(tf.constant(query), tf.constant(query if self_attention else value))
    gradients = [keras.ops.convert_to_numpy(g) for g in gradients]
    return output.numpy(), gradients


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
    """Eagerly and in `tf.function`; under XLA with every mask at once ("all": the same ops
    as each mask alone)."""
    key_mask, query_mask, attention_mask = _masks()
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
    expected, expected_gradients = _outputs_and_gradients(full, x, None, call_kwargs)
    for jit_compile in (None, False, True) if case == "all" else (None, False):
        actual, gradients = _outputs_and_gradients(chunked, x, None, call_kwargs, jit_compile)
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)
        for g, e in zip(gradients, expected_gradients):
            np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


def test_cross_attention_matches_the_full_path():
    full, chunked = _layer_pair(4, scoring="dot", value_dim=3, output_dim=5)
    query, value = _x(B, T, 6), _x(B, S, 8, seed=1)
    key_mask, _, attention_mask = _masks()
    call_kwargs = {"value_mask": key_mask, "attention_mask": attention_mask}
    full(query, value)
    chunked(query, value)
    chunked.set_weights(full.get_weights())
    expected, expected_gradients = _outputs_and_gradients(full, query, value, call_kwargs)
    actual, gradients = _outputs_and_gradients(chunked, query, value, call_kwargs, True)
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)
    for g, e in zip(gradients, expected_gradients):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


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
    expected, expected_gradients = _outputs_and_gradients(full, x, None, {"value_mask": value_mask})
    actual, gradients = _outputs_and_gradients(chunked, x, None, {"value_mask": value_mask})
    np.testing.assert_allclose(actual[1], np.broadcast_to(full.output_bias.numpy(), (6, 6)),
                               atol=1e-6)
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)
    for g, e in zip(gradients, expected_gradients):
        assert np.all(np.isfinite(g))
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


def test_unknown_length_under_tf_function():
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


def _peak_mib(run, q, k, v):
    """Peak of TensorFlow's CPU allocator during `run(q, k, v)`, above what was held before
    (after a warm-up call at one chunk)."""
    run(q[:, :, :1024], k[:, :, :1024], v[:, :, :1024])
    tf.config.experimental.reset_memory_stats("CPU:0")
    held = tf.config.experimental.get_memory_info("CPU:0")["current"]
    run(q, k, v)
    return (tf.config.experimental.get_memory_info("CPU:0")["peak"] - held) / 2**20


def test_eager_calls_under_a_tape_keep_the_memory_bound_of_tf_function(rng):
    """n = 4,096 keys in chunks of 1,024 under a `GradientTape`: the eager call's peak memory
    stays within 10% of the same step in `tf.function`. Recorded op by op, each chunk's
    (1, 4, 4096, 1024) scores would be kept for the backward pass: about 1 GB, not 0.14."""

    def step(q, k, v):
        with tf.GradientTape() as tape:
            tape.watch([q, k, v])
            out = chunked_dot_product_attention(q, k, v, 1024, scale=0.25)
            loss = tf.reduce_sum(out * out)
        return tape.gradient(loss, [q, k, v])

    q, k, v = (tf.constant(rng.normal(size=(1, 4, 4096, 16)).astype("float32"))
               for _ in range(3))
    in_function = _peak_mib(tf.function(step), q, k, v)
    eager = _peak_mib(step, q, k, v)
    assert 64 < in_function < 512  # O(T·C) blocks of 64 MiB: measured, and bounded
    assert eager <= 1.1 * in_function, (in_function, eager)
