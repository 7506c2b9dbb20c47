"""The deployment formats in their own runtimes (issue #51).

The ViT's LiteRT, ONNX and OpenVINO exports: probabilities equal to the SavedModel's within 1e-4
on 256 test images of a trained vit-tiny run, `zoo predict` answering as for the SavedModel,
int8 where the format has it, and the manual's loading code (saved_models/README.md) in a
process without the zoo. A Transformer's CTranslate2 export: token ids equal to the zoo's own
decoding (benchmarks/ctranslate2_parity.py on a small trained run), to the `--jit` export of the
imported OPUS-MT fixture, `zoo predict` as for the SavedModel, int8, and the manual's code.

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

from zoo.export import ctranslate2_runtime, formats, runtimes

from fashion_files import write_fashion_idx
from zoo_cli import run_main

PACKAGES = {"ai_edge_litert": "ai-edge-litert", "onnxruntime": "onnxruntime",
            "openvino": "openvino", "tf2onnx": "tf2onnx", "onnx": "onnx"}
MISSING = [package for module, package in PACKAGES.items() if importlib.util.find_spec(module) is None]
pytestmark = [
    pytest.mark.skipif(os.environ.get("ZOO_DEPLOY_TESTS") != "1", reason=(
        "the LiteRT, ONNX, OpenVINO and CTranslate2 parity checks run under `make test-deploy`, "
        "which installs the optional deploy extra (pip install -e '.[deploy]') and sets "
        "ZOO_DEPLOY_TESTS=1")),
    pytest.mark.large,
]
needs_vit_runtimes = pytest.mark.skipif(bool(MISSING), reason=(
    f"needs the optional deploy extra ({', '.join(MISSING)} missing): make test-deploy, or "
    "pip install -e '.[deploy]'"))
needs_ctranslate2 = pytest.mark.skipif(importlib.util.find_spec("ctranslate2") is None, reason=(
    "needs ctranslate2, of the optional deploy extra: make test-deploy, or pip install -e "
    "'.[deploy]' (ctranslate2==4.8.*)"))
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


@needs_vit_runtimes
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


@needs_vit_runtimes
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


@needs_vit_runtimes
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


@needs_vit_runtimes
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


@needs_vit_runtimes
def test_versions_and_one_format_per_root(trained):
    run, exports, _ = trained
    root = exports["onnx"].parent
    code, out, err = run_main("export", run, "--to", root, "--format", "onnx")
    assert code == 0 and (root / "2" / "model.onnx").is_file(), err
    assert runtimes.resolve(root) == root / "2"
    code, _, err = run_main("export", run, "--to", root, "--format", "openvino")
    assert code == 2 and "holds versions of another format (1: onnx, 2: onnx)" in err
    assert sorted(p.name for p in pathlib.Path(root).iterdir()) == ["1", "2"]


# === CTranslate2: a Transformer run and the imported OPUS-MT fixture ===

ROOT = pathlib.Path(__file__).resolve().parent.parent
MARIAN = ROOT / "tests" / "fixtures" / "marian_tiny"
SENTENCES = ["three hundred and twelve", "eleven", "forty-two thousand and one", "ninety"]


@pytest.fixture(scope="module")
def translation(tmp_path_factory):
    """transformer-tiny trained briefly on `numbers` (SentencePiece), exported by `zoo export`
    as a SavedModel, as CTranslate2 and as CTranslate2 int8: (run, {name: version directory})."""
    root = tmp_path_factory.mktemp("ct2")
    code, _, err = run_main(
        "train", "transformer-tiny", "--data", "numbers", "--out", root / "run", "--epochs", "3",
        "--train-size", "400", "--test-size", "16", "--set", "num_encoder_layers=1",
        "--set", "num_decoder_layers=1", "--set", "d_model=32", "--set", "num_heads=2",
        "--set", "intermediate_dim=64", "--set", "max_length=24")
    assert code == 0, err[-3000:]
    exports = {}
    for name, options in (("savedmodel", []), ("ctranslate2", ["--format", "ctranslate2"]),
                          ("ctranslate2-int8", ["--format", "ctranslate2", "--quantize", "int8"])):
        code, _, err = run_main("export", root / "run", "--to", root / name, *options)
        assert code == 0, err[-3000:]
        exports[name] = root / name / "1"
    return root / "run", exports


def metadata_of(version):
    return json.loads((version / "assets.extra" / "zoo_export.json").read_text())


@needs_ctranslate2
def test_ctranslate2_export_layout_and_metadata(translation):
    _, exports = translation
    version = exports["ctranslate2"]
    assert sorted(p.name for p in version.iterdir()) == [
        "assets.extra", "config.json", "model.bin", "shared_vocabulary.json", "tokenizer"]
    assert sorted(p.name for p in (version / "tokenizer").iterdir()) == [
        "sentencepiece.model", "tokenizer.json"]
    assert [p.name for p in version.parent.iterdir()] == ["1"]  # no temporary left
    metadata = metadata_of(version)
    assert metadata["format"] == "ctranslate2" and metadata["quantization"] is None
    assert metadata["tokenizer"]["kind"] == "sentencepiece"
    assert metadata["tokenizer"]["sentencepiece_models"]["source"] == "tokenizer/sentencepiece.model"
    assert metadata["special_ids"] == {"pad": 0, "start": 2, "end": 3}
    assert metadata["special_tokens"] == {"pad": "[PAD]", "start": "[START]", "end": "[END]",
                                          "unk": "[UNK]"}
    assert metadata["translate_options"] == {
        "beam_size": 4, "length_penalty": 0.6, "max_input_length": 24, "max_decoding_length": 24,
        "min_decoding_length": 0, "return_end_token": True}
    config = json.loads((version / "config.json").read_text())
    assert config["add_source_eos"] and config["decoder_start_token"] == "[START]"
    # int8: the weights saved as int8 (CTranslate2's `optimize`), about a quarter of the bytes.
    int8 = exports["ctranslate2-int8"]
    assert metadata_of(int8)["quantization"] == "int8"
    assert (int8 / "model.bin").stat().st_size < 0.6 * (version / "model.bin").stat().st_size


@needs_ctranslate2
def test_ctranslate2_ids_equal_the_zoos_own_decoding(translation, tmp_path):
    """benchmarks/ctranslate2_parity.py on the run's held-out sentences: greedy ids equal, beam
    rows equal or apart only by the searches (never by the model), log-probabilities equal."""
    run, _ = translation
    done = subprocess.run(
        [sys.executable, ROOT / "benchmarks" / "ctranslate2_parity.py", "run", run,
         "--sentences", "12", "--int8", "--json", tmp_path / "parity.json"],
        capture_output=True, text=True, timeout=1200, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((tmp_path / "parity.json").read_text())
    float32 = {key: value for key, value in results.items()
               if isinstance(value, dict) and "float32 export" not in key and "int8" not in key}
    assert len(float32) == 3, done.stdout  # greedy, beam, beam against the zoo's with HF's penalty
    for value in float32.values():
        if value["search"] == "greedy":
            assert value["equal"] == value["rows"] == 12, done.stdout
        assert set(value["differ"]) <= {"search", "tie", "padding"}, done.stdout
    assert results["log_prob_max_difference"] < 1e-4, done.stdout
    assert results["sentencepiece_equal"] == 12, done.stdout
    # Saved int8 and int8 when loaded: the same weights, the same ids.
    int8 = {value["search"]: value["equal"] for key, value in results.items()
            if isinstance(value, dict) and "int8 saved" in key}
    at_load = {value["search"]: value["equal"] for key, value in results.items()
               if isinstance(value, dict) and "compute_type int8" in key}
    assert int8 == at_load, done.stdout


@needs_ctranslate2
def test_zoo_predict_prints_for_ctranslate2_what_it_prints_for_the_saved_model(translation):
    _, exports = translation
    answers = {}
    for name in ("savedmodel", "ctranslate2"):
        code, out, err = run_main("predict", exports[name].parent, *SENTENCES, "--beam-size", "1",
                                  "--json")
        assert code == 0, err
        answers[name] = json.loads(out)
    assert answers["ctranslate2"] == answers["savedmodel"]
    code, out, err = run_main("predict", exports["ctranslate2"], *SENTENCES)  # beam 4
    assert code == 0 and out.count("  -> ") == len(SENTENCES), err
    code, _, err = run_main("predict", exports["ctranslate2"], "eleven", "--sample")
    assert code == 2 and "is a CTranslate2 export: --sample is for runs and SavedModels" in err


CT2_USER_CODE = """
import ctranslate2, json, sentencepiece, sys
path, sentences = sys.argv[1], json.loads(sys.argv[2])
options = json.load(open(f"{path}/assets.extra/zoo_export.json"))["translate_options"]
sp = sentencepiece.SentencePieceProcessor(model_file=f"{path}/tokenizer/sentencepiece.model")
results = ctranslate2.Translator(path).translate_batch(sp.encode(sentences, out_type=str), **options)
texts = [sp.decode(result.hypotheses[0]) for result in results]
assert not [m for m in sys.modules if m.split(".")[0] in ("zoo", "keras", "tensorflow")]
print(json.dumps({"texts": texts, "tokens": [r.hypotheses[0] for r in results]}))
"""


@needs_ctranslate2
def test_the_manuals_ctranslate2_code_runs_without_the_zoo(translation, tmp_path):
    """saved_models/README.md's lines: ctranslate2 and sentencepiece, nothing of the zoo."""
    _, exports = translation
    version = exports["ctranslate2"]
    done = subprocess.run([sys.executable, "-c", CT2_USER_CODE, version, json.dumps(SENTENCES)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout)
    exported = ctranslate2_runtime.load(version)
    expected = exported.translate_ids(SENTENCES)
    end = metadata_of(version)["special_tokens"]["end"]
    assert [[exported.target_ids[t] for t in row if t != end] for row in got["tokens"]] == expected
    assert got["texts"] == exported.translate(SENTENCES)  # SentencePiece drops [END] itself


@needs_ctranslate2
def test_the_imported_opus_mt_fixture_decodes_as_its_jit_export(tmp_path):
    """`zoo import --format ctranslate2` of tests/fixtures/marian_tiny: greedy ids equal to the
    `--jit` SavedModel's and transformers' references (beam: benchmarks/ctranslate2_parity.py
    explains its rows)."""
    import tensorflow_text  # noqa: F401 - the SavedModel's tokenizer ops

    references = json.loads((MARIAN / "references.json").read_text())
    sentences = [s for s in references["sentences"] if s]  # CTranslate2 skips an empty source
    from zoo.transformer.weights import marian

    code, _, err = run_main("import", MARIAN, "--to", tmp_path / "ct2", "--format", "ctranslate2")
    assert code == 0, err[-3000:]
    marian.export_folder(MARIAN, tmp_path / "jit", jit_compile=True)  # zoo import, with XLA
    exported = ctranslate2_runtime.load(tmp_path / "ct2")
    signature = tf.saved_model.load(str(tmp_path / "jit" / "1")).signatures["greedy"]
    tokens = signature(text=tf.constant(sentences))["tokens"].numpy()
    ids = metadata_of(exported.path)["special_ids"]
    expected = [[int(t) for t in row[:list(row).index(ids["end"])] if t != ids["pad"]]
                if ids["end"] in row else [int(t) for t in row if t != ids["pad"]]
                for row in tokens]
    assert exported.translate_ids(sentences, beam_size=1) == expected
    greedy = dict(zip(references["sentences"], references["greedy_text"]))
    assert exported.translate(sentences, beam_size=1) == [greedy[s] for s in sentences]


@needs_ctranslate2
def test_ctranslate2_versions_and_one_format_per_root(translation):
    run, exports = translation
    root = exports["ctranslate2"].parent
    code, _, err = run_main("export", run, "--to", root, "--format", "ctranslate2")
    assert code == 0 and (root / "2" / "model.bin").is_file(), err
    assert ctranslate2_runtime.resolve(root) == root / "2"
    code, _, err = run_main("export", run, "--to", root)
    assert code == 2 and "holds versions of another format (1: ctranslate2, 2: ctranslate2)" in err
