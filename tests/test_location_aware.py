"""Location-aware and multi-resolution attention against numpy re-implementations of
Chorowski et al. (2015), eqs. 8-9, using the layers' own weights.

The shared layer check of both layers runs in tests/test_layers.py.
"""

import keras
import numpy as np
import pytest

import keras_attention as ka

from backends import to_numpy

B, T, S, DQ, DV = 2, 3, 7, 5, 6


def _x(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype("float32")


def _alignment(*shape, seed=0):
    weights = np.random.default_rng(seed).random(shape).astype("float32")
    return weights / weights.sum(-1, keepdims=True)


MASK = np.array([[1] * S, [1] * 4 + [0] * (S - 4)], bool)  # (B, S)


def np_same_correlation(signal, kernel):
    """'same' cross-correlation of `(S,)` with `(k, F)` -> `(S, F)`, TensorFlow's padding
    (for even k the extra zero goes on the right)."""
    k = kernel.shape[0]
    left = (k - 1) // 2
    padded = np.concatenate([np.zeros(left), signal, np.zeros(k - 1 - left)])
    return np.stack([padded[s: s + k] @ kernel for s in range(len(signal))])


def np_location_aware(layer, query, value, previous, mask):
    """`e = wᵀ tanh(W s + V h + U (F * α) + b)`, masked softmax, `c = Σ α h`, one step."""
    w = {name: to_numpy(getattr(layer, name)).astype("float64") for name in (
        "query_kernel", "key_kernel", "location_filters", "location_kernel", "bias",
        "score_kernel")}
    contexts, alignments = [], []
    for b in range(len(query)):
        location = np_same_correlation(previous[b], w["location_filters"][:, 0, :])  # (S, F)
        hidden = np.tanh(query[b] @ w["query_kernel"] + value[b] @ w["key_kernel"]
                         + location @ w["location_kernel"] + w["bias"])  # (S, U)
        scores = hidden @ w["score_kernel"]  # (S,)
        scores = np.where(mask[b], scores, -np.inf)
        alignment = np.exp(scores - scores.max())
        alignment /= alignment.sum()
        alignments.append(alignment)
        contexts.append(alignment @ value[b])
    return np.array(contexts), np.array(alignments)


def _randomize(layer, seed):
    rng = np.random.default_rng(seed)
    for weight in layer.weights:
        weight.assign(rng.normal(0, 0.7, tuple(weight.shape)).astype("float32"))


@pytest.mark.parametrize("kernel_size", [1, 4, 5])
def test_one_step_matches_numpy(kernel_size):
    layer = ka.LocationAwareAttention(8, filters=3, kernel_size=kernel_size)
    query, value, previous = _x(B, DQ), _x(B, S, DV, seed=1), _alignment(B, S, seed=2)
    layer(query, value, previous)
    _randomize(layer, 3)
    context, alignment = map(to_numpy, layer(query, value, previous, value_mask=MASK,
                                             return_attention_scores=True))
    expected_context, expected_alignment = np_location_aware(
        layer, query.astype("float64"), value.astype("float64"), previous, MASK)
    np.testing.assert_allclose(alignment, expected_alignment, atol=1e-5)
    np.testing.assert_allclose(context, expected_context, atol=1e-5)
    assert np.all(alignment[1, 4:] == 0)  # padding gets exactly zero weight


def test_the_previous_alignment_changes_the_scores():
    """Moving `α_{t-1}` moves `α_t` (the location term is live), and a decoder run of
    single steps equals T queries scored at once against the same previous alignments."""
    layer = ka.LocationAwareAttention(8, filters=2, kernel_size=3)
    value = _x(B, S, DV, seed=1)
    queries = _x(B, T, DQ, seed=4)
    previous = np.stack([np.eye(S, dtype="float32")[[0, 3, 5]]] * B)  # (B, T, S) one-hot
    at_once = to_numpy(layer(queries, value, previous, return_attention_scores=True)[1])
    for t in range(T):
        _, alone = layer(queries[:, t], value, previous[:, t], return_attention_scores=True)
        np.testing.assert_allclose(at_once[:, t], to_numpy(alone), atol=1e-6)
    _, shifted = layer(queries[:, 0], value, previous[:, 1], return_attention_scores=True)
    assert np.abs(to_numpy(shifted) - at_once[:, 0]).max() > 1e-3


def test_initial_alignment_is_uniform_over_real_positions():
    layer = ka.LocationAwareAttention(4)
    alignment = to_numpy(layer.initial_alignment(_x(B, S, DV), MASK))
    np.testing.assert_allclose(alignment[0], np.full(S, 1 / S), rtol=1e-6)
    np.testing.assert_allclose(alignment[1], [0.25] * 4 + [0] * (S - 4), rtol=1e-6)


def test_multi_resolution_heads_match_numpy():
    kernel_sizes = (1, 3, 6)
    layer = ka.MultiResolutionAttention(8, filters=2, kernel_sizes=kernel_sizes, output_dim=4)
    query, value = _x(B, DQ), _x(B, S, DV, seed=1)
    previous = _alignment(B, len(kernel_sizes), S, seed=2)
    layer(query, value, previous)
    _randomize(layer, 5)
    output, alignments = map(to_numpy, layer(query, value, previous, value_mask=MASK,
                                             return_attention_scores=True))
    contexts = []
    for n, head in enumerate(layer.heads):
        assert head.location_filters.shape == (kernel_sizes[n], 1, 2)
        context, alignment = np_location_aware(
            head, query.astype("float64"), value.astype("float64"), previous[:, n], MASK)
        np.testing.assert_allclose(alignments[:, n], alignment, atol=1e-5)
        contexts.append(context)
    expected = (np.concatenate(contexts, -1) @ to_numpy(layer.output_kernel)
                + to_numpy(layer.output_bias))
    np.testing.assert_allclose(output, expected, atol=1e-5)
    assert output.shape == (B, 4)
    assert layer.initial_alignment(value, MASK).shape == (B, len(kernel_sizes), S)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: ka.LocationAwareAttention(0), "units"),
        (lambda: ka.LocationAwareAttention(4, kernel_size=0), "kernel_size"),
        (lambda: ka.LocationAwareAttention(4, filters=2.5), "filters"),
        (lambda: ka.MultiResolutionAttention(4, kernel_sizes=()), "kernel_sizes"),
        (lambda: ka.MultiResolutionAttention(4, kernel_sizes=7), "kernel_sizes"),
        (lambda: ka.MultiResolutionAttention(4, kernel_sizes=(3, -1)), "kernel_sizes"),
    ],
)
def test_bad_arguments_raise(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_previous_alignment_of_the_wrong_rank_is_refused():
    layer = ka.LocationAwareAttention(4)
    with pytest.raises(ValueError, match="previous_alignment"):
        layer(_x(B, DQ), _x(B, S, DV), _alignment(B, T, S))
    heads = ka.MultiResolutionAttention(4, kernel_sizes=(3, 5))
    with pytest.raises(ValueError, match="previous_alignment"):
        heads(_x(B, DQ), _x(B, S, DV), _alignment(B, 3, S))


def test_the_keras_mask_of_the_value_is_used():
    layer = ka.LocationAwareAttention(4, kernel_size=3)
    ids = np.array([[3, 4, 5, 0, 0]], "int32")
    value = keras.layers.Embedding(8, DV, mask_zero=True)(ids)
    _, alignment = layer(_x(1, DQ), value, _alignment(1, 5), return_attention_scores=True)
    assert np.all(to_numpy(alignment)[0, 3:] == 0)
