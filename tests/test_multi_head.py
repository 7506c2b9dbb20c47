"""`MultiHeadAttention` against `keras.layers.MultiHeadAttention`, NumPy, and its own properties.

Shape legend: B batch, T queries, S keys/values, D feature size, N heads, H head size.
"""

import contextlib
import math
from unittest import mock

import keras
import numpy as np
import pytest

from keras_attention.layers import TransformerDecoderBlock, TransformerEncoderBlock
from keras_attention.layers.multi_head import (
    KERAS_WEIGHT_MAP,
    MultiHeadAttention,
    copy_keras_weights,
    fused_by_default,
)

import backends

ATOL = 1e-5

ALL_SCORINGS = ["scaled_dot", "dot", "additive"]


# === Helpers ===


def to_numpy(x):
    return backends.to_numpy(x)


def traced(fn, jit_compile=False):
    """`fn` compiled by XLA (`backends.compiled`; the test is skipped under PyTorch, which has
    none here), or else traced into a TensorFlow graph (`tf.function`) on TensorFlow and
    called eagerly on the other backends."""
    if jit_compile:
        compiled = backends.compiled(fn)
        if compiled is None:
            pytest.skip("PyTorch has no XLA compilation here (backends.compiled); the eager "
                        "case of this test ran under it")
        return compiled
    if backends.BACKEND == "tensorflow":
        import tensorflow as tf

        return tf.function(fn)
    return fn


def randn(rng, *shape):
    return rng.standard_normal(shape).astype("float32")


def randomize(layer, rng):
    """Give every weight (biases included) random values, so that each one matters."""
    for weight in layer.weights:
        weight.assign(0.5 * rng.standard_normal(weight.shape).astype("float32"))


def copy_layer(target, source):
    for target_weight, source_weight in zip(target.weights, source.weights, strict=True):
        target_weight.assign(source_weight)


def keras_pair(
    rng, query, value, key=None, num_heads=2, key_dim=4, value_dim=None, output_dim=None
):
    """A Keras layer with random weights and our layer holding the same weights."""
    reference = keras.layers.MultiHeadAttention(
        num_heads, key_dim, value_dim=value_dim, output_shape=output_dim
    )
    ours = MultiHeadAttention(num_heads, key_dim, value_dim=value_dim, output_dim=output_dim)
    keras_call(reference, query, value, key=key)
    ours(query, value, key=key)
    randomize(reference, rng)
    copy_keras_weights(ours, reference)
    return ours, reference


def keras_call(reference, *args, **kwargs):
    """`reference(*args, **kwargs)` for a `keras.layers.MultiHeadAttention`, without its weights.

    Under JAX with `value_dim != key_dim`, through the path that returns the weights: Keras's
    fused path (`ops.dot_product_attention`) fails there, as `jax.nn.dot_product_attention`
    takes keys and values of one head size and Keras's fallback reshapes the output to the
    query's shape (Keras 3.15, jax 0.10).
    """
    if backends.BACKEND == "jax" and reference.value_dim != reference.key_dim:
        return reference(*args, return_attention_scores=True, **kwargs)[0]
    return reference(*args, **kwargs)


def built_layer(rng, query, value, key=None, **kwargs):
    """Our layer built on these inputs, with random weights."""
    kwargs.setdefault("num_heads", 2)
    kwargs.setdefault("key_dim", 4)
    layer = MultiHeadAttention(**kwargs)
    layer(query, value, key=key)
    randomize(layer, rng)
    return layer


def np_softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def np_multi_head(layer, query, value, key=None, mask=None):
    """NumPy multi-head attention (docs/math.md#multi-head-attention) with `layer`'s weights;
    returns (output, weights)."""
    key = value if key is None else key
    w = {
        weight.path.split("/")[-1]: to_numpy(weight).astype(np.float64) for weight in layer.weights
    }
    q = np.einsum("btd,dnh->bnth", query, w["query_kernel"]) + w["query_bias"][:, None]
    k = np.einsum("bsd,dnh->bnsh", key, w["key_kernel"]) + w["key_bias"][:, None]
    v = np.einsum("bsd,dnh->bnsh", value, w["value_kernel"]) + w["value_bias"][:, None]
    if layer.scoring == "additive":
        # a(q, k) = w_vᵀ tanh(q + k), one w_v per head, on the projected query and key.
        batch, heads, length_q, length_k = q.shape[0], q.shape[1], q.shape[2], k.shape[2]
        scores = np.zeros((batch, heads, length_q, length_k))
        for b, n, t, s in np.ndindex(*scores.shape):
            scores[b, n, t, s] = w["score_kernel"][n] @ np.tanh(q[b, n, t] + k[b, n, s])
    else:
        scale = 1.0 / math.sqrt(layer.key_dim) if layer.scoring == "scaled_dot" else 1.0
        scores = np.einsum("bnth,bnsh->bnts", q, k) * scale
    if mask is None:
        weights = np_softmax(scores)
    else:
        mask = np.broadcast_to(np.asarray(mask, bool)[:, None], scores.shape)  # (B, N, T, S)
        weights = np.where(mask, np_softmax(np.where(mask, scores, -1e9)), 0.0)
    heads = weights @ v  # (B, N, T, Hv)
    output = np.einsum("bnth,nho->bto", heads, w["output_kernel"]) + w["output_bias"]
    return output, weights


def assert_matches_keras(ours, reference, *args, ours_kwargs=None, keras_kwargs=None, **kwargs):
    ours_output, ours_weights = ours(
        *args, return_attention_scores=True, **kwargs, **(ours_kwargs or {})
    )
    keras_output, keras_weights = reference(
        *args, return_attention_scores=True, **kwargs, **(keras_kwargs or {})
    )
    np.testing.assert_allclose(to_numpy(ours_output), to_numpy(keras_output), atol=ATOL)
    np.testing.assert_allclose(to_numpy(ours_weights), to_numpy(keras_weights), atol=ATOL)
    # Without the weights Keras takes its fused path (`ops.dot_product_attention`; not under
    # JAX with value_dim != key_dim: `keras_call`), which gives a query with no allowed key a
    # uniform average instead of zero weights; compare the rows that have at least one key.
    attends = ~np.all(to_numpy(keras_weights) == 0.0, axis=(1, 3))  # (B, T)
    np.testing.assert_allclose(
        to_numpy(ours(*args, **kwargs, **(ours_kwargs or {})))[attends],
        to_numpy(keras_call(reference, *args, **kwargs, **(keras_kwargs or {})))[attends],
        atol=ATOL,
    )
    return to_numpy(ours_output), to_numpy(ours_weights)


# === Equivalence with keras.layers.MultiHeadAttention ===


def test_self_attention_matches_keras(rng):
    x = randn(rng, 2, 5, 8)
    ours, reference = keras_pair(rng, x, x)
    assert_matches_keras(ours, reference, x, x)


def test_self_attention_fused_path_equals_separate_path(rng):
    """`value is query` projects Q, K, V with one matmul; a copy of x takes the unfused path."""
    x = randn(rng, 2, 5, 8)
    layer = built_layer(rng, x, x, num_heads=3, key_dim=4, value_dim=6)
    fused = to_numpy(layer(x, x))
    separate = to_numpy(layer(x, x.copy(), key=x.copy()))
    np.testing.assert_allclose(fused, separate, atol=ATOL)


@pytest.mark.parametrize("separate_key", [False, True])
def test_cross_attention_matches_keras(rng, separate_key):
    """m != n, value_dim != key_dim, output_dim != D, and key/value of different sizes."""
    query = randn(rng, 2, 3, 8)  # (B, T, Dq)
    value = randn(rng, 2, 6, 5)  # (B, S, Dv)
    key = randn(rng, 2, 6, 7) if separate_key else None  # (B, S, Dk)
    ours, reference = keras_pair(
        rng, query, value, key=key, num_heads=3, key_dim=4, value_dim=6, output_dim=10
    )
    output, weights = assert_matches_keras(ours, reference, query, value, key=key)
    assert output.shape == (2, 3, 10)
    assert weights.shape == (2, 3, 3, 6)


def test_padding_masks_match_keras(rng):
    query = randn(rng, 2, 4, 8)
    value = randn(rng, 2, 6, 8)
    query_mask = np.array([[True, True, True, False], [True, True, False, False]])
    value_mask = np.array([[True, True, True, True, False, False], [True, False, False] * 2])
    key_mask = np.array([[True] * 6, [True, True, True, True, True, False]])
    ours, reference = keras_pair(rng, query, value)
    # Keras reads the query mask only from the tensor's `_keras_mask`, so it gets the same
    # information as an explicit attention mask.
    attention_mask = query_mask[:, :, None] & value_mask[:, None, :] & key_mask[:, None, :]
    _, weights = assert_matches_keras(
        ours,
        reference,
        query,
        value,
        ours_kwargs={"query_mask": query_mask, "value_mask": value_mask, "key_mask": key_mask},
        keras_kwargs={"attention_mask": attention_mask},
    )
    assert np.all(weights[:, :, ~query_mask[1]][1] == 0.0)


def test_keras_mask_propagation_matches_keras(rng):
    """Masks from `Embedding(mask_zero=True)` reach the layer inside a functional model."""
    query_ids = keras.Input((None,), dtype="int32")
    value_ids = keras.Input((None,), dtype="int32")
    embedding = keras.layers.Embedding(20, 8, mask_zero=True)
    ours = MultiHeadAttention(2, 4)
    reference = keras.layers.MultiHeadAttention(2, 4)
    outputs = []
    for layer in (ours, reference):
        # Fresh embedding calls per attention call: keras.layers.MultiHeadAttention deletes the
        # `_keras_mask` of the tensors it receives, so layers sharing input tensors with it
        # would see no mask, depending on the order the graph runs them in.
        query, value = embedding(query_ids), embedding(value_ids)
        outputs.append(layer(query, value))
        query = embedding(query_ids)
        outputs.append(layer(query, query))
    model = keras.Model([query_ids, value_ids], outputs)
    randomize(reference, rng)
    copy_keras_weights(ours, reference)
    query_batch = np.array([[3, 4, 5, 0], [6, 7, 0, 0], [0, 0, 0, 0]])
    value_batch = np.array([[1, 2, 3, 4, 0], [5, 0, 0, 0, 0], [8, 9, 0, 0, 0]])
    ours_cross, ours_self, keras_cross, keras_self = [
        to_numpy(x) for x in model([query_batch, value_batch])
    ]
    # Keras's fused path gives padded queries (no key to attend) a uniform average, we give
    # them zero weights (docs/math.md#masks); compare the real query positions.
    real = query_batch != 0
    np.testing.assert_allclose(ours_cross[real], keras_cross[real], atol=ATOL)
    np.testing.assert_allclose(ours_self[real], keras_self[real], atol=ATOL)
    # The masks were really applied: the result equals an eager call with explicit masks
    # (symbolic vs eager) and differs from an unmasked call.
    embedded_q = to_numpy(embedding(query_batch))
    embedded_v = to_numpy(embedding(value_batch))
    query_mask, value_mask = query_batch != 0, value_batch != 0
    eager = ours(embedded_q, embedded_v, query_mask=query_mask, value_mask=value_mask)
    np.testing.assert_allclose(to_numpy(eager), ours_cross, atol=ATOL)
    eager_self = ours(embedded_q, embedded_q, query_mask=query_mask, value_mask=query_mask)
    np.testing.assert_allclose(to_numpy(eager_self), ours_self, atol=ATOL)
    assert not np.allclose(to_numpy(ours(embedded_q, embedded_v)), ours_cross, atol=1e-3)
    # Example 2 is all padding: no query attends, so its output is the output bias.
    np.testing.assert_allclose(
        ours_cross[2], np.broadcast_to(to_numpy(ours.output_bias), (4, 8)), atol=ATOL
    )


def test_output_carries_the_query_mask_like_keras(rng):
    """A masked average pooling after each layer reads the mask the output carries: the
    same numbers for ours and Keras (copied weights, the same padding), and the mean over
    the real positions of an eager call with explicit masks. (Padded positions differ: Keras
    gives them a uniform average, we the output bias; an unmasked mean would include them.)"""
    ids = keras.Input((None,), dtype="int32")
    embedding = keras.layers.Embedding(10, 8, mask_zero=True)
    pooling = keras.layers.GlobalAveragePooling1D()
    ours = MultiHeadAttention(2, 4)
    reference = keras.layers.MultiHeadAttention(2, 4)
    outputs = []
    for layer in (ours, reference):
        embedded = embedding(ids)  # one call per layer: Keras's layer deletes its inputs' mask
        outputs.append(pooling(layer(embedded, embedded)))
    model = keras.Model(ids, outputs)
    randomize(reference, rng)
    copy_keras_weights(ours, reference)
    batch = np.array([[3, 4, 5, 0, 0], [6, 7, 8, 9, 0], [1, 0, 0, 0, 0]])
    ours_pooled, keras_pooled = (to_numpy(x) for x in model(batch))
    np.testing.assert_allclose(ours_pooled, keras_pooled, atol=ATOL)
    mask = batch != 0
    embedded = to_numpy(embedding(batch))
    full = to_numpy(ours(embedded, embedded, query_mask=mask, value_mask=mask))  # (B, T, D)
    expected = (full * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
    np.testing.assert_allclose(ours_pooled, expected, atol=ATOL)
    assert not np.allclose(full.mean(1), expected, atol=1e-3)  # the padding would change it


def test_symbolic_call_returns_attention_scores():
    query, value = keras.Input((3, 8)), keras.Input((5, 6))
    output, weights = MultiHeadAttention(2, 4, output_dim=7)(
        query, value, return_attention_scores=True
    )
    assert tuple(output.shape) == (None, 3, 7)
    assert tuple(weights.shape) == (None, 2, 3, 5)
    model = keras.Model([query, value], [output, weights])
    layer = model.layers[-1]
    query_batch, value_batch = np.ones((1, 3, 8), "float32"), np.ones((1, 5, 6), "float32")
    for got, want in zip(
        model([query_batch, value_batch]),
        layer(query_batch, value_batch, return_attention_scores=True),
        strict=True,
    ):
        np.testing.assert_array_equal(to_numpy(got), to_numpy(want))


@pytest.mark.parametrize("length_q, length_k", [(5, 5), (3, 6), (6, 3)])
def test_causal_mask_matches_keras(rng, length_q, length_k):
    query = randn(rng, 2, length_q, 8)
    value = query if length_q == length_k else randn(rng, 2, length_k, 8)
    ours, reference = keras_pair(rng, query, value)
    _, weights = assert_matches_keras(ours, reference, query, value, use_causal_mask=True)
    future = ~np.tril(np.ones((length_q, length_k), dtype=bool))
    assert np.all(weights[..., future] == 0.0)


def test_explicit_attention_mask_matches_keras(rng):
    query = randn(rng, 2, 4, 8)
    value = randn(rng, 2, 5, 8)
    attention_mask = rng.random((2, 4, 5)) > 0.4
    attention_mask[0, 2] = False  # a query that may attend nothing
    ours, reference = keras_pair(rng, query, value)
    output, weights = assert_matches_keras(
        ours, reference, query, value, attention_mask=attention_mask, use_causal_mask=True
    )
    assert np.all(weights[0, :, 2] == 0.0)
    np.testing.assert_allclose(output[0, 2], to_numpy(ours.output_bias), atol=ATOL)
    # A (T, S) mask is shared by the batch.
    shared = attention_mask[1]
    assert_matches_keras(ours, reference, query, value, attention_mask=shared[None])
    np.testing.assert_allclose(
        to_numpy(ours(query, value, attention_mask=shared)),
        to_numpy(reference(query, value, attention_mask=shared[None])),
        atol=ATOL,
    )


def test_gradients_match_keras(rng):
    query = randn(rng, 2, 3, 8)
    value = randn(rng, 2, 4, 6)
    ours, reference = keras_pair(rng, query, value, value_dim=5, output_dim=7)
    upstream = randn(rng, 2, 3, 7)
    mask = np.array([[True, True, True, False], [True, True, False, False]])

    def gradients(call, weights):
        def loss(query, value):
            return keras.ops.sum(keras.ops.multiply(call(query, value, value_mask=mask), upstream))

        return backends.gradients(loss, [query, value], weights)[1]

    ours_weights = [getattr(ours, name) for name in KERAS_WEIGHT_MAP]
    keras_weights = [getattr(getattr(reference, s), v) for s, v in KERAS_WEIGHT_MAP.values()]
    for ours_grad, keras_grad in zip(
        gradients(ours, ours_weights),
        gradients(lambda *args, **kwargs: keras_call(reference, *args, **kwargs), keras_weights),
        strict=True,
    ):
        np.testing.assert_allclose(to_numpy(ours_grad), to_numpy(keras_grad), atol=1e-4)


# === Scorings against NumPy ===


@pytest.mark.parametrize("scoring", ALL_SCORINGS)
def test_scorings_match_numpy(rng, scoring):
    query = randn(rng, 2, 3, 6)
    value = randn(rng, 2, 5, 4)
    key = randn(rng, 2, 5, 7)
    mask = rng.random((2, 3, 5)) > 0.3
    mask[1, 0] = False
    layer = built_layer(
        rng,
        query,
        value,
        key=key,
        num_heads=3,
        key_dim=4,
        value_dim=2,
        output_dim=5,
        scoring=scoring,
    )
    output, weights = layer(
        query, value, key=key, attention_mask=mask, return_attention_scores=True
    )
    expected_output, expected_weights = np_multi_head(layer, query, value, key=key, mask=mask)
    np.testing.assert_allclose(to_numpy(weights), expected_weights, atol=ATOL)
    np.testing.assert_allclose(to_numpy(output), expected_output, atol=1e-4)


def test_scorings_differ(rng):
    """The three scorings give three different results on the same weights (scoring is used)."""
    x = randn(rng, 1, 4, 8)
    base = built_layer(rng, x, x, scoring="additive")
    outputs = {}
    for scoring in ALL_SCORINGS:
        layer = MultiHeadAttention(2, 4, scoring=scoring)
        layer(x, x)
        for weight in layer.weights:
            name = weight.path.split("/")[-1]
            weight.assign(getattr(base, name))
        outputs[scoring] = to_numpy(layer(x, x))
    assert not np.allclose(outputs["scaled_dot"], outputs["dot"], atol=1e-3)
    assert not np.allclose(outputs["scaled_dot"], outputs["additive"], atol=1e-3)


# === Properties ===


@pytest.mark.parametrize("scoring", ALL_SCORINGS)
def test_self_attention_is_permutation_equivariant(rng, scoring):
    x = randn(rng, 2, 6, 8)
    layer = built_layer(rng, x, x, scoring=scoring)
    permutation = rng.permutation(6)
    output = to_numpy(layer(x, x))
    permuted = to_numpy(layer(x[:, permutation], x[:, permutation]))
    np.testing.assert_allclose(permuted, output[:, permutation], atol=ATOL)
    assert not np.allclose(output, output[:, permutation], atol=1e-3)


@pytest.mark.parametrize("scoring", ALL_SCORINGS)
def test_causal_future_tokens_do_not_change_the_past(rng, scoring):
    x = randn(rng, 2, 6, 8)
    changed = x.copy()
    changed[:, 3:] = randn(rng, 2, 3, 8)
    layer = built_layer(rng, x, x, scoring=scoring)
    output, weights = layer(x, x, use_causal_mask=True, return_attention_scores=True)
    output_changed, weights_changed = layer(
        changed, changed, use_causal_mask=True, return_attention_scores=True
    )
    output, output_changed = to_numpy(output), to_numpy(output_changed)
    np.testing.assert_allclose(output_changed[:, :3], output[:, :3], atol=1e-6)
    np.testing.assert_allclose(
        to_numpy(weights_changed)[:, :, :3], to_numpy(weights)[:, :, :3], atol=1e-6
    )
    assert not np.allclose(output_changed[:, 3:], output[:, 3:], atol=1e-3)
    np.testing.assert_allclose(
        to_numpy(layer(changed, changed, use_causal_mask=True)), output_changed, atol=ATOL
    )
    # Without the mask the future does leak (so the check above is not vacuous).
    assert not np.allclose(
        to_numpy(layer(changed, changed))[:, :3], to_numpy(layer(x, x))[:, :3], atol=1e-3
    )


@pytest.mark.parametrize("return_attention_scores", [False, True])
def test_causal_holds_with_dropout_in_training(rng, return_attention_scores):
    """Dropout on the weights must not let the future leak.

    Three layers with the same weights and the same dropout `seed` draw the same dropout
    mask on their first call, so layer `a` on x, `b` on x and `c` on x-with-a-changed-future
    see identical noise: `a` and `b` must agree everywhere (same noise), `a` and `c` on the
    past rows.
    """
    x = randn(rng, 2, 6, 8)
    changed = x.copy()
    changed[:, 4:] = randn(rng, 2, 2, 8)
    layers = []
    for _ in range(3):
        layer = MultiHeadAttention(2, 4, dropout=0.5, seed=7)
        layer(x, x)
        layers.append(layer)
    randomize(layers[0], rng)
    for layer in layers[1:]:
        copy_layer(layer, layers[0])

    def call(layer, inputs):
        result = layer(
            inputs,
            inputs,
            use_causal_mask=True,
            training=True,
            return_attention_scores=return_attention_scores,
        )
        return [to_numpy(r) for r in result] if return_attention_scores else [to_numpy(result)]

    first, same, future_changed = call(layers[0], x), call(layers[1], x), call(layers[2], changed)
    for a, b in zip(first, same):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(future_changed[0][:, :4], first[0][:, :4], atol=1e-6)
    assert not np.allclose(future_changed[0][:, 4:], first[0][:, 4:], atol=1e-3)
    if return_attention_scores:
        np.testing.assert_allclose(future_changed[1][:, :, :4], first[1][:, :, :4], atol=1e-6)
    # Dropout was really active: the inference output differs.
    inference = to_numpy(layers[0](x, x, use_causal_mask=True, training=False))
    assert not np.allclose(inference, first[0], atol=1e-3)


def test_dropout_only_in_training(rng):
    x = randn(rng, 2, 5, 8)
    layer = built_layer(rng, x, x, dropout=0.5, seed=1)
    no_dropout = MultiHeadAttention(2, 4)
    no_dropout(x, x)
    copy_layer(no_dropout, layer)
    expected = to_numpy(no_dropout(x, x))
    np.testing.assert_array_equal(to_numpy(layer(x, x)), expected)  # training=None
    np.testing.assert_array_equal(to_numpy(layer(x, x, training=False)), expected)
    output, weights = layer(x, x, training=True, return_attention_scores=True)
    assert not np.allclose(to_numpy(output), expected, atol=1e-3)
    # The returned weights are those before dropout: still a distribution.
    np.testing.assert_allclose(to_numpy(weights).sum(-1), 1.0, atol=ATOL)


@pytest.mark.parametrize("scoring", ALL_SCORINGS)
def test_padded_keys_change_nothing(rng, scoring):
    query = randn(rng, 2, 3, 8)
    value = randn(rng, 2, 5, 8)
    value_mask = np.array([[True, True, True, False, False], [True, False, True, True, False]])
    layer = built_layer(rng, query, value, scoring=scoring)
    changed = value.copy()
    changed[~value_mask] = randn(rng, int((~value_mask).sum()), 8) * 10
    output = to_numpy(layer(query, value, value_mask=value_mask))
    np.testing.assert_allclose(
        to_numpy(layer(query, changed, value_mask=value_mask)), output, atol=1e-5
    )
    assert not np.allclose(
        to_numpy(layer(query, changed)), to_numpy(layer(query, value)), atol=1e-3
    )


@pytest.mark.parametrize("scoring", ALL_SCORINGS)
def test_fully_masked_query_gives_finite_output(rng, scoring):
    query = randn(rng, 2, 3, 8)
    value = randn(rng, 2, 4, 8)
    value_mask = np.array([[False] * 4, [True, True, False, False]])
    layer = built_layer(rng, query, value, scoring=scoring)
    output, weights = layer(query, value, value_mask=value_mask, return_attention_scores=True)
    output, weights = to_numpy(output), to_numpy(weights)
    assert np.all(np.isfinite(output)) and np.all(np.isfinite(weights))
    assert np.all(weights[0] == 0.0)
    # No key to attend: every head is zero and the output is the output bias.
    np.testing.assert_allclose(
        output[0], np.broadcast_to(to_numpy(layer.output_bias), (3, 8)), atol=ATOL
    )


@pytest.mark.parametrize("scoring", ALL_SCORINGS)
def test_weights_are_a_distribution_over_keys(rng, scoring):
    query = randn(rng, 2, 4, 8) * 5
    value = randn(rng, 2, 7, 8) * 5
    attention_mask = rng.random((2, 4, 7)) > 0.5
    attention_mask[..., 0] = True
    layer = built_layer(rng, query, value, num_heads=3, scoring=scoring)
    for kwargs in ({}, {"attention_mask": attention_mask}):
        _, weights = layer(query, value, return_attention_scores=True, **kwargs)
        weights = to_numpy(weights)
        assert weights.shape == (2, 3, 4, 7)
        assert np.all(weights >= 0.0)
        np.testing.assert_allclose(weights.sum(-1), 1.0, atol=ATOL)
    assert np.all(weights[np.broadcast_to(~attention_mask[:, None], weights.shape)] == 0.0)


# === The fused path (`flash_attention`, keras.ops.dot_product_attention) ===

# Where flash_attention=None takes the fused op: PyTorch, and JAX on a GPU or TPU, which
# `as_if_on_an_accelerator` makes JAX's CPU pass for (not on JAX's CPU, nor TensorFlow).
FUSED_BACKEND = backends.BACKEND in ("jax", "torch")


@contextlib.contextmanager
def as_if_on_an_accelerator():
    """Under JAX, `jax.default_backend()` says "gpu" (`fused_by_default` reads it): None's
    choice on a GPU, computed here on the CPU."""
    if backends.BACKEND != "jax":
        yield
        return
    import jax

    with mock.patch.object(jax, "default_backend", return_value="gpu"):
        yield


@contextlib.contextmanager
def spied_dot_product_attention():
    """`keras.ops.dot_product_attention`, still computing, with its calls counted."""
    with mock.patch.object(
        keras.ops, "dot_product_attention", wraps=keras.ops.dot_product_attention
    ) as spy:
        yield spy


def fused_pair(rng, query, value, **kwargs):
    """The layer with `flash_attention=True` and with `False`, the same random weights."""
    layers = [MultiHeadAttention(2, 4, flash_attention=flag, **kwargs) for flag in (True, False)]
    for layer in layers:
        layer(query, value)
    randomize(layers[0], rng)
    copy_layer(layers[1], layers[0])
    return layers


def fused_mask_cases(rng):
    """Masks of a call with 4 queries and 5 keys: padding (a padded query, and an example
    whose keys are all padding), causal alone (`is_causal` on the fused path, T != S), and
    an attention mask with a query that may attend nothing, merged with the causal mask
    and padded keys."""
    attention_mask = rng.random((2, 4, 5)) > 0.3
    attention_mask[0, 1] = False
    return {
        "padding": dict(query_mask=np.array([[True, True, False, True], [True] * 4]),
                        value_mask=np.array([[True, True, True, False, False], [False] * 5])),
        "causal": dict(use_causal_mask=True),
        "combined": dict(attention_mask=attention_mask, use_causal_mask=True,
                         value_mask=np.array([[True] * 5, [True, True, True, True, False]])),
    }


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_fused_path_matches_the_explicit_path(rng, policy):
    """Outputs and gradients (inputs and every weight) of `flash_attention=True` and `False`
    agree under each mask of `fused_mask_cases`, fully masked queries included (zero heads,
    finite gradients). value_dim 6 != key_dim 4: JAX's op takes one head size, the layer
    pads. Float32 to 1e-5; mixed_bfloat16 to 2e-2 of the largest value: bf16 keeps 8 bits,
    so two roundings of one output near 6 may be 2 steps (1.6 %) apart, and PyTorch's bf16
    backward differs from the explicit one by up to 1.5 %, as either does from float32.
    One gradient program per layer, over the three cases."""
    keras.config.set_dtype_policy(policy)
    query, value = randn(rng, 2, 4, 8), randn(rng, 2, 5, 8)
    cases = fused_mask_cases(rng)
    upstream = {case: keras.ops.convert_to_tensor(randn(rng, 2, 4, 8)) for case in cases}
    layers = fused_pair(rng, query, value, value_dim=6)
    outputs, grads = [], []
    for layer in layers:
        def forward(query, value, layer=layer):
            return [layer(query, value, **masks) for masks in cases.values()]

        def loss(query, value, forward=forward):
            return sum(keras.ops.sum(keras.ops.multiply(keras.ops.cast(output, "float32"), up))
                       for output, up in zip(forward(query, value), upstream.values()))

        outputs.append([to_numpy(output) for output in forward(query, value)])
        grads.append(backends.gradients(loss, [query, value], layer.trainable_weights)[1])
    names = [f"output ({case})" for case in cases] + [
        weight.path.split("/")[-1] for weight in layers[1].trainable_weights] + ["query", "value"]
    results = {name: [np.asarray(x).astype("float32") for x in pair] for name, pair in zip(
        names, zip(outputs[0] + grads[0], outputs[1] + grads[1], strict=True), strict=True)}
    for name, (got, want) in results.items():
        assert np.all(np.isfinite(got)), name
        # The key bias's gradient is 0 in exact arithmetic (it adds one q·b to a whole row
        # of scores): only the rounding of its kernel's gradient terms is left of it.
        scale = np.abs(results["key_kernel" if name == "key_bias" else name][1]).max()
        tolerance = 2e-2 * max(1.0, scale) if policy == "mixed_bfloat16" else ATOL
        np.testing.assert_allclose(got, want, atol=tolerance, err_msg=name)


def test_flash_attention_true_calls_dot_product_attention(rng):
    """On every backend (TensorFlow's op is einsums and a softmax), self-attention's fused
    projection included; the kernel flag passed is Keras's default, None."""
    x = randn(rng, 2, 4, 8)
    fused, explicit = fused_pair(rng, x, x)
    with spied_dot_product_attention() as spy:
        got = fused(x, x, use_causal_mask=True)
        assert spy.call_count == 1
        assert spy.call_args.kwargs["flash_attention"] is None
        assert spy.call_args.kwargs["is_causal"] is True
        want = explicit(x, x, use_causal_mask=True)
        assert spy.call_count == 1
    np.testing.assert_allclose(to_numpy(got), to_numpy(want), atol=ATOL)


def test_default_takes_the_fused_path_where_the_backend_has_one(rng):
    """None: the fused op on PyTorch and on JAX's accelerators, the explicit path on
    TensorFlow and JAX's CPU, and the explicit path for the calls the op cannot do
    (weights returned, dropout in training, additive scoring; `chunk_size` never reaches
    the choice)."""
    assert fused_by_default() is (backends.BACKEND == "torch")  # this CPU
    x = randn(rng, 2, 4, 8)
    layers = {
        "dropout": built_layer(rng, x, x, dropout=0.5, seed=1),
        "additive": built_layer(rng, x, x, scoring="additive"),
    }

    def calls(name, **kwargs):
        with spied_dot_product_attention() as spy:
            layers[name](x, x, **kwargs)
        return spy.call_count

    assert calls("dropout") == int(fused_by_default())
    with as_if_on_an_accelerator():
        assert calls("dropout") == calls("dropout", training=False) == int(FUSED_BACKEND)
        assert calls("dropout", use_causal_mask=True, query_mask=np.ones((2, 4), bool)) == int(
            FUSED_BACKEND)
        assert calls("dropout", training=True) == 0  # attention dropout active
        assert calls("dropout", return_attention_scores=True) == 0
        assert calls("additive") == 0


def test_false_stays_explicit_whatever_keras_global_flash_setting(rng):
    """Keras's own layer reads `flash_attention=False` as "the global setting"; ours keeps
    False. The global setting is the kernel flag passed to the fused op, not the choice
    of the op."""
    x = randn(rng, 2, 4, 8)
    explicit = built_layer(rng, x, x, flash_attention=False)
    default = built_layer(rng, x, x)
    try:
        for setting in (keras.config.enable_flash_attention, keras.config.disable_flash_attention):
            setting()
            with as_if_on_an_accelerator(), spied_dot_product_attention() as spy:
                explicit(x, x)
                assert spy.call_count == 0
                default(x, x)
                assert spy.call_count == int(FUSED_BACKEND)
            if FUSED_BACKEND:
                flag = keras.config.is_flash_attention_enabled()
                assert spy.call_args.kwargs["flash_attention"] is flag  # None, then False
    finally:
        keras.config.enable_flash_attention()


def test_flash_attention_true_refuses_what_it_cannot_compute(rng):
    with pytest.raises(ValueError, match=r"scoring='additive'"):
        MultiHeadAttention(2, 4, scoring="additive", flash_attention=True)
    with pytest.raises(ValueError, match=r"chunk_size=2"):
        MultiHeadAttention(2, 4, chunk_size=2, flash_attention=True)
    with pytest.raises(ValueError, match=r"flash_attention='yes'"):
        MultiHeadAttention(2, 4, flash_attention="yes")
    x = randn(rng, 2, 4, 8)
    layer = built_layer(rng, x, x, dropout=0.5, flash_attention=True)
    with pytest.raises(ValueError, match=r"return_attention_scores=True"):
        layer(x, x, return_attention_scores=True)
    with pytest.raises(ValueError, match=r"dropout=0\.5, training=True"):
        layer(x, x, training=True)
    layer(x, x, training=False)  # no dropout in inference: the fused op does it
    symbolic = keras.Input((4, 8))
    with pytest.raises(ValueError, match=r"return_attention_scores=True"):
        layer(symbolic, symbolic, return_attention_scores=True)


def test_transformer_blocks_pass_flash_attention_on():
    """The Transformer blocks give their `flash_attention` to every `MultiHeadAttention` they
    build and keep it in their config (an old config without it loads as None); linear
    attention has no softmax to fuse."""
    encoder = TransformerEncoderBlock(2, 16, flash_attention=False)
    encoder.build((2, 4, 8))
    decoder = TransformerDecoderBlock(2, 16, flash_attention=True)
    decoder.build((2, 4, 8), (2, 5, 8))
    assert encoder.self_attention.flash_attention is False
    assert decoder.self_attention.flash_attention is decoder.cross_attention.flash_attention is True
    config = encoder.get_config()
    assert config["flash_attention"] is False
    assert TransformerEncoderBlock.from_config(config).flash_attention is False
    del config["flash_attention"]
    assert TransformerEncoderBlock.from_config(config).flash_attention is None
    with pytest.raises(ValueError, match=r"flash_attention=False"):
        TransformerEncoderBlock(2, 16, attention="linear", flash_attention=False)


# === Serialization ===


@pytest.mark.parametrize("scoring", ALL_SCORINGS)
def test_keras_file_round_trip(rng, tmp_path, scoring):
    query_input = keras.Input((3, 8))
    value_input = keras.Input((5, 6))
    layer = MultiHeadAttention(2, 4, value_dim=3, output_dim=5, dropout=0.1, scoring=scoring)
    output, weights = layer(
        query_input, value_input, use_causal_mask=True, return_attention_scores=True
    )
    model = keras.Model([query_input, value_input], [output, weights])
    randomize(layer, rng)
    query, value = randn(rng, 2, 3, 8), randn(rng, 2, 5, 6)
    expected = [to_numpy(x) for x in model([query, value])]
    path = tmp_path / f"attention_{scoring}.keras"
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    loaded_layer = next(lay for lay in loaded.layers if isinstance(lay, MultiHeadAttention))
    assert loaded_layer is not layer
    assert loaded_layer.get_config() == layer.get_config()
    for got, want in zip(loaded([query, value]), expected, strict=True):
        np.testing.assert_array_equal(to_numpy(got), want)


def test_config_round_trip(rng):
    layer = MultiHeadAttention(
        3,
        5,
        value_dim=2,
        output_dim=7,
        dropout=0.2,
        use_bias=False,
        scoring="additive",
        kernel_initializer="he_normal",
        bias_initializer="ones",
        seed=3,
        flash_attention=False,
        name="attention",
    )
    config = layer.get_config()
    clone = MultiHeadAttention.from_config(config)
    assert clone.get_config() == config
    # A config from before `flash_attention` loads with its default, None.
    old = {name: value for name, value in config.items() if name != "flash_attention"}
    assert MultiHeadAttention.from_config(old).flash_attention is None
    for name, value in {
        "num_heads": 3,
        "key_dim": 5,
        "value_dim": 2,
        "output_dim": 7,
        "dropout": 0.2,
        "use_bias": False,
        "scoring": "additive",
        "seed": 3,
        "flash_attention": False,
    }.items():
        assert config[name] == value
        assert getattr(clone, name) == value
    query, value = randn(rng, 2, 3, 4), randn(rng, 2, 5, 6)
    layer(query, value)
    clone(query, value)
    assert not hasattr(layer, "query_bias") or layer.query_bias is None
    copy_layer(clone, layer)
    np.testing.assert_array_equal(to_numpy(clone(query, value)), to_numpy(layer(query, value)))


# === Compilation and precision ===


@pytest.mark.parametrize("scoring", ALL_SCORINGS)
def test_xla_matches_eager(rng, scoring):
    query, value = randn(rng, 2, 4, 8), randn(rng, 2, 6, 8)
    mask = np.array([[True] * 6, [True, True, True, False, False, False]])
    layer = built_layer(rng, query, value, scoring=scoring)

    def forward(q, v, m):
        return layer(q, v, value_mask=m, use_causal_mask=True, return_attention_scores=True)

    compiled = traced(forward, jit_compile=True)
    for got, want in zip(compiled(query, value, mask), forward(query, value, mask), strict=True):
        np.testing.assert_allclose(to_numpy(got), to_numpy(want), atol=ATOL)
    # Self-attention (the fused projection) compiles too.
    np.testing.assert_allclose(
        to_numpy(traced(lambda x: layer(x, x), jit_compile=True)(query)),
        to_numpy(layer(query, query)),
        atol=ATOL,
    )


@pytest.mark.parametrize("jit_compile", [False, True])
def test_single_query_matches_the_row_of_a_longer_query(rng, jit_compile):
    # One query (T = 1): the same outputs, weights and gradients as that row of a
    # longer query. (Cached decoding steps: tests/test_kv_cache.py.)
    query = keras.ops.convert_to_tensor(randn(rng, 2, 3, 8))
    value = keras.ops.convert_to_tensor(randn(rng, 2, 5, 8))
    mask = np.array([[True] * 5, [True, True, False, False, False]])
    layer = built_layer(rng, query, value)
    full, full_weights = layer(query, value, value_mask=mask, return_attention_scores=True)
    forward = traced(
        lambda q: layer(q, value, value_mask=mask, return_attention_scores=True), jit_compile
    )
    for t in range(3):
        output, weights = forward(query[:, t : t + 1])
        np.testing.assert_allclose(to_numpy(output), to_numpy(full[:, t : t + 1]), atol=1e-6)
        np.testing.assert_allclose(
            to_numpy(weights), to_numpy(full_weights[:, :, t : t + 1]), atol=1e-6
        )

    def gradients(q, rows):
        def loss(value):
            return keras.ops.sum(keras.ops.square(layer(q, value, value_mask=mask)[:, :rows]))

        return backends.gradients(loss, [value], layer.trainable_weights)[1]

    for one, longer in zip(gradients(query[:, :1], 1), gradients(query, 1), strict=True):
        np.testing.assert_allclose(to_numpy(one), to_numpy(longer), atol=1e-5)


@pytest.mark.parametrize("policy, tolerance", [("mixed_float16", 5e-2), ("mixed_bfloat16", 1e-1)])
def test_single_query_under_mixed_precision(rng, policy, tolerance):
    # One query in half precision, as one row of the float32 layer.
    query, value = randn(rng, 2, 1, 8), randn(rng, 2, 5, 8)
    reference = built_layer(rng, query, value)
    keras.mixed_precision.set_global_policy(policy)
    try:
        layer = MultiHeadAttention(2, 4)
        layer(query, value)
        layer.set_weights(reference.get_weights())
        output = traced(layer)(query, value)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    np.testing.assert_allclose(
        to_numpy(output).astype("float32"), to_numpy(reference(query, value)), atol=tolerance
    )  # bfloat16 keeps 8 bits of mantissa (outputs near 2 are 0.016 apart), float16 11


@pytest.mark.parametrize("policy, tolerance", [("mixed_float16", 2e-2), ("mixed_bfloat16", 1e-1)])
@pytest.mark.parametrize("scoring", ALL_SCORINGS)
def test_mixed_precision(rng, policy, tolerance, scoring):
    query, value = randn(rng, 2, 4, 8), randn(rng, 2, 6, 8)
    mask = np.array([[True] * 6, [False] * 6])  # the second example attends nothing
    reference = built_layer(rng, query, value, scoring=scoring)
    expected = to_numpy(reference(query, value, value_mask=mask))
    keras.config.set_dtype_policy(policy)
    layer = MultiHeadAttention(2, 4, scoring=scoring)
    layer(query, value)
    copy_layer(layer, reference)
    compute_dtype = policy.split("_")[1]
    assert layer.compute_dtype == compute_dtype
    assert layer.query_kernel.dtype == "float32"
    output, weights = layer(query, value, value_mask=mask, return_attention_scores=True)
    assert keras.backend.standardize_dtype(output.dtype) == compute_dtype
    assert keras.backend.standardize_dtype(weights.dtype) == compute_dtype
    output = to_numpy(keras.ops.cast(output, "float32"))
    assert np.all(np.isfinite(output))
    scale = np.abs(expected).max()
    np.testing.assert_allclose(output, expected, atol=tolerance * scale)


# === Bad input ===


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_heads": 0, "key_dim": 4}, r"num_heads=0"),
        ({"num_heads": -2, "key_dim": 4}, r"num_heads=-2"),
        ({"num_heads": 2, "key_dim": 0}, r"key_dim=0"),
        ({"num_heads": 2, "key_dim": 4.0}, r"key_dim=4\.0"),
        ({"num_heads": 2, "key_dim": "4"}, r"key_dim='4'"),
        ({"num_heads": 2, "key_dim": 4, "value_dim": 0}, r"value_dim=0"),
        ({"num_heads": 2, "key_dim": 4, "output_dim": -1}, r"output_dim=-1"),
        ({"num_heads": 2, "key_dim": 4, "dropout": 1.0}, r"dropout=1\.0"),
        ({"num_heads": 2, "key_dim": 4, "dropout": -0.1}, r"dropout=-0\.1"),
        ({"num_heads": 2, "key_dim": 4, "scoring": "cosine"}, r"scoring='cosine'"),
    ],
)
def test_bad_constructor_arguments_raise(kwargs, message):
    with pytest.raises(ValueError, match=message):
        MultiHeadAttention(**kwargs)


def test_query_of_rank_2_raises():
    layer = MultiHeadAttention(2, 4)
    with pytest.raises(ValueError, match=r"`query` must have rank 3.*query\.shape=\(2, 8\)"):
        layer(np.zeros((2, 8), "float32"), np.zeros((2, 5, 8), "float32"))
    layer(np.zeros((2, 3, 8), "float32"), np.zeros((2, 5, 8), "float32"))
    with pytest.raises(ValueError, match=r"`query` must have rank 3.*query\.shape=\(2, 8\)"):
        layer(np.zeros((2, 8), "float32"), np.zeros((2, 5, 8), "float32"))


def test_feature_size_different_from_built_raises():
    layer = MultiHeadAttention(2, 4)
    layer(np.zeros((2, 3, 8), "float32"), np.zeros((2, 5, 6), "float32"))
    with pytest.raises(ValueError, match=r"`query` has 5 features.*built for 8.*\(2, 3, 5\)"):
        layer(np.zeros((2, 3, 5), "float32"), np.zeros((2, 5, 6), "float32"))
    with pytest.raises(ValueError, match=r"`value` has 8 features.*built for 6.*\(2, 5, 8\)"):
        layer(np.zeros((2, 3, 8), "float32"), np.zeros((2, 5, 8), "float32"))


def test_key_value_length_mismatch_raises():
    query = np.zeros((2, 3, 8), "float32")
    key, value = np.zeros((2, 6, 8), "float32"), np.zeros((2, 5, 8), "float32")
    message = r"key\.shape=\(2, 6, 8\), value\.shape=\(2, 5, 8\)"
    with pytest.raises(ValueError, match=message):
        MultiHeadAttention(2, 4)(query, value, key=key)  # caught in build
    layer = MultiHeadAttention(2, 4)
    layer(query, value)
    with pytest.raises(ValueError, match=message):
        layer(query, value, key=key)  # caught in call


def test_attention_mask_that_cannot_broadcast_raises():
    layer = MultiHeadAttention(2, 4)
    query, value = np.zeros((2, 3, 8), "float32"), np.zeros((2, 5, 8), "float32")
    with pytest.raises(ValueError, match=r"attention_mask\.shape=\(2, 3, 4\)"):
        layer(query, value, attention_mask=np.ones((2, 3, 4), bool))
    with pytest.raises(ValueError, match=r"attention_mask\.shape=\(3, 3, 5\)"):
        layer(query, value, attention_mask=np.ones((3, 3, 5), bool))
    with pytest.raises(ValueError, match=r"attention_mask\.shape=\(1, 2, 3, 5\)"):
        layer(query, value, attention_mask=np.ones((1, 2, 3, 5), bool))


def test_batch_mismatch_raises():
    layer = MultiHeadAttention(2, 4)
    with pytest.raises(ValueError, match=r"batch size.*query\.shape=\(2, 3, 8\).*\(3, 5, 8\)"):
        layer(np.zeros((2, 3, 8), "float32"), np.zeros((3, 5, 8), "float32"))
