"""`LinearAttention` against a numpy loop over queries, and its three forms against each other.

Shape legend: B batch, T queries, S keys/values, D feature size, N heads, H head size.
"""

import keras
import numpy as np
import pytest

import keras_attention as ka

import backends
from backends import to_numpy

B, T, S, N, H = 2, 6, 8, 2, 3


def _x(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype("float32")


def _phi(x):
    return np.where(x > 0, x + 1.0, np.exp(x))  # elu(x) + 1


def _numpy_linear_attention(layer, query, key, value, mask):
    """`Σ_s φ(q_t)·φ(k_s) v_s / Σ_s φ(q_t)·φ(k_s)` over visible keys, query by query.

    mask: bool `(B, T, S)`. Rows with no visible key give zero heads.
    """
    w = {v.name: to_numpy(v).astype("float64") for v in layer.weights}
    q = np.einsum("btd,dnh->bnth", query, w["query_kernel"]) + w["query_bias"][:, None]
    k = np.einsum("bsd,dnh->bnsh", key, w["key_kernel"]) + w["key_bias"][:, None]
    v = np.einsum("bsd,dnh->bnsh", value, w["value_kernel"]) + w["value_bias"][:, None]
    q, k = _phi(q), _phi(k)
    heads = np.zeros(q.shape[:3] + (v.shape[-1],))
    for b in range(q.shape[0]):
        for n in range(q.shape[1]):
            for t in range(q.shape[2]):
                similarity = (k[b, n] @ q[b, n, t]) * mask[b, t]  # (S,)
                if similarity.sum() > 0:
                    heads[b, n, t] = similarity @ v[b, n] / similarity.sum()
    return np.einsum("bntv,nvo->bto", heads, w["output_kernel"]) + w["output_bias"]


def _layer(query, value, **kwargs):
    layer = ka.LinearAttention(num_heads=N, key_dim=H, **kwargs)
    layer(query, value)
    for weight in layer.weights:  # biases too, so that each one matters
        weight.assign(0.5 * _x(*weight.shape, seed=11 + len(weight.name)))
    return layer


def _padding():
    mask = np.ones((B, S), bool)
    mask[1, 5:] = False
    return mask


def test_non_causal_matches_numpy():
    query, value = _x(B, T, 5), _x(B, S, 4, seed=1)
    layer = _layer(query, value, value_dim=2, output_dim=3)
    mask = np.broadcast_to(_padding()[:, None, :], (B, T, S))
    expected = _numpy_linear_attention(layer, query, value, value, mask)
    actual = to_numpy(layer(query, value, value_mask=_padding()))
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


def test_causal_matches_numpy():
    x = _x(B, S, 5)
    layer = _layer(x, x)
    mask = np.broadcast_to(np.tril(np.ones((S, S), bool)) & _padding()[:, None, :], (B, S, S))
    expected = _numpy_linear_attention(layer, x, x, x, mask)
    actual = to_numpy(layer(x, x, use_causal_mask=True, value_mask=_padding()))
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


def test_explicit_attention_mask_matches_numpy():
    query, value, key = _x(B, T, 5), _x(B, S, 4, seed=1), _x(B, S, 3, seed=2)
    layer = ka.LinearAttention(num_heads=N, key_dim=H)
    layer(query, value, key)
    attention_mask = np.random.default_rng(3).random((B, T, S)) > 0.5
    attention_mask[0, 1] = False  # a query that sees nothing gets the output bias
    for causal in (False, True):
        mask = attention_mask & (np.tril(np.ones((T, S), bool)) if causal else True)
        expected = _numpy_linear_attention(layer, query, key, value, mask)
        actual = layer(query, value, key, attention_mask=attention_mask, use_causal_mask=causal)
        np.testing.assert_allclose(to_numpy(actual), expected, rtol=1e-5, atol=1e-5)


def test_explicit_causal_mask_equals_the_cumulative_sums():
    x = _x(B, S, 5)
    layer = _layer(x, x)
    causal = to_numpy(layer(x, x, use_causal_mask=True))
    explicit = to_numpy(layer(x, x, attention_mask=np.tril(np.ones((S, S), bool))))
    np.testing.assert_allclose(causal, explicit, rtol=1e-5, atol=1e-5)


def test_masked_keys_contribute_nothing():
    query, value = _x(B, T, 5), _x(B, S, 4, seed=1)
    layer = _layer(query, value)
    changed = value.copy()
    changed[~_padding()] = 100.0 * _x(int((~_padding()).sum()), 4, seed=9)
    np.testing.assert_allclose(
        to_numpy(layer(query, changed, value_mask=_padding())),
        to_numpy(layer(query, value, value_mask=_padding())),
        rtol=1e-6, atol=1e-6,
    )
    short = to_numpy(layer(query[1:], value[1:, :5]))  # batch 1 without its padding
    np.testing.assert_allclose(to_numpy(layer(query, value, value_mask=_padding()))[1:], short,
                               rtol=1e-5, atol=1e-5)


def test_keras_mask_from_embedding_is_the_padding_mask():
    ids = np.array([[3, 1, 4, 1, 5, 0], [2, 7, 0, 0, 0, 0]], dtype="int32")
    embedding = keras.layers.Embedding(10, 5, mask_zero=True)
    layer = ka.LinearAttention(num_heads=N, key_dim=H)
    x = embedding(ids)
    implicit = layer(x, x, use_causal_mask=True)
    explicit = layer(x, x, use_causal_mask=True, query_mask=ids != 0, value_mask=ids != 0)
    np.testing.assert_allclose(to_numpy(implicit), to_numpy(explicit), rtol=1e-6, atol=1e-6)


def test_recurrent_steps_equal_the_causal_form():
    x = _x(B, S, 5)
    layer = _layer(x, x)
    pad = _padding()
    causal = to_numpy(layer(x, x, use_causal_mask=True, value_mask=pad))
    state = layer.initial_state(B)
    step = backends.compiled(layer.step) or layer.step  # XLA; eager under PyTorch
    for t in range(S):
        output, state = step(x[:, t], x[:, t], x[:, t], state, key_mask=pad[:, t])
        np.testing.assert_allclose(to_numpy(output), causal[:, t], rtol=1e-5, atol=1e-5,
                                   err_msg=f"step {t}")
    assert state[0].shape == (B, N, H, H) and state[1].shape == (B, N, H)


@pytest.mark.parametrize("causal", [False, True])
def test_jit_compile_and_gradients_are_finite(causal):
    x = _x(B, S, 5)
    layer = _layer(x, x)
    pad = _padding()
    pad[0] = False  # every key masked: zero heads, finite gradients

    def loss(x):
        return keras.ops.sum(layer(x, x, use_causal_mask=causal, value_mask=pad) ** 2)

    # XLA compiles the forward and backward passes together; under PyTorch (no XLA here)
    # they run eagerly.
    result = backends.compiled_gradients(loss, [x], layer.trainable_weights)
    value, gradients = result or backends.gradients(loss, [x], layer.trainable_weights)
    assert np.isfinite(value)
    assert len(gradients) == len(layer.trainable_weights) + 1
    assert all(g is not None and np.all(np.isfinite(g)) for g in gradients)
    eager = to_numpy(layer(x, x, use_causal_mask=causal, value_mask=pad))
    np.testing.assert_allclose(eager[0], np.broadcast_to(to_numpy(layer.output_bias), (S, 5)),
                               atol=1e-6)


def test_mixed_precision_sums_in_float32():
    x = 30.0 * _x(B, 64, 5)  # large features: float16 sums would overflow
    layer = ka.LinearAttention(num_heads=N, key_dim=H, dtype="mixed_float16")
    output = layer(x, x, use_causal_mask=True)
    assert keras.backend.standardize_dtype(output.dtype) == "float16"
    assert np.all(np.isfinite(to_numpy(output).astype("float32")))


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda layer, q, v: layer(q, v[:, :3], use_causal_mask=True), "T <= S"),
        (lambda layer, q, v: layer(q[:, :, :4], v), "query"),
        (lambda layer, q, v: layer(q, v, attention_mask=np.ones((2, 2, 2, 2), bool)),
         "attention_mask"),
        (lambda layer, q, v: layer.step(q, v, v, layer.initial_state(B)), r"\(B, D\)"),
    ],
)
def test_bad_inputs_raise(call, match):
    query, value = _x(B, T, 5), _x(B, S, 5, seed=1)
    layer = ka.LinearAttention(num_heads=N, key_dim=H)
    layer(query, value)
    with pytest.raises(ValueError, match=match):
        call(layer, query, value)


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="num_heads=0"):
        ka.LinearAttention(num_heads=0, key_dim=4)
    with pytest.raises(ValueError, match="key_dim=2.5"):
        ka.LinearAttention(num_heads=2, key_dim=2.5)
