"""`zoo export --format litert|onnx|openvino` (`zoo.export.formats`) without the deploy extra:
the refusals, the missing-package line, and a LiteRT export (TensorFlow's own converter)
checked against the model with TensorFlow's LiteRT interpreter. The runtimes' parity checks
are tests/test_export_deploy.py's (`make test-deploy`)."""

import json
import pathlib
import warnings

import missing_modules
import numpy as np
import pytest
import tensorflow as tf

import zoo
from zoo.errors import ZooError
from zoo.export import formats, runtimes

from zoo_cli import run_main

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
TRANSLATION_RUNS = ("run_v1_transformer", "run_v2_seq2seq", "run_v2_convs2s")


def tiny_vit():
    return zoo.get("vit-tiny", compile=False, image_size=8, channels=3, patch_size=4,
                   num_layers=1, hidden_dim=16, num_heads=2, mlp_dim=32, num_classes=4)


@pytest.mark.parametrize("run", TRANSLATION_RUNS)
@pytest.mark.parametrize("format_", tuple(formats.FORMATS))
def test_translation_runs_are_refused_in_one_line(run, format_, tmp_path):
    code, out, err = run_main("export", FIXTURES / run, "--format", format_, "--to", tmp_path / "out")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"zoo export: error: --format {format_} is for ViT runs")
    assert "exported as a SavedModel" in err and not (tmp_path / "out").exists()


def test_the_python_api_refuses_what_a_format_cannot_hold(tmp_path):
    transformer = zoo.get("transformer-tiny", compile=False, num_encoder_layers=1,
                          num_decoder_layers=1, d_model=16, num_heads=2, intermediate_dim=32,
                          vocabulary_size=50, max_length=8)
    with pytest.raises(ZooError, match="format='onnx' is for ViT models; a 'transformer' model"):
        zoo.export(transformer, tmp_path / "t", format="onnx")
    vit = tiny_vit()
    for options, message in (
        (dict(format="tflite"), "`format` must be one of"),
        (dict(format="onnx", jit_compile=True), "jit_compile is for SavedModels"),
        (dict(format="openvino", quantize="int8"), "OpenVINO's int8 needs NNCF"),
    ):
        with pytest.raises(ZooError, match=message):
            zoo.export(vit, tmp_path / "v", **options)
    assert not (tmp_path / "t").exists() and not (tmp_path / "v").exists()


def test_a_missing_converter_says_how_to_install_it(monkeypatch, tmp_path):
    missing_modules.hide(monkeypatch, "tf2onnx")
    with pytest.raises(ZooError) as raised:
        zoo.export(tiny_vit(), tmp_path / "onnx", format="onnx")
    assert "needs tf2onnx, which is not installed: pip install -e '.[deploy]'" in str(raised.value)
    assert "make test-deploy" in str(raised.value) and not (tmp_path / "onnx").exists()


@pytest.mark.large
def test_litert_export_layout_metadata_and_outputs(tmp_path):
    """The CLI on the committed ViT run: a version directory with model.tflite and its
    metadata, uint8 in and the SavedModel's probabilities out (TensorFlow's interpreter), one
    format per root, and `zoo predict`'s resolution of the root."""
    run = FIXTURES / "run_v1_vit"
    code, out, err = run_main("export", run, "--format", "litert", "--to", tmp_path / "litert")
    assert code == 0, err[-3000:]
    version = tmp_path / "litert" / "1"
    assert f"model.tflite written to {version}" in out
    assert sorted(p.name for p in version.iterdir()) == ["assets.extra", "model.tflite"]
    assert [p.name for p in (tmp_path / "litert").iterdir()] == ["1"]  # no temporary left
    metadata = json.loads((version / "assets.extra" / "zoo_export.json").read_text())
    config = json.loads((run / "config.json").read_text())
    assert metadata["format"] == "litert" and metadata["version"] == 1
    assert metadata["class_names"] == config["data"]["class_names"]
    assert metadata["image_shape"] == [8, 8, 1] and metadata["quantization"] is None
    assert metadata["inputs"] == {"images": "uint8 (B, 8, 8, 1)"}
    assert metadata["preprocessing"]["scale"] == pytest.approx(1 / 255)
    assert runtimes.resolve(tmp_path / "litert") == version

    code, _, err = run_main("export", run, "--to", tmp_path / "litert")  # a SavedModel there
    assert code == 2 and "holds versions of another format (1: litert)" in err
    code, _, err = run_main("export", run, "--to", tmp_path / "saved")
    assert code == 0, err
    assert runtimes.resolve(tmp_path / "saved") is None  # zoo predict's SavedModel path

    if not hasattr(tf.lite, "Interpreter"):
        pytest.skip("this TensorFlow build has no tf.lite.Interpreter to run the .tflite file; "
                    "make test-deploy checks its outputs with LiteRT")
    images = np.random.default_rng(0).integers(0, 256, (5, 8, 8, 1), dtype=np.uint8)
    signature = tf.saved_model.load(str(tmp_path / "saved" / "1")).signatures["serving_default"]
    expected = signature(images=tf.constant(images))["probabilities"].numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its deprecation in favour of ai-edge-litert
        runner = tf.lite.Interpreter(model_path=str(version / "model.tflite")).get_signature_runner()
    np.testing.assert_allclose(runner(images=images)["probabilities"], expected, atol=1e-5)
