"""Copying models (`copy=True`): RNNsearch and the Transformer with a pointer-generator,
RNNsearch's coverage, and their decoding, against references computed from the models'
own layers and weights.

The extended vocabulary itself is tested in tests/test_text_copying.py, the layer and
its loss in tests/test_pointer_generator.py.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_attention as ka
import zoo
from zoo import decode
from zoo.errors import ZooError
from zoo.seq2seq import coverage_loss

V = 40
SOURCE = np.array([[5, 6, 7, 6, 3, 0], [8, 9, 10, 3, 0, 0]], "int32")
# Row 0: 6 twice; 7 (V + 0) outside the target vocabulary. Row 1: 8 and 10 both
# outside it (V + 0, V + 1).
EXTENDED = np.array([[5, 6, V, 6, 3, 0], [V, 9, V + 1, 3, 0, 0]], "int32")
TARGET = np.array([[2, V, 6, 12], [2, V + 1, V, 0]], "int32")
LABELS = np.array([[V, 6, 12, 3], [V + 1, V, 3, 0]], "int32")
RNN = dict(vocabulary_size=V, embedding_dim=8, encoder_units=8, decoder_units=8,
           attention_units=8, maxout_units=4)
TRANSFORMER = dict(vocabulary_size=V, d_model=16, num_heads=2, intermediate_dim=16,
                   max_length=16, dropout=0.0, num_encoder_layers=1, num_decoder_layers=2)


def _inputs(target=TARGET):
    return {"source": SOURCE, "source_extended": EXTENDED, "target": target}


@pytest.fixture(params=["seq2seq", "transformer"], scope="module")
def model(request):
    """One copying model per family for the module's tests: none of them depends on what
    another did to it (the decoding tests set the same switch bias), and the decoding loops
    traced for it serve every test that decodes with the same settings."""
    keras.utils.set_random_seed(0)
    if request.param == "seq2seq":
        return zoo.get("seq2seq-bahdanau-small", copy=True, coverage=True, **RNN)
    return zoo.get("transformer-tiny", copy=True, **TRANSFORMER)


def test_output_is_a_distribution_over_the_extended_vocabulary(model):
    log_probs = model(_inputs()).numpy()
    assert log_probs.shape == (2, 4, V + SOURCE.shape[1])
    real = TARGET != 0  # (the Transformer's padded queries attend to nothing)
    np.testing.assert_allclose(np.exp(log_probs).sum(-1)[real], 1.0, rtol=1e-5)
    assert sorted(t.name for t in model.inputs) == ["source", "source_extended", "target"]
    # Extended ids that no source position holds are impossible.
    assert np.all(log_probs[0, :, V + 1:] < -1e8) and np.all(log_probs[1, :, V + 2:] < -1e8)
    # A copied id fed back reads as [UNK]: the same as giving [UNK] itself.
    unknown = np.where(TARGET >= V, 1, TARGET)
    np.testing.assert_allclose(model(_inputs(unknown)).numpy(), log_probs, atol=1e-6)


def test_rnnsearch_copies_with_its_alignment():
    keras.utils.set_random_seed(1)
    model = zoo.get("seq2seq-bahdanau-small", copy=True, **RNN)
    layers = {layer.name: layer for layer in model.layers}
    alignments = zoo.attention_weights(model, _inputs())["decoder/alignment"]
    switch = layers["pointer_generator"]
    # With the switch saturated to copy, P(w) = Σ_{i: x_i = w} α_{t,i}.
    switch.switch_bias.assign([-40.0])
    copied = np.exp(model(_inputs()).numpy())
    expected = np.zeros_like(copied)
    for row in range(2):
        for i, token in enumerate(EXTENDED[row]):
            expected[row, :, token] += alignments[row, :, i]
    np.testing.assert_allclose(copied, expected, atol=1e-6)


def test_num_params_counts_the_switch_and_coverage():
    for fields in ({"copy": True}, {"copy": True, "coverage": True}, {"coverage": True}):
        config = zoo.config("seq2seq-bahdanau-small", **RNN, **fields)
        assert zoo.get("seq2seq-bahdanau-small", **RNN, **fields).count_params() == \
            config.num_params()
    config = zoo.config("transformer-tiny", copy=True, **TRANSFORMER)
    assert zoo.get("transformer-tiny", copy=True, **TRANSFORMER).count_params() == \
        config.num_params()


def test_coverage_loss_is_added_to_the_training_loss():
    keras.utils.set_random_seed(2)
    model = zoo.get("seq2seq-bahdanau-small", copy=True, coverage=True, coverage_weight=0.5,
                    **RNN)
    alignments = zoo.attention_weights(model, _inputs())["decoder/alignment"]  # (B, T, S)
    coverage = np.cumsum(alignments, axis=1) - alignments  # Σ_{t' < t} α_{t'}
    per_token = np.minimum(alignments, coverage).sum(-1)
    mask = TARGET != 0
    expected_coverage = per_token[mask].mean()
    np.testing.assert_allclose(float(coverage_loss(alignments, mask)), expected_coverage,
                               rtol=1e-5)
    assert expected_coverage > 0
    log_probs = model(_inputs()).numpy()
    nll = -np.take_along_axis(log_probs, LABELS[..., None], -1)[..., 0][LABELS != 0].mean()
    loss = model.evaluate(_inputs(), LABELS, verbose=0, return_dict=True)["loss"]
    np.testing.assert_allclose(loss, nll + 0.5 * expected_coverage, rtol=1e-5)
    assert isinstance(model.loss, ka.PointerGeneratorCrossentropy)


def test_coverage_enters_the_energy_and_accumulates():
    keras.utils.set_random_seed(3)
    model = zoo.get("seq2seq-bahdanau-small", coverage=True, **RNN)
    decoder = model.get_layer("decoder")
    inputs = {"source": SOURCE, "target": np.where(TARGET >= V, 1, TARGET)}
    base = zoo.attention_weights(model, inputs)
    decoder.coverage_kernel.assign(np.zeros(decoder.coverage_kernel.shape, "float32"))
    without = zoo.attention_weights(model, inputs)
    # w_c = 0 leaves the first step (coverage 0) and nothing else unchanged.
    first = base["decoder/alignment"][:, 0]
    np.testing.assert_allclose(without["decoder/alignment"][:, 0], first, atol=1e-6)
    assert not np.allclose(without["decoder/alignment"][:, 1:], base["decoder/alignment"][:, 1:])
    # Decoding step by step, the state's last entry is the coverage Σ_{t' < t} α_{t'}.
    stepper = decode._stepper(model, True)
    states = stepper.prepare(tf.constant(SOURCE), 1, 4)
    for t in range(3):
        _, states = stepper.step(tf.constant(inputs["target"][:, t]), t, states)
    np.testing.assert_allclose(states[-1].numpy(), without["decoder/alignment"][:, :3].sum(1),
                               atol=1e-5)


@pytest.mark.large
def test_decoding_cached_uncached_and_scored(model):
    model.get_layer("pointer_generator").switch_bias.assign([-1.0])  # copies often
    source = {"source": SOURCE, "source_extended": EXTENDED}
    tokens, score = decode.greedy_decode(model, source, max_length=6, return_score=True)
    tokens = tokens.numpy()
    np.testing.assert_array_equal(
        decode.greedy_decode(model, source, max_length=6, use_cache=False).numpy(), tokens)
    beam, _ = decode.beam_search(model, source, beam_size=1, alpha=0.0, max_length=6)
    np.testing.assert_array_equal(beam.numpy(), tokens)
    # The score is the teacher-forced log P of the tokens, up to and including [END].
    target = np.concatenate([np.full((2, 1), 2), tokens[:, :-1]], axis=1)
    log_probs = model(_inputs(target)).numpy()
    chosen = np.take_along_axis(log_probs, tokens[..., None], -1)[..., 0]
    kept = (np.cumsum(tokens == 3, axis=1) - (tokens == 3)) == 0
    np.testing.assert_allclose(score.numpy(), (chosen * kept).sum(1), rtol=1e-5, atol=1e-5)
    tokens, scores = decode.beam_search(model, source, beam_size=3, max_length=6)
    assert tokens.shape == (2, 6) and np.all(np.isfinite(scores.numpy()))


def test_decoding_needs_the_extended_source(model):
    with pytest.raises(ValueError, match="source_extended"):
        decode.greedy_decode(model, SOURCE, max_length=4)
    plain = zoo.get("transformer-tiny", **TRANSFORMER)
    with pytest.raises(ValueError, match="does not copy"):
        decode.greedy_decode(plain, {"source": SOURCE, "source_extended": EXTENDED})


def test_transformer_copies_with_the_mean_of_the_last_cross_attention():
    keras.utils.set_random_seed(4)
    model = zoo.get("transformer-tiny", copy=True, **TRANSFORMER)
    model.get_layer("pointer_generator").switch_bias.assign([-40.0])
    weights = zoo.attention_weights(model, _inputs())["decoder_block_1/cross_attention"]
    attention = weights.mean(axis=1)  # (B, T, S)
    expected = np.zeros((2, 4, V + SOURCE.shape[1]))
    for row in range(2):
        for i, token in enumerate(EXTENDED[row]):
            expected[row, :, token] += attention[row, :, i]
    np.testing.assert_allclose(np.exp(model(_inputs()).numpy()), expected, atol=1e-6)


def test_saved_and_loaded_copying_models_agree(model, tmp_path):
    path = tmp_path / "copy.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(loaded(_inputs()).numpy(), model(_inputs()).numpy(), atol=1e-6)


def test_copy_configs_are_checked():
    with pytest.raises(ZooError, match="attention='softmax'"):
        zoo.config("transformer-tiny", copy=True, attention="linear")
    with pytest.raises(ValueError, match="copy"):
        zoo.config("seq2seq-bahdanau-small", copy="yes")
    with pytest.raises(ValueError, match="coverage_weight"):
        zoo.config("seq2seq-bahdanau-small", coverage_weight=-1.0)


@pytest.mark.large
def test_the_copy_step_is_traceable_under_xla(model):
    source = {"source": tf.constant(SOURCE), "source_extended": tf.constant(EXTENDED)}
    plain = decode.greedy_decode(model, source, max_length=6).numpy()
    compiled = decode.greedy_decode(model, source, max_length=6, jit_compile=True).numpy()
    np.testing.assert_array_equal(compiled, plain)


@pytest.mark.large
def test_sampling_a_copying_model_draws_from_its_mixture(model):
    """The first sampled token of many copies of one source follows the model's own
    `P(w)` over the extended vocabulary (copies included), and top-k 1 is greedy."""
    model.get_layer("pointer_generator").switch_bias.assign([-1.0])  # copies often
    draws = 3000
    source = {"source": np.repeat(SOURCE[:1], draws, 0),
              "source_extended": np.repeat(EXTENDED[:1], draws, 0)}
    first = decode.sample(model, source, max_length=1, seed=7).numpy()[:, 0]
    inputs = {"source": SOURCE[:1], "source_extended": EXTENDED[:1],
              "target": np.array([[2]], "int32")}
    expected = np.exp(model(inputs).numpy()[0, 0])  # (V + S,)
    assert expected[V] > 0.05  # the out-of-vocabulary source token can be drawn
    counts = np.bincount(first, minlength=expected.size)
    np.testing.assert_allclose(counts / draws, expected, atol=4 * np.sqrt(0.25 / draws))
    both = {"source": SOURCE, "source_extended": EXTENDED}
    np.testing.assert_array_equal(
        decode.sample(model, both, top_k=1, seed=1, max_length=6).numpy(),
        decode.greedy_decode(model, both, max_length=6).numpy())
