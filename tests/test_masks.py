"""Tests for keras_attention/masks.py: the merged mask of one call against NumPy."""

import numpy as np
import pytest

from keras_attention import masks

from backends import to_numpy


def reference_mask(batch, t, s, query_mask, value_mask, key_mask, attention_mask, causal):
    mask = np.ones((batch, t, s), bool)
    if query_mask is not None:
        mask &= query_mask[:, :, None]
    for padding in (value_mask, key_mask):
        if padding is not None:
            mask &= padding[:, None, :]
    if attention_mask is not None:
        mask &= attention_mask
    if causal:
        mask &= np.tril(np.ones((t, s), bool))
    return mask[:, None]  # (B, 1, T, S)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("explicit_rank", [None, 2, 3])
def test_call_mask_matches_numpy(rng, causal, explicit_rank):
    batch, t, s = 2, 4, 5
    query, value = np.zeros((batch, t, 3), "float32"), np.zeros((batch, s, 3), "float32")
    query_mask = rng.random((batch, t)) > 0.2
    value_mask = rng.random((batch, s)) > 0.3
    key_mask = rng.random((batch, s)) > 0.3
    attention_mask = None
    if explicit_rank is not None:
        attention_mask = rng.random((batch, t, s)[-explicit_rank:]) > 0.4
    merged = masks.call_mask(query, value, query_mask, value_mask, key_mask, attention_mask,
                             causal)
    expected = reference_mask(batch, t, s, query_mask, value_mask, key_mask, attention_mask,
                              causal)
    np.testing.assert_array_equal(np.broadcast_to(to_numpy(merged), expected.shape), expected)


def test_no_mask_is_none():
    query = np.zeros((2, 3, 4), "float32")
    assert masks.call_mask(query, query) is None


@pytest.mark.parametrize("shape, message", [((5,), "shape \\(B, T, S\\)"),
                                            ((2, 3, 4), "cannot broadcast")])
def test_bad_attention_masks_are_refused(shape, message):
    with pytest.raises(ValueError, match=message):
        masks.check_attention_mask(np.ones(shape, bool), (2, 3, 8), (2, 5, 8))
