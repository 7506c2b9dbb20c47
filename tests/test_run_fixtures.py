"""Run directories and `.keras` files written by an earlier version still work.

`tests/fixtures/` holds what the code at commit a20bede wrote
(`tests/fixtures/make_v1_runs.py`, kept as the record of how):

- `run_v1_transformer/`: a tiny transformer on `numbers`, killed after its
  first of two epochs (config, tokenizer, checkpoints, history and the
  `backup/` of the finished epoch; no `summary.json`).
- `run_v1_vit/`: a tiny ViT on `digits` (every augmentation on, shifted
  patches, sequence pooling), one epoch, finished.
- `vit_v1_augmented.keras`: a ViT with the augmentation layers, with an input
  and the output it gave.

and what the code at commit 94240b1 wrote, the last before `zoo/` became
packages (`tests/fixtures/make_v2_runs.py`):

- `run_v2_seq2seq/` (RNNsearch, SentencePiece tokenizer) and `run_v2_convs2s/`
  (ConvS2S, WordPiece tokenizer): tiny models on `numbers`, killed after their
  first of two epochs, like `run_v1_transformer/`.
- `transformer_v2.keras`, `seq2seq_v2.keras` (LSTM cell, location-aware
  attention) and `convs2s_v2.keras`, each with an input (`*_v2_input.npz`)
  and the output it gave (`*_v2_output.npy`).

Their `.keras` files (the three above and the runs' checkpoints) record the
flat module paths of that time in their inner `config.json`:
`"module": "zoo.convs2s_layers"` (now `zoo.convs2s.layers`) and
`"module": "zoo.transformer"` (`PaddingMask`, now in `zoo.transformer.layers`)
in the ConvS2S files, `"module": "zoo.seq2seq"` in the RNNsearch ones; the
Transformer's holds only `keras_attention` layers. Keras finds the zoo's
classes by their registered names (`zoo>ConvS2SEncoderBlock`); that the old
module paths still import to the same classes is `tests/test_moved.py`'s.

Each test works on a copy: the fixtures are never written to.
"""

import json
import pathlib
import shutil

import keras
import numpy as np
import pytest

import zoo

from zoo_cli import run_main

FIXTURES = pathlib.Path(__file__).parent / "fixtures"


@pytest.fixture
def transformer_run(tmp_path):
    return pathlib.Path(shutil.copytree(FIXTURES / "run_v1_transformer", tmp_path / "run"))


@pytest.fixture(params=["seq2seq", "convs2s"])
def v2_run(request, tmp_path):
    """`(model name, a copy of run_v2_<family>/)`."""
    names = {"seq2seq": "seq2seq-bahdanau-small", "convs2s": "convs2s-small"}
    run = shutil.copytree(FIXTURES / f"run_v2_{request.param}", tmp_path / "run")
    return names[request.param], pathlib.Path(run)


@pytest.fixture
def vit_run(tmp_path):
    return pathlib.Path(shutil.copytree(FIXTURES / "run_v1_vit", tmp_path / "run"))


def test_v1_keras_file_with_the_augmentation_layers_loads_and_gives_the_same_outputs():
    model = keras.saving.load_model(FIXTURES / "vit_v1_augmented.keras", compile=False)
    layers = {layer.__class__.__name__ for layer in model.layers}
    assert {"Augmentation", "ShiftedImages"} <= layers
    augmentation = model.get_layer("augmentation")
    assert "RandomShift" in {a.__class__.__name__ for a in augmentation.augmenters}
    x = np.load(FIXTURES / "vit_v1_augmented_input.npy")
    expected = np.load(FIXTURES / "vit_v1_augmented_output.npy")
    got = keras.ops.convert_to_numpy(model(x, training=False))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.large
def test_v1_transformer_run_evaluates_exports_and_predicts(transformer_run, tmp_path):
    code, out, err = run_main("evaluate", transformer_run, "--beam-size", 2, "--json")
    assert code == 0, err
    metrics = json.loads(out)
    assert metrics["num_examples"] == 8
    assert 0 <= metrics["beam"]["bleu"] <= 100
    code, _, err = run_main("export", transformer_run, "--to", tmp_path / "saved")
    assert code == 0, err
    assert (tmp_path / "saved/1/saved_model.pb").is_file()
    code, out, err = run_main("predict", transformer_run, "elf", "--beam-size", 1,
                              "--json")
    assert code == 0, err
    assert json.loads(out)[0]["input"] == "elf"


@pytest.mark.large
def test_v1_transformer_run_resumes_at_its_second_epoch(transformer_run):
    code, out, err = run_main("train", "transformer-tiny", "--out", transformer_run)
    assert code == 0, err
    assert "resumed from epoch 1" in out
    summary = json.loads((transformer_run / "summary.json").read_text())
    assert summary["epochs"] == 2 and summary["resumed_from_epoch"] == 1
    lines = (transformer_run / "history.csv").read_text().splitlines()
    assert [int(line.split(",")[0]) for line in lines[1:]] == [0, 1]
    assert not (transformer_run / "backup").exists()


def test_v1_transformer_run_refuses_a_conflicting_resume(transformer_run):
    code, _, err = run_main("train", "transformer-tiny", "--out", transformer_run,
                            "--epochs", 3)
    assert code == 2
    assert "epochs=3 (saved: 2)" in err


def test_v1_vit_run_evaluates_exports_and_refuses_to_train_again(vit_run, tmp_path):
    code, out, err = run_main("evaluate", vit_run, "--json")
    assert code == 0, err
    assert 0 <= json.loads(out)["accuracy"] <= 1
    code, _, err = run_main("export", vit_run, "--to", tmp_path / "saved")
    assert code == 0, err
    assert (tmp_path / "saved/1/saved_model.pb").is_file()
    code, _, err = run_main("train", "vit-tiny", "--out", vit_run)
    assert code == 2
    assert "finished run" in err


@pytest.mark.parametrize("family", ["transformer", "seq2seq", "convs2s"])
def test_v2_keras_file_loads_and_gives_the_same_outputs(family):
    model = keras.saving.load_model(FIXTURES / f"{family}_v2.keras", compile=False)
    with np.load(FIXTURES / f"{family}_v2_input.npz") as arrays:
        x = dict(arrays)
    expected = np.load(FIXTURES / f"{family}_v2_output.npy")
    got = keras.ops.convert_to_numpy(model(x, training=False))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_v2_run_configs_keep_their_per_variable_clipping(v2_run):
    """The v2 runs' configs hold `clipnorm` (Keras' per-variable clipping; the recipes clip
    the global norm since, `global_clipnorm`): the model they resume with clips as they
    trained."""
    name, run = v2_run
    saved = json.loads((run / "config.json").read_text())["model_config"]
    assert saved["clipnorm"] == 1.0 and "global_clipnorm" not in saved
    config = zoo.config(name, **saved)
    assert config.clipnorm == 1.0 and config.global_clipnorm is None
    optimizer = zoo.get(name, **saved).optimizer
    assert optimizer.clipnorm == 1.0 and optimizer.global_clipnorm is None


@pytest.mark.large
def test_v2_run_evaluates_exports_and_predicts_as_its_saved_model(v2_run, tmp_path):
    _, run = v2_run
    code, out, err = run_main("evaluate", run, "--beam-size", 2, "--json")
    assert code == 0, err
    metrics = json.loads(out)
    assert metrics["num_examples"] == 8
    assert 0 <= metrics["beam"]["bleu"] <= 100
    code, out, err = run_main("predict", run, "elf", "dreiundzwanzig",
                              "--beam-size", 1, "--json")
    assert code == 0, err
    from_run = json.loads(out)
    assert [row["input"] for row in from_run] == ["elf", "dreiundzwanzig"]
    code, _, err = run_main("export", run, "--to", tmp_path / "saved")
    assert code == 0, err
    code, out, err = run_main("predict", tmp_path / "saved/1", "elf", "dreiundzwanzig",
                              "--beam-size", 1, "--json")
    assert code == 0, err
    assert [row["translation"] for row in json.loads(out)] == [row["translation"] for row in from_run]


@pytest.mark.large
def test_v2_run_resumes_at_its_second_epoch(v2_run):
    name, run = v2_run
    first_epoch = (run / "history.csv").read_text().splitlines()[:2]
    code, out, err = run_main("train", name, "--out", run)
    assert code == 0, err
    assert "resumed from epoch 1" in out
    summary = json.loads((run / "summary.json").read_text())
    assert summary["epochs"] == 2 and summary["resumed_from_epoch"] == 1
    lines = (run / "history.csv").read_text().splitlines()
    assert lines[:2] == first_epoch  # the old run's row, kept as it was
    assert [int(line.split(",")[0]) for line in lines[1:]] == [0, 1]
    assert not (run / "backup").exists()
