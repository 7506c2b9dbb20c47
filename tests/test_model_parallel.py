"""Sharded models (#62): `zoo.layout_map` and `keras.distribution.ModelParallel`.

Here, under TensorFlow: the layout map's keys against the variables of built models (a
`DeviceMesh` of device names is all a `LayoutMap` needs to be made and read) and what
`zoo train --model-parallel` refuses. Under JAX on 8 host devices, in a process of its own
(Keras's devices are fixed per process; tests/model_parallel_run.py): the weights really
split, three steps as on one device, and `zoo train --model-parallel 4`.
"""

import json
import os
import pathlib
import re
import subprocess
import sys
import time

import keras
import numpy as np
import pytest

import zoo
from zoo import layouts

from zoo_cli import run_main

TESTS = pathlib.Path(__file__).resolve().parent
# The weights a layout map splits, by the end of their paths; every other weight is replicated.
SPLIT = re.compile(r".*(_attention/(query|key|value|output)_kernel|feed_forward/(inner|output)"
                   r"_dense/kernel|token_embedding/embeddings|output_projection/kernel"
                   r"|patch_embedding/projection/kernel|head/kernel)")
# The optimizer's variables (Adam's, AdamW's), and among them a weight's moments:
# `adam/<the weight's path, "/" as "_">_momentum`.
OPTIMIZER = re.compile(r"adam\w*/.*")
MOMENT = re.compile(r"adam\w*/(.+)_(momentum|velocity)")
SMALL = {"transformer-tiny": dict(num_encoder_layers=1, num_decoder_layers=2, d_model=32,
                                  num_heads=4, intermediate_dim=64, vocabulary_size=64),
         "vit-tiny": dict(num_layers=2)}
VARIANTS = [
    ("transformer-tiny", {}),
    ("transformer-tiny", dict(source_vocabulary_size=48, target_vocabulary_size=40,
                              tie_embeddings=False, positional="learned", norm_first=True,
                              final_logits_bias=True)),
    ("transformer-tiny", dict(copy=True)),
    ("vit-tiny", {}),
    ("vit-tiny", dict(pooling="cls", shifted_patches=False)),
]


def mesh(batch=2, model=4, axes=("batch", "model")):
    """A `DeviceMesh` of device names: enough for a `LayoutMap`, whatever the devices here."""
    return keras.distribution.DeviceMesh((batch, model), axes,
                                         devices=[f"cpu:{i}" for i in range(batch * model)])


def built(name, overrides):
    return zoo.get(name, compile=False, **SMALL[name], **overrides)


def _keys(layout_map, path):
    return [key for key in layout_map if re.fullmatch(key, path)]


@pytest.mark.parametrize("name, overrides", VARIANTS)
def test_each_split_weight_matches_one_key_with_a_layout_of_its_rank_and_nothing_else_does(
        name, overrides):
    model = built(name, overrides)
    layout_map = zoo.layout_map(model, mesh())
    split = {weight.path for weight in model.weights if SPLIT.fullmatch(weight.path)}
    assert len(split) >= 9
    for weight in model.weights:
        keys = _keys(layout_map, weight.path)
        assert len(keys) == (weight.path in split), (weight.path, keys)
        if keys:
            layout = layout_map[weight.path]  # LayoutMap's own lookup: re.fullmatch
            assert len(layout.axes) == len(weight.shape), weight.path
            (dimension,) = [i for i, axis in enumerate(layout.axes) if axis is not None]
            assert layout.axes[dimension] == "model" and weight.shape[dimension] % 4 == 0
        else:
            assert layout_map[weight.path] is None
    # Every key names a weight of the model: the map from the name is the same.
    assert all(any(re.fullmatch(key, path) for path in split) for key in layout_map)
    from_name = zoo.layout_map(name, mesh(), **SMALL[name], **overrides)
    assert {k: v.axes for k, v in from_name.items()} == {k: v.axes for k, v in layout_map.items()}


def test_the_transformer_splits_heads_feed_forward_and_vocabulary_on_the_model_axis():
    layout_map = zoo.layout_map("transformer-tiny", mesh())
    assert zoo.layout_map is layouts.layout_map
    assert tuple(layout_map.device_mesh.axis_names) == ("batch", "model")
    expected = {
        "encoder_block_0/self_attention/query_kernel": (None, "model", None),  # (D, N, H)
        "decoder_block_1/cross_attention/value_kernel": (None, "model", None),
        "decoder_block_0/self_attention/output_kernel": ("model", None, None),  # (N, H, D)
        "encoder_block_1/feed_forward/inner_dense/kernel": (None, "model"),  # (D, F)
        "decoder_block_1/feed_forward/output_dense/kernel": ("model", None),  # (F, D)
        "shared_embedding/token_embedding/embeddings": ("model", None),  # (V, D)
    }
    for path, axes in expected.items():
        assert layout_map[path].axes == axes, path
    untied = zoo.layout_map("transformer-tiny", mesh(), tie_embeddings=False,
                            source_vocabulary_size=100, target_vocabulary_size=96)
    assert untied["output_projection/kernel"].axes == (None, "model")  # (D, V)
    assert untied["target_embedding/token_embedding/embeddings"].axes == ("model", None)
    # V = 100 is no multiple of 8 devices: the model dimension instead.
    eight = zoo.layout_map("transformer-tiny", mesh(1, 8), vocabulary_size=100)
    assert eight["shared_embedding/token_embedding/embeddings"].axes == (None, "model")
    # A vocabulary not known yet (zoo train learns it): the model dimension always.
    unknown = zoo.layout_map("transformer-tiny", mesh(), split_vocabulary=False)
    assert unknown["shared_embedding/token_embedding/embeddings"].axes == (None, "model")


def test_the_keys_match_whole_paths_only():
    layout_map = zoo.layout_map("transformer-tiny", mesh())
    assert layout_map["decoder_block_11/cross_attention/key_kernel"].axes == (None, "model", None)
    for path in ("encoder_block_0/self_attention/query_bias",
                 "encoder_block_0/self_attention/query_kernel_2",
                 "x/encoder_block_0/self_attention/query_kernel",
                 "adam/encoder_block_0_self_attention_query_kernel_momentum",
                 "encoder_block_0/feed_forward/inner_dense/bias",
                 "shared_embedding/position_embedding/position_embeddings"):
        assert layout_map[path] is None, path


def test_vit_splits_d_where_the_model_axis_does_not_divide_the_heads():
    two_heads = zoo.layout_map("vit-tiny", mesh())  # 2 heads, D 64, over 4 devices
    assert two_heads["encoder_block_0/self_attention/query_kernel"].axes == ("model", None, None)
    assert two_heads["encoder_block_3/self_attention/output_kernel"].axes == (None, None, "model")
    assert two_heads["patch_embedding/projection/kernel"].axes == (None, None, None, "model")
    assert two_heads["head/kernel"].axes == ("model", None)
    halves = zoo.layout_map("vit-tiny", mesh(4, 2))
    assert halves["encoder_block_0/self_attention/query_kernel"].axes == (None, "model", None)
    # A mesh of other axis names: the one given.
    named = zoo.layout_map("vit-b16", mesh(axes=("data", "tensor")),
                           model_parallel_dim_name="tensor")
    assert named["encoder_block_0/feed_forward/inner_dense/kernel"].axes == (None, "tensor")


@pytest.mark.parametrize("what, match", [
    ("convs2s-small", r"no layout map for 'convs2s-small', a ConvS2S model: .* Transformer "
                      r"and ViT families only"),
    ("seq2seq-bahdanau-small", r"an RNNsearch model"),
    ("vit-nope", r"Unknown model 'vit-nope'"),
])
def test_other_families_and_names_are_refused_in_one_line(what, match):
    with pytest.raises(zoo.ZooError, match=match) as raised:
        zoo.layout_map(what, mesh())
    assert "\n" not in str(raised.value)


def test_a_built_model_of_another_family_a_mesh_without_the_axis_and_overrides_are_refused():
    seq2seq = zoo.get("seq2seq-bahdanau-small", vocabulary_size=32, compile=False)
    with pytest.raises(zoo.ZooError, match="an RNNsearch model"):
        zoo.layout_map(seq2seq, mesh())
    with pytest.raises(zoo.ZooError, match=r"'model' axis, which it lacks \(its axes: 'data'"):
        zoo.layout_map("vit-tiny", mesh(axes=("data", "tensor")))
    with pytest.raises(zoo.ZooError, match="config fields with a name only"):
        zoo.layout_map(built("vit-tiny", {}), mesh(), num_heads=4)


# === zoo train --model-parallel under TensorFlow: refused ===

JAX_ONLY = ("zoo train: error: --model-parallel needs the JAX backend "
            "(keras.distribution.ModelParallel): KERAS_BACKEND=jax (this process runs Keras on "
            "tensorflow).\n")


def test_zoo_train_model_parallel_needs_jax(tmp_path):
    ran = run_main("train", "transformer-tiny", "--data", "numbers", "--model-parallel", "2",
                   "--out", tmp_path / "run")
    assert (ran.code, ran.err) == (2, JAX_ONLY)
    assert not (tmp_path / "run").exists()


def test_a_resumed_run_reads_its_model_parallel_back(tmp_path):
    """A run trained with --model-parallel resumes under it without the flag: here, under
    TensorFlow, refused as the flag is."""
    run = tmp_path / "run"
    run.mkdir()
    config = {"model": "transformer-tiny", "kind": "translation",
              "model_config": {"vocabulary_size": 64, "num_heads": 4},
              "training": {"model_parallel": 4}, "data": {"spec": "numbers", "options": {}}}
    (run / "config.json").write_text(json.dumps(config))
    ran = run_main("train", "transformer-tiny", "--out", run)
    assert (ran.code, ran.err) == (2, JAX_ONLY)


def test_model_parallel_is_a_positive_training_option():
    from zoo.runs.options import TrainingOptions

    assert TrainingOptions(model_parallel=4).training_section()["model_parallel"] == 4
    assert TrainingOptions().training_section()["model_parallel"] is None
    with pytest.raises(ValueError, match="model_parallel"):
        TrainingOptions(model_parallel=0)


# === Under JAX on 8 host devices (tests/model_parallel_run.py) ===


@pytest.fixture(scope="module")
def jax_report(tmp_path_factory):
    """report.json of tests/model_parallel_run.py (and the seconds it took, "wall")."""
    out = tmp_path_factory.mktemp("model_parallel")
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=8"
    env = {**os.environ, "KERAS_BACKEND": "jax", "XLA_FLAGS": flags.strip()}
    started = time.perf_counter()
    result = subprocess.run([sys.executable, str(TESTS / "model_parallel_run.py"), str(out)],
                            capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    report = json.loads((out / "report.json").read_text())
    report["wall"] = time.perf_counter() - started
    report["run_dir"] = str(out / "run")
    return report


def _check_layouts(found, layout_map, size=4):
    """Every weight a key of `layout_map` names is split as the key says (1/size of the
    dimension on each device), Adam's moments of it alike; every other weight is replicated.
    Returns the number of split weights."""
    expected = {}
    for path, layout in found.items():
        if not OPTIMIZER.match(path):
            keys = [key for key in layout_map if re.fullmatch(key, path)]
            expected[path] = layout_map[keys[0]] if keys else [None] * len(layout["shape"])
    by_name = {path.replace("/", "_"): axes for path, axes in expected.items()}
    for path, layout in found.items():
        moment = MOMENT.fullmatch(path)
        axes = by_name[moment.group(1)] if moment else expected.get(path)
        if axes is None:
            continue  # the optimizer's iteration count and learning rate
        assert layout["spec"] == axes, path
        shard = [n // size if axis else n for n, axis in zip(layout["shape"], axes)]
        assert layout["shard_shape"] == shard, path
    return sum(any(axes) for axes in expected.values())


@pytest.mark.large
@pytest.mark.parametrize("name", ["transformer-tiny", "vit-tiny"])
def test_model_parallel_splits_the_kernels_and_trains_as_one_device(jax_report, name):
    assert (jax_report["backend"], jax_report["devices"]) == ("jax", 8)
    report = jax_report[name]
    split = [path for path in report["layouts"] if SPLIT.fullmatch(path)
             and not OPTIMIZER.fullmatch(path)]
    assert _check_layouts(report["layouts"], report["layout_map"]) == len(split) >= 8
    for path, layout in report["layouts"].items():
        if SPLIT.fullmatch(path):
            assert layout["shard_shape"] != layout["shape"], path
    # The family's recipe (Adam): the same losses; SGD: the same weights too.
    np.testing.assert_allclose(report["losses"], report["one_device_losses"], rtol=1e-5)
    assert report["sgd_max_weight_difference"] < 1e-5
    assert report["losses"][-1] < report["losses"][0]


@pytest.mark.large
def test_zoo_train_model_parallel_trains_with_split_kernels_and_records_it(jax_report):
    trained = jax_report["zoo_train"]
    assert trained["code"] == 0, trained["stderr"]
    training = json.loads((pathlib.Path(jax_report["run_dir"]) / "config.json").read_text())[
        "training"]
    assert training["model_parallel"] == 4
    assert (training["backend"], training["strategy"]) == ("jax", "ModelParallel")
    assert (training["num_replicas"], training["global_batch_size"]) == (2, 2 * 4)
    found = trained["layouts"]
    assert found["encoder_block_0/self_attention/query_kernel"]["spec"] == [None, "model", None]
    assert found["decoder_block_0/feed_forward/output_dense/kernel"]["spec"] == ["model", None]
    # The vocabulary is the data's: the embeddings are split over D.
    assert found["shared_embedding/token_embedding/embeddings"]["spec"] == [None, "model"]
    adam = [path for path in found if path.endswith("query_kernel_momentum")]
    assert adam and all(found[path]["spec"] == [None, "model", None] for path in adam)
    assert jax_report["resumed"] == {"distribution": "ModelParallel", "mesh": [2, 4]}


@pytest.mark.large
@pytest.mark.parametrize("what, message", [
    ("indivisible", "--model-parallel 3 must divide the 8 devices"),
    ("family", "no layout map for 'convs2s-small', a ConvS2S model"),
    ("strategy", "it takes no --strategy (received 'mirrored')"),
])
def test_zoo_train_model_parallel_refuses_in_one_line_on_jax(jax_report, what, message):
    code, err = jax_report["refused"][what]
    assert code == 2 and err.count("\n") == 1 and message in err, err
    assert jax_report["refused_left_nothing"]


@pytest.mark.large
def test_the_jax_run_stays_short(jax_report):
    assert jax_report["wall"] < 120, jax_report["seconds"]
