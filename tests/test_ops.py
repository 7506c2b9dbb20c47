"""`keras_attention.ops` against NumPy references written from docs/math.md.

Shape legend: B batch, T queries, S keys/values, D feature size, U additive hidden size.
"""

import math

import numpy as np
import pytest
from keras import ops

from keras_attention import ops as attention_ops

from backends import to_numpy

ATOL = 1e-5


# === NumPy references ===


def np_softmax(x, axis=-1):
    x = x - x.max(axis=axis, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


def np_masked_softmax(scores, mask):
    """Softmax over the unmasked keys only; a fully masked row is all zeros."""
    mask = np.broadcast_to(mask, scores.shape)
    out = np.zeros_like(scores)
    for index in np.ndindex(*scores.shape[:-1]):
        keep = mask[index]
        if keep.any():
            out[index][keep] = np_softmax(scores[index][keep])
    return out


def np_attention(query, key, value, mask=None, scale=None):
    """Returns (output, weights, scores) of `softmax(Q Kᵀ · scale) V`."""
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    scores = np.einsum("...td,...sd->...ts", query, key) * scale
    if mask is None:
        weights = np_softmax(scores)
    else:
        weights = np_masked_softmax(scores, mask)
    return weights @ value, weights, scores


def np_sinusoidal(length, depth, base=10000.0):
    """P[i, 2j] = sin(i / base^(2j/d)), P[i, 2j+1] = cos(i / base^(2j/d)), element by element."""
    table = np.zeros((length, depth))
    for i in range(length):
        for column in range(depth):
            j = column // 2
            angle = i / base ** (2 * j / depth)
            table[i, column] = math.sin(angle) if column % 2 == 0 else math.cos(angle)
    return table


@pytest.fixture
def qkv(rng):
    query = rng.standard_normal((2, 3, 4)).astype("float32")  # (B, T, D)
    key = rng.standard_normal((2, 5, 4)).astype("float32")  # (B, S, D)
    value = rng.standard_normal((2, 5, 6)).astype("float32")  # (B, S, Dv)
    return query, key, value


# === Scaled dot-product attention ===


def test_scaled_dot_product_matches_numpy(qkv):
    query, key, value = qkv
    output, weights = attention_ops.scaled_dot_product_attention(
        query, key, value, return_weights=True
    )
    expected_output, expected_weights, expected_scores = np_attention(query, key, value)
    np.testing.assert_allclose(to_numpy(weights), expected_weights, atol=ATOL)
    np.testing.assert_allclose(to_numpy(output), expected_output, atol=ATOL)
    assert to_numpy(output).shape == (2, 3, 6)
    # The weights are the softmax of QKᵀ/√d: their log-ratios are the score differences.
    log_weights = np.log(to_numpy(weights))
    np.testing.assert_allclose(
        log_weights - log_weights[..., :1],
        expected_scores - expected_scores[..., :1],
        atol=1e-4,
    )


def test_scaled_dot_product_default_scale_is_inverse_sqrt_depth(rng):
    # With depth 16 the default scale is 1/4: it must differ from scale=1 and equal scale=0.25.
    query = rng.standard_normal((1, 2, 16)).astype("float32")
    key = rng.standard_normal((1, 3, 16)).astype("float32")
    value = rng.standard_normal((1, 3, 2)).astype("float32")
    default = to_numpy(attention_ops.scaled_dot_product_attention(query, key, value))
    quarter = to_numpy(attention_ops.scaled_dot_product_attention(query, key, value, scale=0.25))
    plain = to_numpy(attention_ops.scaled_dot_product_attention(query, key, value, scale=1.0))
    np.testing.assert_allclose(default, quarter, atol=ATOL)
    assert not np.allclose(default, plain, atol=1e-3)


@pytest.mark.parametrize("scale", [0.3, 1.0, 2.5])
def test_scaled_dot_product_custom_scale(qkv, scale):
    """scale=1.0 is the plain dot product `a(q, k) = qᵀk`."""
    query, key, value = qkv
    output, weights = attention_ops.scaled_dot_product_attention(
        query, key, value, scale=scale, return_weights=True
    )
    expected_output, expected_weights, _ = np_attention(query, key, value, scale=scale)
    np.testing.assert_allclose(to_numpy(weights), expected_weights, atol=ATOL)
    np.testing.assert_allclose(to_numpy(output), expected_output, atol=ATOL)


def test_scaled_dot_product_with_mask(qkv):
    query, key, value = qkv
    mask = np.ones((2, 3, 5), dtype=bool)
    mask[0, :, 3:] = False  # padding keys of the first example
    mask[1, 1, :] = False  # one query that sees nothing
    output, weights = attention_ops.scaled_dot_product_attention(
        query, key, value, mask=mask, return_weights=True
    )
    expected_output, expected_weights, _ = np_attention(query, key, value, mask=mask)
    np.testing.assert_allclose(to_numpy(weights), expected_weights, atol=ATOL)
    np.testing.assert_allclose(to_numpy(output), expected_output, atol=ATOL)
    assert np.all(to_numpy(weights)[0, :, 3:] == 0.0)
    np.testing.assert_array_equal(to_numpy(output)[1, 1], np.zeros(6))


def test_scaled_dot_product_dropout_only_in_training(qkv):
    query, key, value = qkv
    expected_output, _, _ = np_attention(query, key, value)
    inference = attention_ops.scaled_dot_product_attention(
        query, key, value, dropout_rate=0.5, training=False
    )
    np.testing.assert_allclose(to_numpy(inference), expected_output, atol=ATOL)
    training, weights = attention_ops.scaled_dot_product_attention(
        query, key, value, dropout_rate=0.5, training=True, seed=3, return_weights=True
    )
    assert not np.allclose(to_numpy(training), expected_output, atol=1e-3)
    # The returned weights are the ones before dropout.
    np.testing.assert_allclose(to_numpy(weights).sum(-1), 1.0, atol=ATOL)


# === Additive scoring ===


def test_additive_scores_match_numpy(rng):
    query = rng.standard_normal((2, 3, 4)).astype("float32")  # (B, T, Dq)
    key = rng.standard_normal((2, 5, 6)).astype("float32")  # (B, S, Dk): a different size
    query_kernel = rng.standard_normal((4, 7)).astype("float32")  # W_q (Dq, U)
    key_kernel = rng.standard_normal((6, 7)).astype("float32")  # W_k (Dk, U)
    score_kernel = rng.standard_normal((7,)).astype("float32")  # w_v (U,)
    scores = to_numpy(
        attention_ops.additive_scores(query, key, score_kernel, query_kernel, key_kernel)
    )
    expected = np.zeros((2, 3, 5))
    for b in range(2):
        for t in range(3):
            for s in range(5):
                hidden = query[b, t] @ query_kernel + key[b, s] @ key_kernel
                expected[b, t, s] = score_kernel @ np.tanh(hidden)
    assert scores.shape == (2, 3, 5)
    np.testing.assert_allclose(scores, expected, atol=1e-4)


def test_additive_scores_preprojected_per_head(rng):
    """Already projected query/key `(B, N, T, U)` with one w_v per head `(N, 1, 1, U)`."""
    query = rng.standard_normal((2, 3, 4, 5)).astype("float32")  # (B, N, T, U)
    key = rng.standard_normal((2, 3, 6, 5)).astype("float32")  # (B, N, S, U)
    score_kernel = rng.standard_normal((3, 5)).astype("float32")  # (N, U)
    scores = to_numpy(attention_ops.additive_scores(query, key, score_kernel.reshape(3, 1, 1, 5)))
    expected = np.einsum(
        "nu,bntsu->bnts", score_kernel, np.tanh(query[:, :, :, None] + key[:, :, None])
    )
    np.testing.assert_allclose(scores, expected, atol=1e-4)


# === Masked softmax ===


def test_masked_softmax_zeroes_masked_and_normalises(rng):
    scores = rng.standard_normal((2, 4, 6)).astype("float32") * 3
    mask = rng.random((2, 4, 6)) > 0.4
    mask[:, :, 0] = True  # at least one key per row
    weights = to_numpy(attention_ops.masked_softmax(scores, mask))
    assert np.all(weights[~mask] == 0.0)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=ATOL)
    np.testing.assert_allclose(weights, np_masked_softmax(scores, mask), atol=ATOL)


def test_masked_softmax_broadcasting_mask(rng):
    scores = rng.standard_normal((2, 3, 4, 5)).astype("float32")
    mask = np.array([[True, True, False, True, False], [True, False, False, False, False]])
    mask = mask[:, None, None, :]  # (B, 1, 1, S)
    weights = to_numpy(attention_ops.masked_softmax(scores, mask))
    np.testing.assert_allclose(weights, np_masked_softmax(scores, mask), atol=ATOL)


def test_masked_softmax_without_mask_is_softmax(rng):
    scores = rng.standard_normal((3, 5)).astype("float32")
    np.testing.assert_allclose(
        to_numpy(attention_ops.masked_softmax(scores)), np_softmax(scores), atol=ATOL
    )


def test_masked_softmax_fully_masked_row_is_zero_and_finite(rng):
    scores = rng.standard_normal((2, 3, 4)).astype("float32")
    mask = np.ones((2, 3, 4), dtype=bool)
    mask[0, 1] = False
    mask[1] = False
    weights = to_numpy(attention_ops.masked_softmax(scores, mask))
    assert np.all(np.isfinite(weights))
    np.testing.assert_array_equal(weights[0, 1], np.zeros(4))
    np.testing.assert_array_equal(weights[1], np.zeros((3, 4)))
    np.testing.assert_allclose(weights[0, [0, 2]].sum(-1), 1.0, atol=ATOL)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_masked_softmax_half_precision_is_finite(rng, dtype):
    scores = ops.cast(rng.standard_normal((2, 3, 8)) * 50.0, dtype)
    mask = np.ones((2, 3, 8), dtype=bool)
    mask[0, 0, 4:] = False
    mask[1, 2] = False  # fully masked row
    weights = to_numpy(ops.cast(attention_ops.masked_softmax(scores, mask), "float32"))
    assert np.all(np.isfinite(weights))
    assert np.all(weights[~mask] == 0.0)
    np.testing.assert_array_equal(weights[1, 2], np.zeros(8))
    sums = weights.sum(-1)
    np.testing.assert_allclose(np.delete(sums.reshape(-1), 5), 1.0, atol=2e-2)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_large_negative_number_is_finite_in_dtype(dtype):
    value = attention_ops.large_negative_number(dtype)
    assert value <= -6e4
    round_trip = ops.cast(ops.cast(value, dtype), "float32")
    assert np.isfinite(to_numpy(round_trip))


# === Masks ===


@pytest.mark.parametrize("n, m", [(4, 4), (3, 5), (5, 3), (1, 4)])
def test_causal_mask_is_top_left_aligned(n, m):
    mask = to_numpy(attention_ops.causal_mask(n, m))
    expected = np.array([[i >= j for j in range(m)] for i in range(n)])
    assert mask.dtype == bool
    np.testing.assert_array_equal(mask, expected)


def test_causal_mask_literal_values():
    np.testing.assert_array_equal(
        to_numpy(attention_ops.causal_mask(2, 3)), [[True, False, False], [True, True, False]]
    )
    np.testing.assert_array_equal(
        to_numpy(attention_ops.causal_mask(3)),
        [[True, False, False], [True, True, False], [True, True, True]],
    )


def test_padding_mask():
    ids = np.array([[5, 3, 0, 0], [0, 1, 2, 0]])
    np.testing.assert_array_equal(
        to_numpy(attention_ops.padding_mask(ids)),
        [[True, True, False, False], [False, True, True, False]],
    )
    np.testing.assert_array_equal(
        to_numpy(attention_ops.padding_mask(ids, pad_id=3)),
        [[True, False, True, True], [True, True, True, True]],
    )


def test_merge_masks():
    assert attention_ops.merge_masks(None, None) is None
    padding = np.array([[True, True, False]])[:, None, :]  # (B, 1, S)
    causal = attention_ops.causal_mask(3)  # (T, S)
    merged = to_numpy(attention_ops.merge_masks(None, padding, causal))
    expected = np.tril(np.ones((3, 3), dtype=bool)) & padding
    np.testing.assert_array_equal(merged, expected)


# === Sinusoidal positional encoding ===


@pytest.mark.parametrize("length, depth", [(50, 16), (20, 7), (9, 1), (30, 64)])
def test_sinusoidal_encoding_matches_formula(length, depth):
    encoding = attention_ops.sinusoidal_encoding(length, depth)
    assert encoding.shape == (length, depth)
    assert encoding.dtype == np.float32
    np.testing.assert_allclose(encoding, np_sinusoidal(length, depth), atol=1e-6)


def test_sinusoidal_encoding_base_is_10000_not_1000():
    encoding = attention_ops.sinusoidal_encoding(10, 8)
    assert not np.allclose(encoding, np_sinusoidal(10, 8, base=1000.0), atol=1e-3)
    np.testing.assert_allclose(
        attention_ops.sinusoidal_encoding(10, 8, max_wavelength=1000),
        np_sinusoidal(10, 8, base=1000.0),
        atol=1e-6,
    )


@pytest.mark.parametrize("offset", [1, 3, 10, 37])
@pytest.mark.parametrize("depth", [16, 64])
def test_sinusoidal_encoding_offset_is_a_fixed_rotation(offset, depth):
    """(p_{i+δ,2j}, p_{i+δ,2j+1}) = R(δω_j) (p_{i,2j}, p_{i,2j+1}) for every i."""
    length = 60
    encoding = attention_ops.sinusoidal_encoding(length + offset, depth).astype(np.float64)
    for j in (0, 1, depth // 4, depth // 2 - 1):
        omega = 1.0 / 10000 ** (2 * j / depth)
        angle = offset * omega
        rotation = np.array(
            [[math.cos(angle), math.sin(angle)], [-math.sin(angle), math.cos(angle)]]
        )
        pairs = encoding[:length, 2 * j : 2 * j + 2]  # (L, 2) at positions i
        shifted = encoding[offset : offset + length, 2 * j : 2 * j + 2]  # at positions i + δ
        np.testing.assert_allclose(shifted, pairs @ rotation.T, atol=2e-5)
        # The same matrix fits every i: least squares over all i recovers it.
        fitted, *_ = np.linalg.lstsq(pairs, shifted, rcond=None)
        np.testing.assert_allclose(fitted.T, rotation, atol=1e-4)


@pytest.mark.parametrize("depth", [8, 64, 512])
def test_sinusoidal_wavelengths_are_geometric_from_2pi_to_10000_2pi(depth):
    encoding = attention_ops.sinusoidal_encoding(2, depth).astype(np.float64)
    # At position 1 each pair is (sin ω_j, cos ω_j): recover ω_j and the wavelength 2π/ω_j.
    omegas = np.arctan2(encoding[1, 0::2], encoding[1, 1::2])
    wavelengths = 2 * math.pi / omegas
    np.testing.assert_allclose(wavelengths[0], 2 * math.pi, rtol=1e-6)
    ratios = wavelengths[1:] / wavelengths[:-1]
    np.testing.assert_allclose(ratios, 10000 ** (2 / depth), rtol=1e-4)
    assert np.all(wavelengths <= 10000 * 2 * math.pi)
    # One more step of the progression (2j = d) reaches exactly 10000·2π.
    np.testing.assert_allclose(wavelengths[-1] * ratios[0], 10000 * 2 * math.pi, rtol=1e-3)


def test_sinusoidal_encoding_rejects_bad_sizes():
    with pytest.raises(ValueError, match=r"depth=0"):
        attention_ops.sinusoidal_encoding(4, 0)
    with pytest.raises(ValueError, match=r"length=-1"):
        attention_ops.sinusoidal_encoding(-1, 4)


# === Bad input ===


def test_mismatched_feature_sizes_raise(rng):
    query = np.zeros((2, 3, 4), "float32")
    key = np.zeros((2, 5, 6), "float32")
    value = np.zeros((2, 5, 6), "float32")
    with pytest.raises(ValueError, match=r"query\.shape=\(2, 3, 4\), key\.shape=\(2, 5, 6\)"):
        attention_ops.scaled_dot_product_attention(query, key, value)


def test_key_value_length_mismatch_raises():
    query = np.zeros((2, 3, 4), "float32")
    key = np.zeros((2, 5, 4), "float32")
    value = np.zeros((2, 6, 4), "float32")
    with pytest.raises(ValueError, match=r"key\.shape=\(2, 5, 4\), value\.shape=\(2, 6, 4\)"):
        attention_ops.scaled_dot_product_attention(query, key, value)


def test_mask_that_cannot_broadcast_raises(qkv):
    query, key, value = qkv
    with pytest.raises(ValueError, match=r"mask\.shape=\(2, 3, 4\).*scores shape=\(2, 3, 5\)"):
        attention_ops.scaled_dot_product_attention(query, key, value, mask=np.ones((2, 3, 4), bool))
    with pytest.raises(ValueError, match=r"rank 4.*mask\.shape=\(1, 2, 3, 5\)"):
        attention_ops.masked_softmax(np.zeros((2, 3, 5), "float32"), np.ones((1, 2, 3, 5), bool))


def test_additive_mismatched_projection_sizes_raise():
    with pytest.raises(ValueError, match=r"\(2, 3, 4\) and \(2, 5, 6\)"):
        attention_ops.additive_scores(
            np.zeros((2, 3, 4), "float32"),
            np.zeros((2, 5, 6), "float32"),
            np.zeros((4,), "float32"),
        )
