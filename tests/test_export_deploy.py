"""The ViT's LiteRT, ONNX and OpenVINO exports in their own runtimes (issue #51): probabilities
equal to the SavedModel's within 1e-4 on 256 test images of a trained vit-tiny run, `zoo
predict` answering as for the SavedModel, int8 where the format has it, and the manual's
loading code (saved_models/README.md) in a process without the zoo.

Needs the `deploy` extra, and runs under `make test-deploy` (which installs it and sets
ZOO_DEPLOY_TESTS=1); `make test` skips it.
"""

import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import PIL.Image
import pytest
import tensorflow as tf

from zoo.export import formats, runtimes

from fashion_files import write_fashion_idx
from zoo_cli import run_main

PACKAGES = {"ai_edge_litert": "ai-edge-litert", "onnxruntime": "onnxruntime",
            "openvino": "openvino", "tf2onnx": "tf2onnx", "onnx": "onnx"}
MISSING = [package for module, package in PACKAGES.items() if importlib.util.find_spec(module) is None]
pytestmark = [
    pytest.mark.skipif(os.environ.get("ZOO_DEPLOY_TESTS") != "1", reason=(
        "the LiteRT, ONNX and OpenVINO parity checks run under `make test-deploy`, which "
        "installs the optional deploy extra (pip install -e '.[deploy]') and sets "
        "ZOO_DEPLOY_TESTS=1")),
    pytest.mark.skipif(bool(MISSING), reason=(
        f"needs the optional deploy extra ({', '.join(MISSING)} missing): make test-deploy, or "
        "pip install -e '.[deploy]'")),
    pytest.mark.slow,
]
TOLERANCE = 1e-4
TEST_IMAGES = 256
FORMATS = tuple(formats.FORMATS)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """vit-tiny trained 4 steps on tiny Fashion-MNIST files with 256 test images, its
    SavedModel and every format exported by `zoo export`: (run, exports, test images)."""
    root = tmp_path_factory.mktemp("deploy")
    arrays = write_fashion_idx(root / "fm", num_test=TEST_IMAGES)
    code, _, err = run_main(
        "train", "vit-tiny", "--data", "fashion-mnist", "--data-dir", root / "fm",
        "--out", root / "run", "--epochs", "1", "--max-steps", "4", "--batch-size", "32",
        "--val-ratio", "0.0", "--set", "num_layers=1", "--set", "hidden_dim=32",
        "--set", "mlp_dim=64", "--set", "patch_size=7")
    assert code == 0, err[-3000:]
    exports = {}
    for format_, quantize in (("savedmodel", None), *((f, None) for f in FORMATS),
                              ("litert", "int8"), ("onnx", "int8")):
        name = format_ + ("-int8" if quantize else "")
        options = ["--format", format_] + (["--quantize", quantize] if quantize else [])
        code, _, err = run_main("export", root / "run", "--to", root / name, *options)
        assert code == 0, err[-3000:]
        exports[name] = root / name / "1"
    images = arrays["t10k-images-idx3-ubyte"][..., None]  # (256, 28, 28, 1) uint8
    return root / "run", exports, images


def saved_model_probabilities(trained):
    _, exports, images = trained
    signature = tf.saved_model.load(str(exports["savedmodel"])).signatures["serving_default"]
    return signature(images=tf.constant(images))["probabilities"].numpy()


@pytest.mark.parametrize("format_", FORMATS)
def test_each_format_gives_the_saved_models_probabilities(trained, format_):
    _, exports, images = trained
    deployed = runtimes.load(exports[format_].parent)  # the root: its newest version
    assert deployed.path == exports[format_] and deployed.format == format_
    expected = saved_model_probabilities(trained)
    got = np.concatenate([deployed.classify(images[i:i + 100]) for i in range(0, TEST_IMAGES, 100)])
    assert got.shape == expected.shape == (TEST_IMAGES, 10) and got.dtype == np.float32
    assert np.abs(got - expected).max() <= TOLERANCE
    assert deployed.classify(images[:1]).shape == (1, 10)  # any batch size
    assert deployed.classify(images[:0]).shape == (0, 10)  # as the SavedModel (zoo.export.runtimes)


def int8_weights(path):
    """The int8 weight tensors of a LiteRT or ONNX file, by name."""
    if path.suffix == ".onnx":
        import onnx

        graph = onnx.load(str(path)).graph
        return {t.name for t in graph.initializer if t.data_type == onnx.TensorProto.INT8}
    from ai_edge_litert.interpreter import Interpreter

    details = Interpreter(model_path=str(path)).get_tensor_details()
    return {d["name"] for d in details if d["dtype"] == np.int8}


@pytest.mark.parametrize("format_", ["litert", "onnx"])
def test_int8_exports_hold_int8_weights_and_stay_close(trained, format_):
    _, exports, images = trained
    model_file = formats.FORMATS[format_].files[0]
    assert int8_weights(exports[format_] / model_file) == set()
    # The block's projections and feed-forward kernels (LiteRT leaves tensors under 1,024 values
    # in float32: hidden_dim 32 and mlp_dim 64 make them large enough).
    assert len(int8_weights(exports[f"{format_}-int8"] / model_file)) >= 3
    metadata = json.loads((exports[f"{format_}-int8"] / "assets.extra" / "zoo_export.json").read_text())
    assert metadata["quantization"] == "int8" and "int8" in metadata["quantization_scheme"]
    got = runtimes.load(exports[f"{format_}-int8"]).classify(images)
    assert np.abs(got - saved_model_probabilities(trained)).max() < 0.05


def test_zoo_predict_answers_each_format_as_the_saved_model(trained, tmp_path):
    _, exports, images = trained
    paths = []
    for index in range(3):
        paths.append(tmp_path / f"{index}.png")
        PIL.Image.fromarray(images[index, ..., 0]).save(paths[-1])
    # Another size, in colour: decoded and resized as the SavedModel does, then rounded to
    # uint8, the formats' input (the SavedModel feeds the resized floats to the model).
    paths.append(tmp_path / "rgb.png")
    PIL.Image.fromarray(images[3:6, ..., 0].transpose(1, 2, 0).repeat(2, 0)).save(paths[-1])
    (tmp_path / "text.png").write_text("not an image")
    paths += [tmp_path / "text.png", tmp_path / "missing.png"]
    answers = {}
    for name in ("savedmodel", *FORMATS):
        code, out, err = run_main("predict", exports[name].parent, *paths, "--top-k", "4", "--json")
        assert code == 1, err  # two inputs failed, each on a line of its own
        assert err.count("zoo predict: error:") == 2
        answers[name] = json.loads(out)
    for name in FORMATS:
        for got, expected in zip(answers[name], answers["savedmodel"]):
            assert got.keys() == expected.keys() and got["input"] == expected["input"]
            if "error" in expected:
                assert got["error"] == expected["error"]
                continue
            resized = got["input"].endswith("rgb.png")
            got, expected = dict(got["classes"]), dict(expected["classes"])
            if not resized:
                assert list(got) == list(expected)  # the same classes, in the same order
            for name in set(got) & set(expected):
                assert abs(got[name] - expected[name]) <= (2e-3 if resized else TOLERANCE)


USER_CODE = """
import json, sys
import numpy as np
images = np.load(sys.argv[1])
exports = json.loads(sys.argv[2])
out = {}

from ai_edge_litert.interpreter import Interpreter
runner = Interpreter(model_path=exports["litert"] + "/model.tflite").get_signature_runner()
out["litert"] = runner(images=images)["probabilities"]

import onnxruntime
session = onnxruntime.InferenceSession(exports["onnx"] + "/model.onnx",
                                       providers=["CPUExecutionProvider"])
out["onnx"] = session.run(["probabilities"], {"images": images})[0]

import openvino
compiled = openvino.Core().compile_model(exports["openvino"] + "/model.xml", "CPU",
                                         {"INFERENCE_PRECISION_HINT": "f32"})
out["openvino"] = compiled({"images": images})["probabilities"]

assert not [m for m in sys.modules if m.split(".")[0] in ("zoo", "keras", "tensorflow")]
np.savez(sys.argv[3], **out)
"""


def test_the_manuals_loading_code_runs_without_the_zoo(trained, tmp_path):
    """saved_models/README.md's five lines per format, in a process that imports neither
    the zoo nor Keras nor TensorFlow."""
    _, exports, images = trained
    np.save(tmp_path / "images.npy", images[:16])
    paths = json.dumps({name: str(exports[name]) for name in FORMATS})
    done = subprocess.run([sys.executable, "-c", USER_CODE, tmp_path / "images.npy", paths,
                           tmp_path / "out.npz"], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    expected = saved_model_probabilities(trained)[:16]
    for name, got in np.load(tmp_path / "out.npz").items():
        assert np.abs(got - expected).max() <= TOLERANCE, name


def test_versions_and_one_format_per_root(trained):
    run, exports, _ = trained
    root = exports["onnx"].parent
    code, out, err = run_main("export", run, "--to", root, "--format", "onnx")
    assert code == 0 and (root / "2" / "model.onnx").is_file(), err
    assert runtimes.resolve(root) == root / "2"
    code, _, err = run_main("export", run, "--to", root, "--format", "openvino")
    assert code == 2 and "holds versions of another format (1: onnx, 2: onnx)" in err
    assert sorted(p.name for p in pathlib.Path(root).iterdir()) == ["1", "2"]
