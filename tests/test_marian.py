"""Marian (OPUS-MT) import against Hugging Face's own outputs (torch-free).

`tests/fixtures/marian_tiny` was written by `tools/make_marian_fixtures.py`
with transformers' `MarianMTModel` and `MarianTokenizer`: a tiny random model
in the Hugging Face folder layout and its references (encoder outputs,
teacher-forced logits, greedy and beam-4 ids, detokenized strings).
"""

import json
import pathlib
import pickle
import shutil
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import zoo
from zoo import decode, text
from zoo.decode import defaults
from zoo.export import translation
from zoo.runs import imported as imported_runs
from zoo.text import tokenizers
from zoo.text.special import special_ids
from zoo.transformer import TransformerConfig, marian

from interrupts import Interrupt  # pytest puts tests/ (no __init__.py) on sys.path

FOLDER = pathlib.Path(__file__).parent / "fixtures" / "marian_tiny"


@pytest.fixture(scope="module")
def references():
    arrays = dict(np.load(FOLDER / "references.npz"))
    return {**arrays, **json.loads((FOLDER / "references.json").read_text(encoding="utf-8"))}


@pytest.fixture(scope="module")
def imported():
    return marian.import_folder(FOLDER)


def decode_args(tokenizer, references):
    ids = tokenizer.special_ids
    return dict(max_length=references["max_new_tokens"], start_id=ids["start"],
                end_id=ids["end"], pad_id=ids["pad"], force_end=True)


def generated(ids, pad):
    """Hugging Face's `generate` rows without the decoder start, padding dropped."""
    return [[int(t) for t in row[1:] if t != pad] for row in ids]


def ours(ids, pad):
    return [[int(t) for t in row if t != pad] for row in np.asarray(ids)]


# === Config fields ===


def test_defaults_are_the_papers():
    config = TransformerConfig()
    assert (config.activation, config.positional_layout, config.scale_embeddings,
            config.final_logits_bias, config.pad_id, config.start_id, config.end_id) == (
        "relu", "interleaved", True, False, 0, 2, 3)


@pytest.mark.parametrize("field, value", [
    ("activation", "tanh"), ("positional_layout", "sin-cos"), ("scale_embeddings", 1),
    ("final_logits_bias", "yes"), ("pad_id", 8000), ("end_id", -1), ("start_id", 1.5),
])
def test_bad_config_fields_are_refused(field, value):
    with pytest.raises(ValueError, match=f"`{field}`"):
        zoo.config("transformer-tiny", **{field: value})


def test_end_id_must_differ_from_pad_id():
    with pytest.raises(ValueError, match="end_id"):
        zoo.config("transformer-tiny", pad_id=5, end_id=5)


def test_halves_layout_is_marians_table():
    from keras_attention.layers.positional import sinusoidal_table

    positions, depth = np.arange(7, dtype="float32"), 10
    table = sinusoidal_table(positions, depth, 10000, "float32", layout="halves").numpy()
    # transformers' MarianSinusoidalPositionalEmbedding.create_weight, in numpy.
    angles = np.array([[p / np.power(10000, 2 * (j // 2) / depth) for j in range(depth)]
                       for p in range(7)])
    expected = np.concatenate([np.sin(angles[:, 0::2]), np.cos(angles[:, 1::2])], axis=1)
    np.testing.assert_allclose(table, expected, atol=1e-6)
    interleaved = sinusoidal_table(positions, depth, 10000, "float32").numpy()
    np.testing.assert_allclose(interleaved[:, 0::2], expected[:, :5], atol=1e-6)


@pytest.mark.parametrize("activation", ["gelu", "swish"])
def test_activation_reaches_the_feed_forward(activation):
    model = zoo.get("transformer-tiny", compile=False, activation=activation, num_encoder_layers=1,
                    num_decoder_layers=1, vocabulary_size=50)
    block = model.get_layer("encoder_block_0")
    assert block.feed_forward.activation is keras.activations.get(activation)


def test_marian_fields_build_save_and_count():
    overrides = dict(vocabulary_size=60, activation="swish", positional_layout="halves",
                     scale_embeddings=False, final_logits_bias=True, pad_id=59, start_id=59,
                     end_id=0, num_encoder_layers=1, num_decoder_layers=1)
    model = zoo.get("transformer-tiny", **overrides)
    assert model.count_params() == zoo.config("transformer-tiny", **overrides).num_params()
    inputs = {"source": np.array([[5, 0, 7, 59, 59]]), "target": np.array([[59, 4, 0]])}
    # With pad_id 59, id 0 is a real token of the source: masking it changes the output.
    other = {"source": np.array([[5, 1, 7, 59, 59]]), "target": inputs["target"]}
    assert not np.allclose(model(inputs), model(other))


# === Parity with Hugging Face ===


def test_encoder_and_logits_match(imported, references):
    model = imported[0]
    logits = model({"source": references["input_ids"], "target": references["decoder_input_ids"]})
    np.testing.assert_allclose(logits.numpy(), references["logits"], atol=1e-4)
    layers = {layer.name: layer for layer in model.layers}
    source = tf.constant(references["input_ids"])
    mask = tf.not_equal(source, imported[1].pad_id)
    x = layers["shared_embedding"](source)
    for i in range(2):
        x = layers[f"encoder_block_{i}"](x, padding_mask=mask)
    real = references["attention_mask"].astype(bool)
    np.testing.assert_allclose(x.numpy()[real], references["encoder_output"][real], atol=1e-4)


def test_tokenizer_matches(imported, references):
    source, target = imported[1], imported[2]
    ids = source.tokenize(tf.constant(references["sentences"])).to_list()
    pad = source.pad_id
    assert [row + [source.end_id] for row in ids] == ours(references["input_ids"], pad)
    pieces = [[p.decode() for p in row] for row in source.lookup(tf.ragged.constant(ids)).to_list()]
    assert [row + ["</s>"] for row in pieces] == [
        [p for p in row if p != "<pad>"] for row in references["pieces"]]
    texts = target.detokenize(tf.constant(references["beam_ids"])).numpy()
    assert [t.decode() for t in texts] == references["beam_text"]


def test_language_code_is_one_piece(imported):
    source = imported[1]
    with_code = source.tokenize(tf.constant([">>de<< Hello"])).to_list()[0]
    without = source.tokenize(tf.constant([" Hello"])).to_list()[0]
    assert with_code == [source.unk_id] + without  # >>de<< is not in this vocab.json


def test_greedy_ids_match(imported, references):
    model, _, target = imported
    tokens = decode.greedy_decode(model, references["input_ids"], **decode_args(target, references))
    assert ours(tokens, target.pad_id) == generated(references["greedy_ids"], target.pad_id)
    texts = [t.decode() for t in target.detokenize(tokens).numpy()]
    assert texts == references["greedy_text"]


def test_beam_ids_match(imported, references):
    model, _, target = imported
    tokens, scores = decode.beam_search(
        model, references["input_ids"], beam_size=references["num_beams"],
        alpha=references["length_penalty"], length_penalty="hf",
        **decode_args(target, references))
    assert ours(tokens, target.pad_id) == generated(references["beam_ids"], target.pad_id)
    assert np.all(np.isfinite(scores.numpy()))


def test_strip_special_with_marians_ids(imported, references):
    """</s> = 0 ends a row and padding is V - 1: Hugging Face's greedy ids, cut at </s>."""
    model, _, target = imported
    ids = special_ids(target)
    assert (ids["end"], ids["pad"]) == (0, 109)
    tokens = decode.greedy_decode(model, references["input_ids"], **decode_args(target, references))
    expected = [row[: row.index(0)] if 0 in row else row
                for row in generated(references["greedy_ids"], target.pad_id)]
    assert decode.strip_special(tokens, end_id=ids["end"], pad_id=ids["pad"]) == expected
    assert decode.strip_special(tokens) != expected  # the zoo's ids (pad 0, end 3) do not fit


def test_one_decoding_policy_for_runs_and_exports(imported):
    """Imported tokenizers decode as Hugging Face does, the zoo's with GNMT's penalty."""
    target = imported[2]
    zoo_tokenizer = text.WordPieceTokenizer(list(text.RESERVED_TOKENS) + ["a", "b"])
    assert special_ids(target) == {"pad": 109, "start": 109, "end": 0}
    assert special_ids(zoo_tokenizer) == {"pad": 0, "start": 2, "end": 3}
    assert defaults.decoding_settings(target) == defaults.HUGGING_FACE == defaults.DecodingDefaults(
        length_penalty="hf", alpha=1.0, force_end=True)
    assert defaults.decoding_settings(zoo_tokenizer) == defaults.GNMT == defaults.DecodingDefaults(
        length_penalty="gnmt", alpha=0.6, force_end=False)
    # A chosen penalty brings its own alpha; a given alpha or force_end stays.
    assert defaults.decoding_settings(zoo_tokenizer, length_penalty="hf") == defaults.DecodingDefaults(
        "hf", 1.0, False)
    assert defaults.decoding_settings(target, alpha=0.5, force_end=False) == defaults.DecodingDefaults(
        "hf", 0.5, False)
    options = imported_runs.decoding_options(target)
    assert options == {"start_id": 109, "end_id": 0, "pad_id": 109, "force_end": True,
                       "length_penalty": "hf", "alpha": 1.0}
    assert imported_runs.decoding_options(zoo_tokenizer, alpha=0.8) == {
        "start_id": 2, "end_id": 3, "pad_id": 0, "force_end": False, "length_penalty": "gnmt",
        "alpha": 0.8}
    # The export resolves the same settings (zoo.export.translation._search_settings).
    assert translation._search_settings(target, None, None, None) == ("hf", True, 1.0)
    assert translation._search_settings(zoo_tokenizer, None, None, None) == ("gnmt", False, 0.6)


def test_saved_imported_model_gives_the_same_logits(imported, references, tmp_path):
    model, source, _ = imported
    model.save(tmp_path / "model.keras")
    loaded = keras.saving.load_model(tmp_path / "model.keras", compile=False)
    inputs = {"source": references["input_ids"], "target": references["decoder_input_ids"]}
    np.testing.assert_allclose(loaded(inputs), references["logits"], atol=1e-4)
    source.save(tmp_path / "tokenizer")
    reloaded = tokenizers.load(tmp_path / "tokenizer")
    tf.random.set_seed(0)  # clears the eager kernel cache: the op must survive it
    strings = tf.constant(references["sentences"])
    assert reloaded.tokenize(strings).to_list() == source.tokenize(strings).to_list()
    assert reloaded.special_ids == source.special_ids


def test_zoo_get_with_weights(references):
    model = zoo.get("transformer-base", weights=FOLDER)
    assert model.compiled and model.get_layer("encoder_block_0").self_attention.num_heads == 4
    logits = model({"source": references["input_ids"], "target": references["decoder_input_ids"]})
    np.testing.assert_allclose(logits.numpy(), references["logits"], atol=1e-4)
    with pytest.raises(ValueError, match="d_model=256 differs"):
        zoo.get("transformer-base", weights=FOLDER, d_model=256)


# === Bad folders: one line naming the file or field ===


def broken_copy(tmp_path, edit=None, remove=None):
    folder = tmp_path / "folder"
    shutil.copytree(FOLDER, folder)
    if remove:
        (folder / remove).unlink()
    if edit:
        config = json.loads((folder / "config.json").read_text())
        config.update(edit)
        (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize("edit, remove, error, message", [
    (None, "vocab.json", FileNotFoundError, r"vocab\.json: not found"),
    (None, "model.safetensors", ValueError, r"model\.safetensors: not found \(nor pytorch_model\.bin\)"),
    ({"d_model": 64}, None, ValueError, r"model\.shared\.weight has shape \(110, 32\).*d_model=64"),
    ({"model_type": "bart"}, None, ValueError, r"model_type='bart' is not supported"),
    ({"normalize_before": True}, None, ValueError, r"normalize_before=True cannot be expressed"),
    ({"activation_function": "tanh"}, None, ValueError, r"activation_function='tanh'"),
    ({"decoder_ffn_dim": 128}, None, ValueError, r"encoder_ffn_dim=64 differs from decoder_ffn_dim"),
])
def test_bad_folders_are_refused_in_one_line(tmp_path, edit, remove, error, message):
    folder = broken_copy(tmp_path, edit, remove)
    with pytest.raises(error, match=message) as caught:
        marian.import_folder(folder)
    assert "\n" not in str(caught.value)


def test_a_folder_without_final_logits_bias_imports_with_zeros_and_says_so(tmp_path, references):
    from safetensors import numpy as safetensors_numpy

    folder = broken_copy(tmp_path)
    tensors = safetensors_numpy.load_file(folder / "model.safetensors")
    assert np.abs(tensors.pop("final_logits_bias")).max() > 0  # the fixture's bias is not zeros
    safetensors_numpy.save_file(tensors, folder / "model.safetensors")
    with pytest.warns(UserWarning, match=r"model\.safetensors: no final_logits_bias.*zeros"):
        model, _, _ = marian.import_folder(folder)
    np.testing.assert_array_equal(model.get_layer("final_logits_bias").bias.numpy(), 0.0)


# === The SavedModel, in a process without our code ===


@pytest.mark.large
def test_export_serves_the_reference_strings(opus_export, references):
    path, report = opus_export
    metadata = json.loads((path / "assets.extra" / "zoo_export.json").read_text())
    assert metadata["length_penalty"] == "hf" and metadata["alpha"] == 1.0
    assert metadata["special_ids"] == {"pad": 109, "start": 109, "end": 0}
    assert report["imported"] == []
    beam, greedy = report["results"]["serving_default"], report["results"]["greedy"]
    assert [t.decode() for t in beam["translation"]] == references["beam_text"]
    assert [t.decode() for t in greedy["translation"]] == references["greedy_text"]
    assert ours(beam["tokens"], 109) == generated(references["beam_ids"], 109)


# === At the length limit: `generate`'s `max_length` counts the decoder start token ===
# Documented semantics (`GenerationConfig.max_length`: "the length of the input prompt +
# max_new_tokens"; an encoder-decoder's prompt is the decoder start token): with
# max_length L, generate returns the start token and at most L - 1 new tokens, and with
# forced_eos_token_id the last of them is </s>. The recorded references ran
# `generate(max_new_tokens=30)`, i.e. L = 31; their beam rows never end before the limit.


def folder_copy(tmp_path, generation=None, config=None, end_bias=0.0):
    """FOLDER copied, with generation_config.json / config.json fields replaced (None
    removes the field) and `end_bias` added to </s>'s final_logits_bias."""
    from safetensors import numpy as safetensors_numpy

    folder = tmp_path / "limit"
    shutil.copytree(FOLDER, folder)
    for name, fields in (("generation_config.json", generation), ("config.json", config)):
        content = json.loads((folder / name).read_text())
        for key, value in (fields or {}).items():
            content.pop(key, None) if value is None else content.update({key: value})
        (folder / name).write_text(json.dumps(content))
    if end_bias:
        tensors = safetensors_numpy.load_file(folder / "model.safetensors")
        tensors["final_logits_bias"][0, 0] += end_bias  # </s> = 0
        safetensors_numpy.save_file(tensors, folder / "model.safetensors")
    return folder


def test_generate_limit_reads_the_folders_max_length(tmp_path):
    assert marian.generate_limit(FOLDER) == 63  # generation_config.json: max_length 64
    cases = [({"max_length": 31}, None, 30),
             ({"max_length": None}, {"max_length": 12}, 11),  # config.json's
             ({"max_length": None}, None, 19),  # transformers' default 20
             ({"max_length": 512}, None, 64)]  # at most the position table
    for index, (generation, config, expected) in enumerate(cases):
        assert marian.generate_limit(folder_copy(tmp_path / str(index), generation, config)) \
            == expected
    with pytest.raises(ValueError, match=r"generation_config\.json: max_length=1 must be"):
        marian.generate_limit(folder_copy(tmp_path / "bad", {"max_length": 1}))


@pytest.mark.large
def test_import_stops_where_generate_stops_when_greedy_never_ends(tmp_path, monkeypatch):
    """A folder whose </s> never wins (bias -1e4): generate(max_length=64) returns the start
    token, 62 tokens and the forced </s> (the semantics above; no recorded output)."""
    import zoo.export

    folder = folder_copy(tmp_path, end_bias=-1e4)
    given = {}
    monkeypatch.setattr(zoo.export, "export", lambda *args, **kwargs: given.update(kwargs))
    marian.export_folder(folder, tmp_path / "unused")  # zoo import's defaults
    assert given.get("max_length") is None and given["max_new_tokens"] == 63
    model, source, target = marian.import_folder(folder)
    module, _, metadata = translation.translation_export(
        model, "transformer", source, target, 2, None, None,
        max_new_tokens=given["max_new_tokens"])
    assert (metadata["max_length"], metadata["max_new_tokens"]) == (64, 63)
    texts = tf.constant(["The cat sees the old house.", "", "Hello " * 80])
    assert module.source_ids(texts).shape[1] == 64  # sources keep the whole position table
    for signature in (module.greedy, module.beam):
        tokens = signature(texts)["tokens"].numpy()
        assert tokens.shape == (3, 63)
        assert np.all(tokens[:, :62] != 0) and np.all(tokens[:, :62] != 109)
        np.testing.assert_array_equal(tokens[:, 62], 0)  # 62 tokens, then </s>


@pytest.fixture(scope="module")
def opus_export(tmp_path_factory, references):
    """`zoo import`'s export (its defaults) of FOLDER with generation_config.json's max_length
    31 = the references' 1 + max_new_tokens, and what a fresh process without our code
    (test_export's SERVE_SCRIPT) serves from it for the reference sentences:
    `(version directory, the process's report)`."""
    from test_export import SERVE_SCRIPT, text_op_libraries

    tmp = tmp_path_factory.mktemp("opus")
    folder = folder_copy(tmp, {"max_length": references["max_new_tokens"] + 1})
    path = marian.export_folder(folder, tmp / "opus")
    sentences = np.array([s.encode() for s in references["sentences"]], dtype=object)
    request = {
        "exports": {"opus": str(path)}, "ops": {"opus": []}, "op_libraries": text_op_libraries(),
        "calls": {name: ("opus", name, {"text": sentences})
                  for name in ("serving_default", "greedy")},
    }
    (tmp / "request.pkl").write_bytes(pickle.dumps(request))
    (tmp / "serve.py").write_text(SERVE_SCRIPT)
    result = subprocess.run(
        [sys.executable, str(tmp / "serve.py"), str(tmp / "request.pkl"), str(tmp / "report.pkl")],
        capture_output=True, text=True, cwd=tmp, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    return path, pickle.loads((tmp / "report.pkl").read_bytes())


@pytest.mark.large
def test_zoo_import_returns_generates_beam_at_its_max_length(opus_export, references):
    """generation_config.json's max_length 31 = the references' 1 + max_new_tokens: `zoo
    import`'s defaults give transformers' recorded beam rows, 29 tokens + </s> at the limit."""
    path, report = opus_export
    metadata = json.loads((path / "assets.extra" / "zoo_export.json").read_text())
    assert (metadata["max_length"], metadata["max_new_tokens"]) == (64, 30)
    beam = report["results"]["serving_default"]["tokens"]
    greedy = report["results"]["greedy"]["tokens"]
    assert beam.shape[1] == 30
    assert ours(beam, 109) == generated(references["beam_ids"], 109)
    assert ours(greedy, 109) == generated(references["greedy_ids"], 109)
    assert all(len(row) == 30 and row[-1] == 0 for row in ours(beam, 109))  # at the limit


# === Fine-tuning with the folder's own tokenizers ===
# fine_tuning.npz / .json: Hugging Face's batch for FINE_TUNING_PAIRS (tokenizer(sources,
# text_target=targets), shift_tokens_right), its teacher-forced logits and losses.


@pytest.fixture(scope="module")
def fine_tuning():
    arrays = dict(np.load(FOLDER / "fine_tuning.npz"))
    return {**arrays, **json.loads((FOLDER / "fine_tuning.json").read_text(encoding="utf-8"))}


def smoothed_loss(logits, labels, pad, smoothing):
    """The recipe's loss in numpy: label-smoothed cross-entropy, mean over non-pad labels."""
    log_p = logits - logits.max(-1, keepdims=True)
    log_p = log_p - np.log(np.exp(log_p).sum(-1, keepdims=True))  # (B, T, V)
    chosen = np.take_along_axis(log_p, labels[..., None], -1)[..., 0]  # (B, T)
    per_token = -(1 - smoothing) * chosen - smoothing * log_p.mean(-1)
    real = labels != pad
    return float(per_token[real].sum() / real.sum())


def test_data_path_encodes_like_hugging_face(imported, fine_tuning):
    """The pipeline's batch, and the imported model's logits on it, are Hugging Face's."""
    from zoo.datasets import pipeline

    model, source, target = imported
    pairs = [tuple(pair) for pair in fine_tuning["pairs"]]
    dataset = pipeline.make_translation_dataset(pairs, source, target, batch_size=len(pairs),
                                                max_length=64, shuffle=False)
    inputs, labels = next(iter(dataset))
    pad = target.pad_id
    real = fine_tuning["labels"] != pad  # HF's decoder input also has </s> after the end
    np.testing.assert_array_equal(inputs["source"], fine_tuning["input_ids"])  # x + </s>, <pad>
    np.testing.assert_array_equal(labels, fine_tuning["labels"])  # y + </s>, <pad>
    np.testing.assert_array_equal(inputs["target"].numpy()[real],  # <pad> + y
                                  fine_tuning["decoder_input_ids"][real])
    logits = model(inputs).numpy()
    np.testing.assert_allclose(logits[real], fine_tuning["logits"][real], atol=1e-4)
    # The numpy loss reproduces Hugging Face's own, and the model's compiled loss is it.
    assert smoothed_loss(fine_tuning["logits"], fine_tuning["labels"], pad, 0.0) == pytest.approx(
        fine_tuning["loss"], abs=1e-5)
    compiled = zoo.get("transformer-base", weights=FOLDER, label_smoothing=0.0)
    assert float(compiled.compute_loss(y=labels, y_pred=logits)) == pytest.approx(
        fine_tuning["loss"], abs=1e-4)


class WeightsAtStart(keras.callbacks.Callback):
    """Keeps the weights the model starts `fit` with (after the backup's restore)."""

    def on_train_begin(self, logs=None):
        self.weights = [w.copy() for w in self.model.get_weights()]


PAIR = 2  # the fine-tuning pair the training file repeats (every batch is the same)


@pytest.fixture(scope="module")
def fine_tuned(tmp_path_factory, fine_tuning):
    """`zoo train transformer-base --weights FOLDER --data tsv:...`, killed before its first
    epoch (no backup yet), resumed, killed after epoch 1, resumed: `(run directory, result
    of the last call, weights it resumed from, weights of last.keras when it was killed)`."""
    from zoo import runs

    tmp = tmp_path_factory.mktemp("fine_tuning")
    pairs = fine_tuning["pairs"]
    (tmp / "train.tsv").write_text(("\t".join(pairs[PAIR]) + "\n") * 8, encoding="utf-8")
    (tmp / "test.tsv").write_text("".join("\t".join(p) + "\n" for p in pairs), encoding="utf-8")
    out = tmp / "run"
    arguments = dict(weights=str(FOLDER), test_path=str(tmp / "test.tsv"), epochs=2,
                     batch_size=8, val_ratio=0, overrides={"dropout": 0.0, "warmup_steps": 100})
    for data, epoch in ((f"tsv:{tmp / 'train.tsv'}", 0), (None, 1)):
        with pytest.raises(KeyboardInterrupt):
            runs.train("transformer-base", data, out, verbose=0, quiet=True,
                       callbacks=[Interrupt(epoch)], **(arguments if data else {}))
    after_epoch_1 = keras.saving.load_model(out / "checkpoints/last.keras").get_weights()
    start = WeightsAtStart()
    resumed = runs.train("transformer-base", None, out, verbose=0, quiet=True, callbacks=[start])
    return out, resumed, start.weights, after_epoch_1


@pytest.mark.large
def test_fine_tuning_run_starts_from_the_reference_and_resumes(fine_tuned, fine_tuning):
    from zoo import runs

    out, resumed, start, after_epoch_1 = fine_tuned
    config = json.loads((out / "config.json").read_text())
    assert config["training"]["weights"] == str(FOLDER)
    assert config["training"]["tokenizer"] == "marian"
    assert config["overrides"] == {"dropout": 0.0, "warmup_steps": 100}
    fields = {key: config["model_config"][key] for key in ("d_model", "vocabulary_size",
                                                           "pad_id", "start_id", "end_id")}
    assert fields == {"d_model": 32, "vocabulary_size": 110, "pad_id": 109, "start_id": 109,
                      "end_id": 0}
    source, target = runs.load_tokenizers(out)
    assert (tokenizers.kind(source), tokenizers.kind(target)) == ("marian", "marian")
    assert target.special_ids == {"pad": 109, "start": 109, "end": 0, "unk": 1}
    # The first step's loss (one batch of one repeated pair, before any update) is the
    # recipe's loss (label smoothing 0.1) on Hugging Face's logits for that pair: the run
    # killed before its first epoch started again from the folder's weights.
    rows = runs.read_history(out / "history.csv")
    first = smoothed_loss(fine_tuning["logits"][PAIR:PAIR + 1],
                          fine_tuning["labels"][PAIR:PAIR + 1], 109, 0.1)
    assert rows[0]["loss"] == pytest.approx(first, abs=1e-4)
    assert rows[1]["loss"] < rows[0]["loss"]  # it learns
    # Resumed from epoch 1 with epoch 1's weights and the saved tokenizers.
    assert resumed.initial_epoch == 1 and resumed.epochs == 2 and [r["epoch"] for r in rows] == [0, 1]
    assert resumed.summary["steps"] == 2
    for a, b in zip(start, after_epoch_1):
        np.testing.assert_array_equal(a, b)


@pytest.mark.large
def test_fine_tuned_run_evaluates_predicts_and_exports(fine_tuned, fine_tuning, references,
                                                       tmp_path):
    from zoo import runs

    out = fine_tuned[0]
    pairs = fine_tuning["pairs"]
    metrics = runs.evaluate(out, beam_size=1, limit=2, quiet=True)  # beam: translate, below
    assert metrics["num_examples"] == 2 and 0 <= metrics["greedy"]["bleu"] <= 100
    assert metrics["references"] == "canonical form of the target tokenizer (cased)"
    assert [e["reference"] for e in metrics["examples"]] == [t for _, t in pairs[:2]]  # cased
    assert json.loads((out / "metrics.json").read_text())["greedy"] == metrics["greedy"]
    # A copy of the run holding the imported weights decodes as Hugging Face's generate.
    copy = tmp_path / "reference_run"
    shutil.copytree(out, copy)
    model = zoo.get("transformer-base", weights=FOLDER, compile=False)
    for name in ("best", "last"):
        model.save(copy / "checkpoints" / f"{name}.keras")
    sentences = references["sentences"]
    greedy = runs.predict(copy, sentences, beam_size=1)
    assert [r["translation"] for r in greedy] == references["greedy_text"]
    # Beam search by default as generate(num_beams=4) does: its penalty, alpha 1.0, forced </s>.
    beam = runs.translate(copy, sentences, beam_size=4, max_length=references["max_new_tokens"])
    assert beam == references["beam_text"]
    path = runs.export_run(copy, to=tmp_path / "export", max_length=references["max_new_tokens"],
                           quiet=True)
    metadata = json.loads((path / "assets.extra" / "zoo_export.json").read_text())
    assert (metadata["length_penalty"], metadata["alpha"], metadata["force_end"]) == ("hf", 1.0, True)
    assert metadata["special_ids"] == {"pad": 109, "start": 109, "end": 0}
    assert metadata["max_length"] == references["max_new_tokens"]
    # (test_export_serves_the_reference_strings serves such an export's strings.)


@pytest.mark.parametrize("name, extra, message", [
    ("seq2seq-bahdanau-small", {}, r"\(seq2seq\) cannot load `weights`"),
    ("vit-tiny", {}, r"not a Hugging Face ViT checkpoint"),
    ("transformer-base", {"overrides": {"d_model": 64}},
     r"d_model=64 differs from .*config\.json's d_model=32"),
    ("transformer-base", {"overrides": {"pad_id": 0}}, r"pad_id=0 differs"),
    ("transformer-base", {"overrides": {"colour": 1}}, r"Unknown field\(s\) colour"),
    ("transformer-base", {"tokenizer": "wordpiece"}, r"tokenizer='wordpiece' cannot be used"),
    ("transformer-base", {"separate_vocabularies": False}, r"separate_vocabularies=False"),
    ("transformer-tiny", {"weights": None, "tokenizer": "marian"}, r"tokenizer='marian' comes with"),
])
def test_bad_fine_tuning_combinations_are_refused_in_one_line(tmp_path, name, extra, message):
    from zoo import runs

    (tmp_path / "pairs.tsv").write_text("Hello, World.\tHallo, Welt.\n", encoding="utf-8")
    extra = {"weights": str(FOLDER), **extra}
    with pytest.raises(ValueError, match=message) as caught:
        runs.train(name, f"tsv:{tmp_path / 'pairs.tsv'}", tmp_path / "run", quiet=True, **extra)
    assert "\n" not in str(caught.value)
    assert not (tmp_path / "run").exists()  # refused before any work


def test_cli_fine_tuning_refuses_a_contradicting_set_in_one_line(imported, tmp_path, capsys):
    from zoo import cli

    (tmp_path / "pairs.tsv").write_text("Hello, World.\tHallo, Welt.\n", encoding="utf-8")
    code = cli.main(["train", "transformer-base", "--weights", str(FOLDER), "--data",
                     f"tsv:{tmp_path / 'pairs.tsv'}", "--set", "num_heads=8",
                     "--out", str(tmp_path / "run")])
    error = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in error
    assert error.startswith("zoo train: error: num_heads=8 differs from") and "num_heads=4" in error
    described = zoo.describe("transformer-base", weights=FOLDER)
    assert described.config.d_model == 32
    assert described.num_params == imported[0].count_params()


# === pytorch_model.bin, read without torch ===


def test_broken_weight_files_are_refused_in_one_line(tmp_path):
    """Both weight files go through `zoo.checkpoints` (tested there), errors as `FolderError`."""
    import zipfile

    folder = broken_copy(tmp_path)
    (folder / "model.safetensors").write_bytes(b"just some text")
    with pytest.raises(marian.FolderError, match=r"model\.safetensors: not a safetensors file \("):
        marian.import_folder(folder)
    (folder / "model.safetensors").unlink()
    with zipfile.ZipFile(folder / "pytorch_model.bin", "w") as archive:
        archive.writestr("evil/data.pkl", pickle.dumps(print))
    with pytest.raises(marian.FolderError, match=r"pytorch_model\.bin: holds builtins\.print, "
                                                 "which is not a tensor") as caught:
        marian.import_folder(folder)
    assert "\n" not in str(caught.value)


def test_folder_with_pytorch_model_bin(tmp_path, references):
    folder = broken_copy(tmp_path, remove="model.safetensors")
    shutil.copy(FOLDER.parent / "marian_tiny_bin" / "pytorch_model.bin", folder)
    model, _, _ = marian.import_folder(folder)
    logits = model({"source": references["input_ids"], "target": references["decoder_input_ids"]})
    np.testing.assert_allclose(logits.numpy(), references["logits"], atol=1e-4)


def test_attention_weights_use_the_pad_id(imported, references):
    from zoo.transformer import attention_weights

    model, source, _ = imported
    inputs = {"source": references["input_ids"][:2], "target": references["decoder_input_ids"][:2]}
    weights = attention_weights(model, inputs)
    cross = weights["decoder_block_0/cross_attention"]  # (B, N, T, S)
    padded = references["input_ids"][:2] == source.pad_id
    assert np.all(cross[:, :, :, :][np.broadcast_to(padded[:, None, None, :], cross.shape)] == 0)
    np.testing.assert_allclose(cross.sum(-1), 1.0, atol=1e-5)


# === The Transformer's new layers ===


def test_new_layers_round_trip_and_save(tmp_path):
    from zoo.transformer import FinalLogitsBias, PaddingMask

    from layer_checks import _Inputs, check_config_round_trip, check_save_and_load

    cases = [
        (lambda: FinalLogitsBias(name="bias"), {"logits": np.ones((2, 3, 5), "float32")}),
        (lambda: PaddingMask(4, name="mask"), {"ids": np.array([[1, 4, 0], [4, 4, 2]], "int32")}),
    ]
    for factory, inputs in cases:
        check_config_round_trip(factory, _Inputs(inputs, None))
        check_save_and_load(factory, _Inputs(inputs, None), tmp_path)
    assert PaddingMask(4)(np.array([[1, 4, 0]])).numpy().tolist() == [[True, False, True]]
    bias = FinalLogitsBias()
    bias.build((None, None, 5))
    assert not bias.trainable_weights and len(bias.non_trainable_weights) == 1


@pytest.mark.parametrize("layout", ["separate_vocabularies", "untied_output"])
def test_other_embedding_layouts(tmp_path, references, layout):
    """The same weights laid out as a separate-vocabulary or untied checkpoint give the same logits."""
    from safetensors.numpy import load_file, save_file

    folder = broken_copy(tmp_path, remove="model.safetensors")
    tensors = load_file(str(FOLDER / "model.safetensors"))
    shared = tensors["model.shared.weight"]
    if layout == "separate_vocabularies":
        tensors["model.encoder.embed_tokens.weight"] = shared.copy()
        tensors["model.decoder.embed_tokens.weight"] = shared.copy()
        del tensors["model.shared.weight"]
        edit = {"share_encoder_decoder_embeddings": False}
        shutil.copy(FOLDER / "vocab.json", folder / "target_vocab.json")
    else:
        tensors["lm_head.weight"] = shared.copy()
        edit = {"tie_word_embeddings": False}
    save_file(tensors, str(folder / "model.safetensors"))
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **edit}))
    model, source, target = marian.import_folder(folder)
    names = {layer.name for layer in model.layers}
    assert ("source_embedding" in names) == (layout == "separate_vocabularies")
    assert ("output_projection" in names) == (layout == "untied_output")
    logits = model({"source": references["input_ids"], "target": references["decoder_input_ids"]})
    np.testing.assert_allclose(logits.numpy(), references["logits"], atol=1e-4)
    tokens = decode.greedy_decode(model, references["input_ids"], **decode_args(target, references))
    assert ours(tokens, target.pad_id) == generated(references["greedy_ids"], target.pad_id)


@pytest.mark.parametrize("content, message", [
    ({"activation_dropout": 0.1}, r"activation_dropout=0\.1 is not supported \(only 0\)"),
    ({"vocab_size": -1}, r"vocab_size=-1 must be a non-negative integer"),
    ({"eos_token_id": True}, r"eos_token_id=True must be a non-negative integer"),
    ({"encoder_attention_heads": 8}, r"encoder_attention_heads=8 differs from decoder_"),
    ({"static_position_embeddings": False}, r"static_position_embeddings=False cannot be"),
    ("{not json", r"config\.json: not valid JSON"),
    ("[1, 2]", r"config\.json: not a JSON object"),
    (None, r"config\.json: not found"),
])
def test_read_config_names_the_first_field_it_refuses(tmp_path, content, message):
    if isinstance(content, dict):
        config = json.loads((FOLDER / "config.json").read_text())
        content = json.dumps({**config, **content})
    if content is not None:
        (tmp_path / "config.json").write_text(content)
    with pytest.raises(marian.FolderError, match=message):
        marian.read_config(tmp_path)
    assert marian.read_config(FOLDER)["model_type"] == "marian"
