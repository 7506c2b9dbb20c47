"""Tests of pretrained ViT weights (`zoo.vit.weights.checkpoint`, `zoo.get(name, weights=PATH)`).

The fixtures in tests/fixtures/vit/ come from timm and transformers
(tools/make_vit_fixtures.py, which also checks that timm's own npz loader and
transformers' `from_pretrained` read its files back): tiny random ViTs (2
layers, width 32, 2 heads, MLP 64, patch 4, 16×16 images, 5 classes) in every
format, their logits on a fixed batch, and timm's position-embedding
resampling. No torch here: our logits must equal theirs within 1e-4.
"""

import dataclasses
import json
import os
import pathlib
import pickle
import shutil
import subprocess
import sys
import textwrap
import warnings
import zipfile

import keras
import numpy as np
import pytest
import tensorflow as tf

import zoo
from zoo import checkpoints as tensor_files
from zoo.vit.weights import checkpoint as vit_checkpoints
from zoo.vit.weights import pretrained as vit_pretrained
from zoo.vit.weights import timm as vit_timm
from zoo.vit.weights.resample import resample_position_embeddings

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "vit"
REFERENCES = np.load(FIXTURES / "references.npz")
TINY = dict(num_layers=2, hidden_dim=32, num_heads=2, mlp_dim=64, patch_size=4)
ATOL = 1e-4
# The timm fixtures have no config.json: their assumed statistics are tested once, below.
pytestmark = pytest.mark.filterwarnings(
    "ignore:.*the input statistics of this timm state dict are not known:UserWarning")


def load(path, **overrides):
    """vit-ti16 at the fixtures' size with the weights at `path` (uncompiled)."""
    return zoo.get("vit-ti16", weights=str(FIXTURES / path), compile=False, **{**TINY, **overrides})


def features(model, images):
    """The head's input `(B, D)`."""
    return keras.Model(model.input, model.get_layer("head").input).predict(images, verbose=0)


# === Parity with timm and transformers ===


@pytest.mark.parametrize(
    "path, reference, overrides",
    [
        ("timm_cls.safetensors", "timm_cls", {}),
        ("timm_cls.pth", "timm_cls", {}),
        ("timm_gap.safetensors", "timm_gap", {}),  # no class token, norm after pooling
        ("google_cls.npz", "timm_cls", {}),  # vit_jax naming
        ("google_gap_scanned.npz", "google_gap_scanned", {}),  # big_vision, scanned blocks
        ("hf_classifier", "hf_classifier", {}),  # the Hub's names
        ("hf_classifier/model.safetensors", "hf_classifier", {}),  # the file alone
        ("timm_cls.safetensors", "timm_cls_32", dict(image_size=32)),  # resampled positions
    ],
)
def test_logits_equal_the_reference_implementation(path, reference, overrides):
    model = load(path, **overrides)
    images = REFERENCES["images_32" if overrides else "images"]
    logits = model.predict(images, verbose=0)
    np.testing.assert_allclose(logits, REFERENCES[reference], atol=ATOL, rtol=0)


def test_hugging_face_model_with_tanh_gelu_and_imagenet_statistics():
    with pytest.warns(UserWarning, match="no head; vit-ti16 gets a new head for num_classes=1000"):
        model = load("hf_model")
    np.testing.assert_allclose(
        features(model, REFERENCES["images"]), REFERENCES["hf_model_features"], atol=ATOL, rtol=0
    )
    # The fixture is sensitive to the GELU kind: the exact one misses by more than ATOL.
    with pytest.warns(UserWarning):
        exact = load("hf_model", activation="gelu")
    assert np.abs(features(exact, REFERENCES["images"]) - REFERENCES["hf_model_features"]).max() > 2 * ATOL


def test_fields_the_files_imply():
    fields = {path: vit_pretrained.read(FIXTURES / path).fields for path in (
        "timm_gap.safetensors", "google_cls.npz", "hf_classifier", "hf_model")}
    assert fields["timm_gap.safetensors"] == dict(
        pooling="gap", image_size=16, num_classes=5, layer_norm_epsilon=1e-6, activation="gelu",
        pooled_norm=True, pixel_mean=0.5, pixel_std=0.5)
    assert fields["google_cls.npz"]["pooling"] == "cls"
    assert not fields["google_cls.npz"]["pooled_norm"]
    assert fields["hf_classifier"]["layer_norm_epsilon"] == 1e-12
    assert fields["hf_model"]["activation"] == "gelu_tanh"
    assert fields["hf_model"]["pixel_mean"] == (0.485, 0.456, 0.406)


# === A timm file's input statistics: from its folder's config.json, else assumed with a warning ===

IMAGENET = dict(pixel_mean=(0.485, 0.456, 0.406), pixel_std=(0.229, 0.224, 0.225))


def timm_hub_folder(tmp_path, config):
    """timm_cls.safetensors as `model.safetensors` of a folder with `config` as its config.json."""
    folder = tmp_path / "timm_hub"
    folder.mkdir()
    shutil.copy(FIXTURES / "timm_cls.safetensors", folder / "model.safetensors")
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config))
    return folder / "model.safetensors"


@pytest.mark.parametrize("config, statistics", [
    # What timm's save_for_hf writes: the statistics in pretrained_cfg.
    ({"architecture": "vit_tiny_patch16_224", "num_classes": 5, "num_features": 32,
      "pretrained_cfg": {"input_size": [3, 16, 16], "mean": list(IMAGENET["pixel_mean"]),
                         "std": list(IMAGENET["pixel_std"])}}, IMAGENET),
    # Older timm: one flat dict.
    ({"architecture": "vit_tiny_patch16_224", "num_classes": 5, "mean": [0.5, 0.5, 0.5],
      "std": [0.5, 0.5, 0.5]}, dict(pixel_mean=0.5, pixel_std=0.5)),
])
def test_timm_statistics_come_from_the_config_json_next_to_the_file(tmp_path, config, statistics):
    path = timm_hub_folder(tmp_path, config)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the file's folder says them: no warning
        assert vit_pretrained.read(path).fields["pixel_mean"] == statistics["pixel_mean"]
        model = zoo.get("vit-ti16", weights=str(path), compile=False, **TINY)
    images = REFERENCES["images"].astype(np.float64)
    # The reference took (x/255 - 0.5)/0.5: these statistics are that on these pixels.
    mean, std = (np.asarray(statistics[k]) for k in ("pixel_mean", "pixel_std"))
    pixels = 255 * (0.5 * (images / 255 - mean) / std + 0.5)
    np.testing.assert_allclose(model.predict(REFERENCES["images"], verbose=0),
                               load("timm_cls.safetensors", pixel_mean=0.5, pixel_std=0.5)
                               .predict(pixels.astype(np.float32), verbose=0), atol=ATOL, rtol=0)


def test_timm_statistics_not_said_are_assumed_with_one_warning(tmp_path):
    with pytest.warns(UserWarning) as record:
        model = zoo.get("vit-ti16", weights=str(FIXTURES / "timm_cls.safetensors"), compile=False,
                        **TINY)
    messages = [str(w.message) for w in record if "pixel_mean" in str(w.message)]
    assert len(messages) == 1, messages
    assert messages[0].endswith(
        "timm_cls.safetensors: the input statistics of this timm state dict are not known (no "
        "config.json next to it says them); assuming pixel_mean=0.5, pixel_std=0.5 (inputs scaled "
        "to [-1, 1], as timm's augreg and Google's weights). For weights trained otherwise give "
        "them: zoo.get(..., pixel_mean=..., pixel_std=...), e.g. ImageNet's "
        "pixel_mean=(0.485, 0.456, 0.406), pixel_std=(0.229, 0.224, 0.225).")
    np.testing.assert_allclose(model.predict(REFERENCES["images"], verbose=0),
                               REFERENCES["timm_cls"], atol=ATOL, rtol=0)
    path = timm_hub_folder(tmp_path, {"model_type": "vit"})  # not timm's config.json
    with pytest.warns(UserWarning, match=r"timm_hub/config\.json has no timm pretrained_cfg with "
                                         r"mean and std\); assuming pixel_mean=0\.5"):
        assert zoo.config("vit-ti16", weights=str(path), **TINY).pixel_std == 0.5
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # given by the user: nothing assumed, no warning
        config = zoo.config("vit-ti16", weights=str(path), **TINY, **IMAGENET)
    assert (config.pixel_mean, config.pixel_std) == (IMAGENET["pixel_mean"], IMAGENET["pixel_std"])


def test_timm_statistics_that_are_not_numbers_are_refused(tmp_path):
    path = timm_hub_folder(tmp_path, {"pretrained_cfg": {"mean": "imagenet", "std": [0.5]}})
    with pytest.raises(ValueError) as info:
        zoo.config("vit-ti16", weights=str(path), **TINY)
    assert str(info.value).endswith("timm_hub/config.json: mean='imagenet' is not a number or a "
                                    "list of numbers.")


@pytest.mark.parametrize("size, kind", [(3, "aa"), (8, "aa"), (3, "plain"), (8, "plain")])
def test_position_resampling_equals_timm(size, kind):
    got = resample_position_embeddings(
        REFERENCES["resample_table"], size, prefix_tokens=1, antialias=kind == "aa"
    )
    np.testing.assert_allclose(got, REFERENCES[f"resample_{size}_{kind}"], atol=1e-5, rtol=0)


def write_safetensors(path, tensors, dtype):
    """A minimal safetensors writer (the format's spec), for half-precision files."""
    import json
    import struct

    header, chunks, offset = {}, [], 0
    for name, array in tensors.items():
        if dtype == "BF16":  # keep the top 16 bits of float32
            data = (np.asarray(array, "<f4").view("<u4") >> 16).astype("<u2").tobytes()
        elif dtype == "F32":
            data = np.asarray(array, "<f4").tobytes()
        else:
            data = np.asarray(array, "<f2").tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    encoded = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(encoded)) + encoded + b"".join(chunks))


@pytest.mark.parametrize("dtype, numpy_rounding", [("F16", "float16"), ("BF16", None)])
def test_half_precision_safetensors_are_read(tmp_path, dtype, numpy_rounding):
    tensors = tensor_files.read_safetensors(FIXTURES / "timm_cls.safetensors")
    write_safetensors(tmp_path / "half.safetensors", tensors, dtype)
    half = tensor_files.read_safetensors(tmp_path / "half.safetensors")
    for name, array in tensors.items():
        assert half[name].dtype == (np.float16 if dtype == "F16" else np.float32)  # BF16 widened
        assert half[name].shape == array.shape
        if numpy_rounding:
            np.testing.assert_array_equal(half[name], array.astype(numpy_rounding))
        else:  # bfloat16 truncation: 8 bits of mantissa
            np.testing.assert_allclose(half[name], array, rtol=2**-7, atol=0)
    logits = zoo.get("vit-ti16", weights=str(tmp_path / "half.safetensors"), compile=False,
                     **TINY).predict(REFERENCES["images"], verbose=0)
    np.testing.assert_allclose(logits, REFERENCES["timm_cls"], atol=0.2)


def test_a_file_without_query_key_value_biases_gets_zero_biases(tmp_path):
    tensors = tensor_files.read_safetensors(FIXTURES / "timm_cls.safetensors")
    zeroed = dict(tensors)
    without = {k: v for k, v in tensors.items() if not k.endswith("attn.qkv.bias")}  # qkv_bias=False
    for name in tensors:
        if name.endswith("attn.qkv.bias"):
            zeroed[name] = np.zeros_like(tensors[name])
    write_safetensors(tmp_path / "without.safetensors", without, "F32")
    write_safetensors(tmp_path / "zeroed.safetensors", zeroed, "F32")
    models = [zoo.get("vit-ti16", weights=str(tmp_path / f), compile=False, **TINY)
              for f in ("without.safetensors", "zeroed.safetensors")]
    bias = models[0].get_layer("encoder_block_0").self_attention.query_bias
    np.testing.assert_array_equal(bias.numpy(), 0.0)
    np.testing.assert_array_equal(*(m.predict(REFERENCES["images"], verbose=0) for m in models))


def test_pth_reader_equals_safetensors_reader():
    pth = tensor_files.read_torch(FIXTURES / "timm_cls.pth")
    safetensors = tensor_files.read_safetensors(FIXTURES / "timm_cls.safetensors")
    assert sorted(pth) == sorted(safetensors)
    for name in pth:
        np.testing.assert_array_equal(pth[name], safetensors[name])


# === Fine-tuning ===


def test_new_class_count_makes_a_new_head_with_a_warning():
    with pytest.warns(UserWarning, match=r"a head for 5 classes; vit-ti16 gets a new head for "
                                         r"num_classes=3, randomly initialised"):
        model = load("timm_cls.safetensors", num_classes=3)
    assert model.output_shape == (None, 3)
    reference = load("timm_cls.safetensors")
    np.testing.assert_allclose(features(model, REFERENCES["images"]),
                               features(reference, REFERENCES["images"]), atol=1e-6)


def test_config_and_describe_with_weights_are_what_get_builds():
    path = str(FIXTURES / "timm_gap.safetensors")
    config = zoo.config("vit-ti16", weights=path, **TINY)
    assert (config.image_size, config.num_classes, config.pooling, config.pooled_norm) == (
        16, 5, "gap", True)
    assert (config.pixel_mean, config.pixel_std) == (0.5, 0.5)
    assert config.learning_rate == vit_checkpoints.FINE_TUNING["learning_rate"]
    # What `zoo train` does: resolve the config first, then build with every field given.
    model = zoo.get("vit-ti16", weights=path, compile=False, **dataclasses.asdict(config))
    np.testing.assert_allclose(model.predict(REFERENCES["images"], verbose=0),
                               REFERENCES["timm_gap"], atol=ATOL, rtol=0)
    assert model.count_params() == zoo.describe("vit-ti16", weights=path, **TINY).num_params


def test_fine_tuning_recipe_and_user_overrides():
    checkpoint = vit_pretrained.read(FIXTURES / "timm_cls.safetensors")
    assert checkpoint.overrides({})["learning_rate"] == vit_checkpoints.FINE_TUNING["learning_rate"]
    assert checkpoint.overrides({})["warmup_steps"] == vit_checkpoints.FINE_TUNING["warmup_steps"]
    assert checkpoint.overrides({"learning_rate": 0.1})["learning_rate"] == 0.1
    probe = checkpoint.overrides({"trainable_backbone": False})
    assert probe["learning_rate"] == vit_checkpoints.LINEAR_PROBE_LEARNING_RATE


@pytest.mark.large
def test_frozen_backbone_trains_only_the_head(seed, tmp_path):
    model = zoo.get("vit-ti16", weights=str(FIXTURES / "timm_cls.safetensors"),
                    trainable_backbone=False, warmup_steps=0, **TINY)
    assert sorted(w.path for w in model.trainable_weights) == ["head/bias", "head/kernel"]
    before = {w.path: w.numpy().copy() for w in model.weights}
    model.fit(REFERENCES["images"], np.array([0, 1]), epochs=1, verbose=0)
    changed = sorted(w.path for w in model.weights
                     if w.trainable and not np.array_equal(before[w.path], w.numpy()))
    assert changed == ["head/bias", "head/kernel"]
    frozen = [w for w in model.weights if not w.path.startswith("head/")]
    assert all(np.array_equal(before[w.path], w.numpy()) for w in frozen)
    assert model.count_params() == zoo.describe("vit-ti16", **TINY, num_classes=5, image_size=16).num_params
    model.save(tmp_path / "probe.keras")
    loaded = zoo.vit.freeze_backbone(keras.saving.load_model(tmp_path / "probe.keras",
                                                                  compile=False))
    assert sorted(w.path for w in loaded.trainable_weights) == ["head/bias", "head/kernel"]


def test_converted_model_round_trips_through_keras_file(tmp_path):
    with pytest.warns(UserWarning):
        model = load("hf_model", num_classes=4)  # gelu_tanh and per-channel statistics
    model.save(tmp_path / "vit.keras")
    loaded = keras.saving.load_model(tmp_path / "vit.keras")
    np.testing.assert_allclose(loaded.predict(REFERENCES["images"], verbose=0),
                               model.predict(REFERENCES["images"], verbose=0), atol=1e-6)


# === Bad files: one clear line each ===


def one_line_error(error_type, path, **overrides):
    with pytest.raises(error_type) as info:
        load(path, **overrides)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_wrong_sizes_name_the_first_tensor_and_both_shapes():
    message = one_line_error(ValueError, "timm_cls.safetensors", hidden_dim=64, num_heads=2)
    assert message.endswith("timm_cls.safetensors: tensor 'patch_embed.proj.weight' has shape "
                            "(4, 4, 3, 32), but vit-ti16 needs (4, 4, 3, 64) for "
                            "patch_embedding/projection/kernel.")
    message = one_line_error(ValueError, "google_cls.npz", mlp_dim=128)
    assert ("tensor 'Transformer/encoderblock_0/MlpBlock_3/Dense_0/kernel' has shape (32, 64), "
            "but vit-ti16 needs (32, 128)") in message
    message = one_line_error(ValueError, "hf_classifier", patch_size=8)
    assert "'vit.embeddings.patch_embeddings.projection.weight' has shape (4, 4, 3, 32)" in message
    assert "needs (8, 8, 3, 32)" in message
    message = one_line_error(ValueError, "timm_cls.safetensors", num_layers=3)
    assert message.endswith("timm_cls.safetensors: 2 encoder blocks, but vit-ti16 has num_layers=3.")
    for path in ("google_cls.npz", "google_gap_scanned.npz", "hf_classifier"):  # they say N
        message = one_line_error(ValueError, path, num_heads=4)
        assert message.endswith(f"{path}: 2 attention heads, but vit-ti16 has num_heads=4.")


def test_google_variants_the_zoo_does_not_have(tmp_path):
    tensors = tensor_files.read_npz(FIXTURES / "google_cls.npz")
    np.savez(tmp_path / "map.npz", **tensors, **{"MAPHead_0/probe": np.zeros((1, 1, 32))})
    message = one_line_error(ValueError, tmp_path / "map.npz")
    assert message.endswith("map.npz: tensor 'MAPHead_0/...' is an attention-pooling head, which "
                            "the zoo's ViT does not have.")
    np.savez(tmp_path / "in21k.npz", **tensors, **{"pre_logits/kernel": np.zeros((32, 32))})
    with pytest.warns(UserWarning) as record:
        model = load(tmp_path / "in21k.npz", num_classes=5)
    messages = [str(w.message) for w in record]
    assert any("'pre_logits' layer the zoo's ViT does not have" in m for m in messages)
    assert any("no head; vit-ti16 gets a new head for num_classes=5" in m for m in messages)
    reference = load("google_cls.npz")
    np.testing.assert_allclose(features(model, REFERENCES["images"]),
                               features(reference, REFERENCES["images"]), atol=1e-6)


def test_missing_tensor_is_named(tmp_path):
    tensors = tensor_files.read_npz(FIXTURES / "google_cls.npz")
    del tensors["Transformer/encoderblock_1/LayerNorm_2/scale"]
    np.savez(tmp_path / "cut.npz", **tensors)
    with pytest.raises(ValueError) as info:
        zoo.get("vit-ti16", weights=str(tmp_path / "cut.npz"), compile=False, **TINY)
    assert str(info.value).endswith(
        "cut.npz: missing tensor 'Transformer/encoderblock_1/LayerNorm_2/scale' (for vit-ti16's "
        "weight encoder_block_1/feed_forward_norm/gamma).")


def write_pth(path, payload):
    """A torch.save-like zip whose data.pkl is `payload`."""
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", payload)


class _RunsCode:
    def __reduce__(self):
        return (os.system, ("echo pwned > /dev/null",))


@pytest.mark.parametrize(
    "name, content, error, expected",
    [
        ("missing.safetensors", None, FileNotFoundError, "No checkpoint file at"),
        ("notes.safetensors", b"just some text", ValueError, "not a safetensors file"),
        ("notes.npz", b"just some text", ValueError, "not a NumPy .npz file"),
        ("notes.pth", b"just some text", ValueError, "not a PyTorch zip checkpoint"),
        ("weights.h5", b"\x89HDF", ValueError, "unknown checkpoint suffix '.h5'"),
        ("evil.pth", "pickle", ValueError, "holds posix.system, which is not a tensor"),
        ("other.npz", "npz", ValueError, "no tensor 'embedding/kernel'"),
        ("empty_folder", "folder", FileNotFoundError, "needs config.json and model.safetensors"),
    ],
)
def test_files_that_are_not_checkpoints(tmp_path, name, content, error, expected):
    path = tmp_path / name
    if content == "pickle":
        write_pth(path, pickle.dumps(_RunsCode()))
    elif content == "npz":
        np.savez(path, weights=np.zeros(3))
    elif content == "folder":
        path.mkdir()
    elif content is not None:
        path.write_bytes(content)
    with pytest.raises(error) as info:
        zoo.get("vit-ti16", weights=str(path), compile=False, **TINY)
    assert expected in str(info.value) and "\n" not in str(info.value)


def test_a_timm_state_dict_of_another_architecture_is_refused():
    tensors = tensor_files.read_safetensors(FIXTURES / "timm_cls.safetensors")
    tensors["blocks.0.ls1.gamma"] = np.ones(32, np.float32)  # a ViT with layer scale
    with pytest.raises(ValueError, match="'blocks.0.ls1.gamma' is layer scale, which the zoo"):
        vit_timm.read("x.safetensors", tensors)


def test_weights_for_another_family_are_refused():
    with pytest.raises(ValueError, match="cannot load `weights`"):
        zoo.get("seq2seq-bahdanau-small", weights="x.npz", compile=False)


@pytest.mark.parametrize(
    "overrides, field",
    [
        (dict(pixel_std=0.0), "pixel_std"),
        (dict(pixel_mean=(0.5, 0.5)), "pixel_mean"),
        (dict(activation="relu"), "activation"),
        (dict(pooled_norm=True), "pooled_norm"),
        (dict(pooled_norm=True, pooling="seq"), "pooled_norm"),
    ],
)
def test_new_config_fields_are_validated(overrides, field):
    with pytest.raises(ValueError, match=f"`{field}`"):
        zoo.config("vit-b16", **overrides)


def test_per_channel_statistics_from_json_lists_become_tuples():
    config = zoo.config("vit-b16", pixel_mean=[0.485, 0.456, 0.406], pixel_std=[0.2, 0.2, 0.2])
    assert config.pixel_mean == (0.485, 0.456, 0.406) and config.pixel_std == (0.2, 0.2, 0.2)
    assert hash(config)  # still hashable


# === Export: the converted ViT serves like the zoo's own ===

SERVE = textwrap.dedent(
    """
    import pickle, sys
    for name in ("keras", "tf_keras", "zoo", "keras_attention"):
        sys.modules[name] = None  # TF Serving runs none of them
    import tensorflow as tf

    results = {}
    for source, request in pickle.load(open(sys.argv[1], "rb")).items():
        loaded = tf.saved_model.load(request["path"])
        results[source] = {}
        for signature, inputs in request["calls"].items():
            outputs = loaded.signatures[signature](**{k: tf.constant(v) for k, v in inputs.items()})
            results[source][signature] = {k: v.numpy() for k, v in outputs.items()}
    pickle.dump(results, open(sys.argv[2], "wb"))
    """
)


def _exported_vit(source, directory):
    """The SavedModel of a converted ViT and the probabilities it must serve."""
    images = REFERENCES["images"]
    if source == "npz":  # the weights of timm_cls, in Google's naming, [-1, 1] inputs
        exported = load("google_cls.npz")
        expected = tf.nn.softmax(REFERENCES["timm_cls"]).numpy()
    else:  # tanh GELU, per-channel statistics, a new 5-class head; through a .keras file
        with pytest.warns(UserWarning, match="no head"):
            model = load("hf_model", num_classes=5)
        model.save(directory / "vit.keras")
        exported = str(directory / "vit.keras")
        expected = tf.nn.softmax(model.predict(images, verbose=0)).numpy()
    return zoo.export(exported, directory / "saved_model", top_k=5), expected


@pytest.mark.large
def test_export_of_a_converted_vit_serves_images_and_image_bytes(tmp_path, seed):
    """Each converted ViT (Google's npz; Hugging Face's through a `.keras` file) served by one
    process without our code, from images and from PNG bytes."""
    images = REFERENCES["images"]
    encoded = np.array([tf.io.encode_png(image).numpy() for image in images], dtype=object)
    calls = {"serving_default": {"images": images},
             "predict_image_bytes": {"image_bytes": encoded}}
    requests, expectations = {}, {}
    for source in ("npz", "hf_model.keras"):
        directory = tmp_path / source
        directory.mkdir()
        path, expectations[source] = _exported_vit(source, directory)
        requests[source] = {"path": str(path), "calls": calls}
    (tmp_path / "request.pkl").write_bytes(pickle.dumps(requests))
    (tmp_path / "serve.py").write_text(SERVE)
    result = subprocess.run(
        [sys.executable, "serve.py", "request.pkl", "results.pkl"], cwd=tmp_path,
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    results = pickle.loads((tmp_path / "results.pkl").read_bytes())
    for source, expected in expectations.items():
        for signature in calls:
            got = results[source][signature]
            np.testing.assert_allclose(got["probabilities"], expected, atol=1e-4, rtol=0)
            order = np.argsort(-expected, axis=-1)
            np.testing.assert_array_equal(got["classes"], order)
            np.testing.assert_allclose(got["scores"], np.take_along_axis(expected, order, -1),
                                       atol=1e-4, rtol=0)
