"""RNNsearch with location-aware attention (`attention="location"`): its parameter count,
its alignments (against a step-by-step decoder run), their picture, today's files
(no `attention` field) loading as additive, and its TF Serving export.

Cached decoding against the full model is in tests/test_decode.py (the "location" model).
"""

import numpy as np
import pytest
import tensorflow as tf

import keras_attention as ka
import zoo
from zoo import plot, seq2seq

from rnnsearch_checks import (  # pytest puts tests/ (no __init__.py) on sys.path
    check_export_serves_decoding,
    check_keras_round_trip,
    wide_rnnsearch,
)

V = 16
SIZES = dict(vocabulary_size=V, embedding_dim=8, encoder_units=8, decoder_units=8,
             attention_units=8, maxout_units=4, attention="location", location_filters=3,
             location_kernel_size=5)


@pytest.fixture(scope="module")
def model():
    return wide_rnnsearch(1, **SIZES)  # sharper, varied alignments


def _batch():
    source = np.array([[5, 6, 7, 8, 9, 3], [4, 11, 3, 0, 0, 0]], "int32")
    target = np.array([[2, 7, 8, 9], [2, 12, 13, 14]], "int32")
    return {"source": source, "target": target}


def test_parameter_count_matches_the_config(model):
    config = zoo.config("seq2seq-bahdanau-small", **SIZES)
    assert model.count_params() == config.num_params()
    additive = zoo.config("seq2seq-bahdanau-small", **dict(SIZES, attention="additive"))
    # F (k × 1 × F), U (F × a) and the bias b.
    assert config.num_params() - additive.num_params() == 5 * 3 + 3 * 8 + 8
    decoder = model.get_layer("decoder")
    assert isinstance(decoder.attention, ka.LocationAwareAttention)
    assert decoder.attention.location_filters.shape == (5, 1, 3)


def test_alignments_follow_the_previous_alignment_step_by_step(model):
    """`zoo.attention_weights` (the decoder's scan) equals a loop of `BahdanauDecoder.step`
    that feeds each alignment to the next step, and is a distribution over the real tokens."""
    batch = _batch()
    alignments = zoo.attention_weights(model, batch)["decoder/alignment"]  # (B, T, S)
    layers = {layer.name: layer for layer in model.layers}
    decoder = layers["decoder"]
    annotations, cell_states, mask = seq2seq.encode(layers, tf.constant(batch["source"]))
    states = decoder.get_initial_state(cell_states, annotations, mask)
    np.testing.assert_allclose(states[-1][1], [1 / 3] * 3 + [0] * 3, rtol=1e-6)  # uniform α_0
    key = decoder.attention.project_key(annotations)
    embedded = layers["target_embedding"](batch["target"])
    for t in range(batch["target"].shape[1]):
        states, _, _, alignment = decoder.step(embedded[:, t], states, annotations, key, mask)
        np.testing.assert_allclose(alignments[:, t], alignment, atol=1e-6)
        np.testing.assert_allclose(states[-1], alignment)  # the state carries α_t
    np.testing.assert_allclose(alignments.sum(-1), 1.0, atol=1e-5)
    assert np.all(alignments[1, :, 3:] == 0)
    # Location matters: the same queries with a uniform previous alignment score differently.
    _, uniform = decoder.attention(
        states[0], annotations, decoder.get_initial_state(cell_states, annotations, mask)[-1],
        value_mask=mask, return_attention_scores=True,
    )
    assert np.abs(np.asarray(uniform) - alignments[:, -1]).max() > 1e-3


def test_alignments_are_plotted(model, tmp_path):
    batch = _batch()
    weights = zoo.attention_weights(model, batch)["decoder/alignment"]
    path = tmp_path / "alignment.png"
    figure = plot.attention_heatmap(
        weights[0], source_tokens=list("abcdef"), target_tokens=list("wxyz"), path=path
    )
    image = figure.axes[0].get_images()[0]
    np.testing.assert_allclose(image.get_array(), weights[0])
    assert path.stat().st_size > 1000
    both = plot.attention_heatmap(
        np.stack([weights[0], weights[1]]), head="all", head_names=["first", "second"]
    )
    assert [ax.get_title() for ax in both.axes[:2]] == ["first", "second"]
    with pytest.raises(ValueError, match="head_names"):
        plot.attention_heatmap(np.stack([weights[0]] * 2), head="all", head_names=["one"])


def test_configs_and_files_without_the_field_are_additive(tmp_path):
    """Configs written before `attention` existed load as Bahdanau's additive attention."""
    config = dict(units=4, attention_units=3, cell="gru", name="decoder", trainable=True,
                  dtype="float32")
    decoder = seq2seq.BahdanauDecoder.from_config(config)
    assert decoder.attention_type == "additive"
    assert isinstance(decoder.attention, ka.BahdanauAttention)
    assert zoo.config("seq2seq-bahdanau-small").attention == "additive"
    with pytest.raises(ValueError, match="attention"):
        zoo.config("seq2seq-bahdanau-small", attention="dot")


def test_location_model_round_trips_through_keras_files(model, tmp_path):
    loaded = check_keras_round_trip(model, tmp_path / "location.keras", _batch()["source"],
                                    max_length=6)
    assert loaded.get_layer("decoder").attention_type == "location"


@pytest.mark.large
def test_export_serves_what_decoding_gives(model, tmp_path):
    """`zoo.export` of a location-aware RNNsearch: the SavedModel's beam search and greedy
    signatures equal in-process decoding."""
    check_export_serves_decoding(model, tmp_path / "served", V)
