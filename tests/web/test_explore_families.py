"""What `zoo explore` shows for RNNsearch (additive with copying, location-aware) and ConvS2S
runs, without a browser: the translation is `zoo predict`'s, and every alignment map has one
row per target token and one column per source token (the pieces the model read).

(Monotonic attention is left out: `zoo train seq2seq-bahdanau-small --set attention=monotonic`
fails in `BahdanauDecoder.call` (at the registered sizes too), before `zoo explore` has a run.)"""

import json

import numpy as np
import pytest
import tensorflow as tf

from zoo.explore import drawing, targets, translation
from zoo.runs import inference, rundir

from zoo_cli import run_main

SENTENCE = "dreihundertvierundzwanzig"
WITH_UNKNOWN = "Ωμέγα elf"  # out of the vocabulary (within max_length): a copying model copies it
SEQ2SEQ = dict(embedding_dim=8, encoder_units=8, decoder_units=8, attention_units=8,
               maxout_units=4, vocabulary_size=60, max_length=12)
CONVS2S = dict(embedding_dim=8, hidden_dim=12, output_embedding_dim=6, num_encoder_layers=2,
               num_decoder_layers=2, vocabulary_size=60, max_length=12, dropout=0.0)
RUNS = {
    "rnnsearch-copy": ("seq2seq-bahdanau-small", {**SEQ2SEQ, "copy": "true"}),
    "rnnsearch-location": ("seq2seq-bahdanau-small", {**SEQ2SEQ, "attention": "location"}),
    "convs2s": ("convs2s-small", CONVS2S),
}


def _train(name, overrides, run_dir):
    sizes = [argument for key, value in overrides.items() for argument in ("--set", f"{key}={value}")]
    code, _, err = run_main("train", name, "--data", "numbers", "--out", run_dir, "--epochs", 1,
                            "--train-size", 64, "--test-size", 4, "--seed", 1, *sizes)
    assert code == 0, err[-3000:]


def _predicted(run_dir, *options):
    code, out, err = run_main("predict", run_dir, SENTENCE, *options, "--json")
    assert code == 0, err
    return json.loads(out)[0]["translation"]


@pytest.mark.parametrize("case", sorted(RUNS))
def test_the_translation_is_zoo_predicts_and_each_alignment_is_target_by_source(case, tmp_path):
    name, overrides = RUNS[case]
    _train(name, overrides, tmp_path / "run")
    target = targets.open_target(tmp_path / "run", tmp_path / "work")
    assert target.kind == "translation" and len(target.examples) == 4
    beam = translation.translate(target, SENTENCE, "beam", beam_size=4)
    assert beam.text == _predicted(tmp_path / "run", "--beam-size", "4")
    shown = translation.translate(target, SENTENCE, "greedy")
    assert shown.text == _predicted(tmp_path / "run", "--beam-size", "1")

    source, _ = rundir.load_tokenizers(tmp_path / "run")
    pieces = source.lookup(source.tokenize(tf.constant([SENTENCE]))).to_list()[0]
    cut = overrides["max_length"] - 1  # the model reads max_length - 1 pieces, then [END]
    tokens = [piece.decode("utf-8") for piece in pieces][:cut] + ["[END]"]
    expected = ({"decoder/alignment"} if name.startswith("seq2seq") else
                {f"convolutional_decoder_block_{i}/attention" for i in range(2)})
    assert set(shown.maps) == expected
    for map_name, weights in shown.maps.items():
        rows, columns = shown.axes(map_name)
        assert columns == tokens and rows == shown.target_tokens
        assert weights.shape == (len(rows), len(columns))  # one map: no heads
        np.testing.assert_allclose(weights.sum(axis=-1), 1.0, atol=1e-4)
        assert drawing.head_choices(shown, map_name) == [drawing.MEAN]
        picture = drawing.heatmap(shown, map_name)
        assert all(f">{token}</text>" in picture for token in tokens if token != "▁")
    if overrides.get("copy"):
        _check_copy_probabilities(target)
    else:
        assert shown.copy is None


def _check_copy_probabilities(target):
    """`1 − p_gen` against the model's own output: the probability it gives the source's
    out-of-vocabulary slots is `(1 − p_gen) Σ a_i` over their positions (See et al. 2017)."""
    shown = translation.translate(target, WITH_UNKNOWN, "greedy")
    assert len(shown.copy) == len(shown.target_tokens)
    assert all(0.0 <= p <= 1.0 for p in shown.copy)
    run, (max_length, options, table) = target.run, target.setup
    _, source, generated = inference.decode_batch(run, table, [WITH_UNKNOWN], 1, max_length,
                                                  options, None)
    ids = np.asarray(generated)[0][: len(shown.target_tokens)]
    decoder_input = np.asarray([[options["start_id"], *ids[:-1]]], "int32")
    probabilities = np.exp(np.asarray(run.model({**source, "target": tf.constant(decoder_input)}))[0])
    vocabulary = run.target_tokenizer.vocab_size
    unknown = np.asarray(source["source_extended"])[0] >= vocabulary
    assert unknown.any()
    copied = np.asarray(shown.copy) * shown.maps["decoder/alignment"][:, unknown].sum(axis=-1)
    np.testing.assert_allclose(probabilities[:, vocabulary:].sum(axis=-1), copied, atol=1e-5)
