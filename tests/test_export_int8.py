"""`zoo export --quantize int8` (`zoo.export.int8`): the SavedModel holds int8 weights and
serves what the quantized model computes in process, close to the float model."""

import json
import pathlib

import numpy as np
import pytest
import tensorflow as tf

import zoo
from zoo import decode
from zoo.errors import ZooError
from zoo.export import int8
from zoo.runs.evaluation import evaluate
from zoo.runs.rundir import load_run
from zoo.text.special import END_ID

from zoo_cli import run_main

TEXTS = ["three hundred and twelve", "nine", "forty one thousand and six"]


def variable_dtypes(export_path):
    reader = tf.train.load_checkpoint(str(export_path / "variables" / "variables"))
    return {name: dtype for name, dtype in reader.get_variable_to_dtype_map().items()
            if not name.startswith("_CHECKPOINTABLE_OBJECT_GRAPH")}


def int8_share(export_path):
    dtypes = variable_dtypes(export_path)
    return sum(dtype == tf.int8 for dtype in dtypes.values()) / len(dtypes)


def source_ids(tokenizer, texts, max_length):
    rows = [ids[: max_length - 1] + [END_ID] for ids in tokenizer.tokenize(texts).to_list()]
    source = np.zeros((len(rows), max(len(r) for r in rows)), np.int32)
    for index, row in enumerate(rows):
        source[index, : len(row)] = row
    return source


@pytest.mark.large
def test_int8_translation_export_serves_the_quantized_model(numbers_run, tmp_path):
    code, _, err = run_main("export", numbers_run.run_dir, "--to", tmp_path / "int8",
                            "--quantize", "int8")
    assert code == 0, err[-3000:]
    path = tmp_path / "int8" / "1"
    metadata = json.loads((path / "assets.extra" / "zoo_export.json").read_text())
    assert metadata["quantization"] == "int8"
    assert int8_share(path) > 0.2  # every attention and feed-forward kernel, the token table

    run = load_run(numbers_run.run_dir, "best")
    weights = [w.dtype for w in run.model.weights]
    quantized = int8.quantized_copy(run.model)
    assert [w.dtype for w in run.model.weights] == weights  # the run's model is untouched
    max_length = run.max_length
    source = source_ids(run.source_tokenizer, TEXTS, max_length)
    expected = decode.greedy_decode(quantized, source, max_length=max_length).numpy()
    served = tf.saved_model.load(str(path)).signatures["greedy"](text=tf.constant(TEXTS))
    tokens = served["tokens"].numpy()
    np.testing.assert_array_equal(tokens[:, : expected.shape[1]], expected)
    assert not tokens[:, expected.shape[1]:].any()
    # XLA's decoding (int8 tied logits as `(E_q x_qᵀ)ᵀ`) gives the same tokens
    xla = decode.greedy_decode(quantized, source, max_length=max_length, jit_compile=True)
    np.testing.assert_array_equal(xla.numpy(), expected)


@pytest.mark.large
def test_int8_vit_export_is_close_to_the_float_model_and_runs_under_xla(tmp_path):
    vit = zoo.get("vit-tiny", compile=False, image_size=8, channels=3, patch_size=4, num_layers=1,
                  num_classes=4)
    images = np.random.default_rng(0).integers(0, 256, (5, 8, 8, 3)).astype(np.uint8)
    floats = tf.nn.softmax(vit(images.astype(np.float32), training=False)).numpy()
    quantized = tf.nn.softmax(int8.quantized_copy(vit)(images.astype(np.float32))).numpy()
    assert 0 < np.abs(quantized - floats).max() < 0.02
    for jit_compile in (False, True):
        path = zoo.export(vit, tmp_path / f"jit{jit_compile}", quantize="int8", jit_compile=jit_compile)
        assert int8_share(path) > 0.2
        outputs = tf.saved_model.load(str(path)).signatures["serving_default"](
            images=tf.constant(images))
        np.testing.assert_allclose(outputs["probabilities"].numpy(), quantized, atol=1e-5)


@pytest.mark.large
def test_zoo_import_quantizes_an_opus_mt_folder(tmp_path):
    folder = pathlib.Path(__file__).parent / "fixtures" / "marian_tiny"
    references = json.loads((folder / "references.json").read_text())
    code, _, err = run_main("import", folder, "--to", tmp_path / "opus",
                            "--max-length", references["max_new_tokens"], "--quantize", "int8")
    assert code == 0, err[-3000:]
    path = tmp_path / "opus" / "1"
    assert json.loads((path / "assets.extra" / "zoo_export.json").read_text())["quantization"] == "int8"
    assert int8_share(path) > 0.2
    served = tf.saved_model.load(str(path)).signatures["serving_default"](
        text=tf.constant(references["sentences"][:2]))
    assert served["tokens"].shape[0] == 2


@pytest.mark.large
def test_bench_int8_quality_scores_what_zoo_evaluate_scores(numbers_run, run_benchmark):
    """The float export's greedy BLEU in the benchmark's table is `zoo evaluate`'s greedy BLEU
    on the same test pairs (the exports decode what in-process decoding gives)."""
    out = run_benchmark("bench_int8_quality.py", numbers_run.run_dir, "--limit", "8",
                        "--signatures", "greedy")
    rows = {tuple(cell.strip() for cell in line.split("|")[1:3]): line.split("|")[3].strip()
            for line in out.splitlines() if line.startswith("| greedy |")}
    assert set(rows) == {("greedy", "float32"), ("greedy", "int8")}, out
    expected = evaluate(numbers_run.run_dir, beam_size=1, limit=8, quiet=True, write=False)
    assert float(rows[("greedy", "float32")]) == pytest.approx(expected["greedy"]["bleu"], abs=0.005)


@pytest.mark.parametrize(("mode", "family", "message"), [
    ("int4", "transformer", "must be one of"),
    ("int8", "seq2seq", "Transformer and ViT"),
    ("int8", "convs2s", "Transformer and ViT"),
])
def test_quantize_refuses_what_it_cannot_do(mode, family, message):
    with pytest.raises(ZooError, match=message):
        int8.check_quantize(mode, family)
