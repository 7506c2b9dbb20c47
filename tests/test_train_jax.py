"""`zoo train` under Keras' JAX backend writes the run directory it writes under TensorFlow; the
run's `.keras` files load under TensorFlow with the outputs JAX computed, and `zoo export` of it
serves (#50).

The same `zoo train` command runs on each backend: the session's `numbers_run`
(tests/conftest.py: TensorFlow, this process) and, once for this file, under
`KERAS_BACKEND=jax` in a process of its own (Keras' backend is fixed per process;
tests/jax_train_run.py), which also runs the commands that must refuse JAX.
"""

import csv
import json
import os
import pathlib
import re
import subprocess
import sys

import keras
import numpy as np
import pytest

from zoo_cli import run_main

TESTS = pathlib.Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def jax_run(numbers_run, tmp_path_factory):
    """OUT_DIR of tests/jax_train_run.py: `numbers_run`'s command trained under JAX into
    OUT_DIR/run, the outputs of its best.keras, and the refusals (report.json)."""
    out = tmp_path_factory.mktemp("jax_run")
    argv = ["transformer-tiny", "--data", "numbers"]
    for key, value in numbers_run.overrides.items():
        argv += ["--set", f"{key}={value}"]
    for key, value in numbers_run.options.items():
        argv += [f"--{key.replace('_', '-')}", str(value)]
    result = subprocess.run(
        [sys.executable, str(TESTS / "jax_train_run.py"), str(out), *argv],
        capture_output=True, text=True, env={**os.environ, "KERAS_BACKEND": "jax"}, timeout=600,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return out


def _files(run_dir):
    """The run's files, relative, TensorBoard's event files by their folder only (their names
    hold the time, host and process)."""
    return sorted(re.sub(r"events\.out\.tfevents\..*", "events.out.tfevents.*",
                         path.relative_to(run_dir).as_posix())
                  for path in run_dir.rglob("*") if path.is_file())


def _json(path):
    return json.loads(path.read_text())


def _columns(path):
    with path.open(newline="") as file:
        rows = list(csv.reader(file))
    return rows[0], len(rows) - 1


def test_the_jax_run_writes_the_files_and_fields_of_the_tensorflow_run(jax_run, numbers_run):
    jax_dir, tf_dir = jax_run / "run", numbers_run.run_dir
    assert _files(jax_dir) == _files(tf_dir)
    assert "checkpoints/best.keras" in _files(jax_dir) and "summary.json" in _files(jax_dir)
    jax_config, tf_config = _json(jax_dir / "config.json"), _json(tf_dir / "config.json")
    assert jax_config.keys() == tf_config.keys()
    for section in ("training", "data", "interval", "schedule"):
        assert jax_config[section].keys() == tf_config[section].keys(), section
    # The same sizes; the vocabulary learned from the same pairs, to the same bytes.
    assert jax_config["model_config"] == tf_config["model_config"]
    for name in ("tokenizer/sentencepiece.model", "tokenizer/tokenizer.json"):
        assert (jax_dir / name).read_bytes() == (tf_dir / name).read_bytes(), name
    # Where each trained: the backend, and its own name for one device.
    assert jax_config["training"]["backend"] == "jax"
    assert tf_config["training"]["backend"] == "tensorflow"
    assert jax_config["training"]["strategy"] == "default"
    assert jax_config["training"]["num_replicas"] == tf_config["training"]["num_replicas"] == 1
    assert jax_config["versions"].keys() - tf_config["versions"].keys() == {"jax"}
    assert _json(jax_dir / "summary.json").keys() == _json(tf_dir / "summary.json").keys()
    assert _columns(jax_dir / "history.csv") == _columns(tf_dir / "history.csv")


def test_its_best_keras_loads_under_tensorflow_with_the_outputs_jax_computed(jax_run):
    model = keras.saving.load_model(jax_run / "run/checkpoints/best.keras")
    inputs = dict(np.load(jax_run / "inputs.npz"))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(model(inputs, training=False)),
                               np.load(jax_run / "outputs.npy"), rtol=1e-4, atol=1e-4)


def test_zoo_export_of_the_jax_run_serves_its_translations(jax_run, tmp_path):
    from zoo import runs

    exported = run_main("export", jax_run / "run", "--to", tmp_path / "saved", "--beam-size", 1)
    assert exported.code == 0, exported.err[-3000:]
    sentences = ["dreihundertvierundzwanzig", "elf"]
    # The SavedModel's greedy signature, loaded with tf.saved_model.load, against the run's
    # best.keras decoded in this process.
    served = run_main("predict", tmp_path / "saved", *sentences, "--beam-size", 1, "--json")
    assert served.code == 0, served.err[-3000:]
    assert json.loads(served.out) == runs.predict(jax_run / "run", sentences, beam_size=1)


@pytest.mark.parametrize("what", ["export", "evaluate", "predict", "tpu"])
def test_what_needs_tensorflow_refuses_jax_in_one_line(jax_run, what):
    refused = _json(jax_run / "report.json")["refused"][what]
    command = "train" if what == "tpu" else what
    feature = {"export": "zoo export", "tpu": "the tpu strategy (tf.distribute)"
               }.get(what, f"zoo {what} of a translation run (decoding)")
    assert refused["code"] == 2
    assert refused["stderr"].count("\n") == 1, refused["stderr"]
    assert refused["stderr"].startswith(
        f"zoo {command}: error: {feature} needs the TensorFlow backend: KERAS_BACKEND=tensorflow "
        "(this process runs Keras on jax)")
    assert not (jax_run / "saved_models").exists() and not (jax_run / "tpu").exists()


def test_a_jax_job_without_its_processes_is_refused_in_one_line(jax_run):
    refused = _json(jax_run / "report.json")["refused"]["multiworker"]
    assert refused["code"] == 2 and refused["stderr"].count("\n") == 1, refused["stderr"]
    assert refused["stderr"].startswith(
        "zoo train: error: --strategy multiworker on JAX needs the job's processes: "
        "--coordinator HOST:PORT --num-processes N --process-id I, or Keras's "
        "KERAS_DISTRIBUTION_JOB_ADDRESSES"), refused["stderr"]
    assert not (jax_run / "multiworker").exists()


def test_mirrored_is_data_parallel_over_the_local_devices_on_jax(jax_run):
    assert _json(jax_run / "report.json")["mirrored"] == {
        "name": "mirrored", "strategy": None, "replicas": 1, "distribution": "DataParallel"}


def test_on_tensorflow_the_placement_is_the_strategy_and_the_data_as_before():
    import tensorflow as tf

    from zoo import distribute

    placement = distribute.place()
    assert placement.strategy is tf.distribute.get_strategy() and placement.distribution is None
    assert (placement.name, placement.num_replicas_in_sync) == ("_DefaultDistributionStrategy", 1)
    assert distribute.place("mirrored").name == "mirrored"
    batches = tf.data.Dataset.from_tensor_slices((np.ones((5, 3)), np.ones((5, 2)))).batch(3)
    assert distribute.fit_data(batches, placement, pad_id=0).element_spec == batches.element_spec


# === Batches that split evenly over a keras.distribution's devices ===


def _batches():
    import tensorflow as tf

    rng = np.random.default_rng(0)
    x = {"source": rng.integers(1, 9, (5, 4)), "target": rng.integers(1, 9, (5, 3))}
    return tf.data.Dataset.from_tensor_slices((x, rng.integers(1, 9, (5, 3)))).batch(3)  # 3, 2


def test_even_batches_pad_translation_batches_with_labels_the_loss_skips():
    import keras_attention as ka
    from zoo import distribute

    padded = list(distribute.even_batches(_batches(), 2, pad_id=0).as_numpy_iterator())
    plain = list(_batches().as_numpy_iterator())
    assert [len(y) for _, y in padded] == [4, 2]
    (x, y), (x0, y0) = padded[0], plain[0]
    np.testing.assert_array_equal(x["source"], np.concatenate([x0["source"], x0["source"][:1]]))
    np.testing.assert_array_equal(y, np.concatenate([y0, np.zeros((1, 3), y0.dtype)]))
    logits = np.random.default_rng(1).normal(size=(4, 3, 9)).astype("float32")
    loss, accuracy = ka.MaskedSparseCategoricalCrossentropy(), ka.MaskedAccuracy()
    np.testing.assert_allclose(float(loss(y, logits)), float(loss(y0, logits[:3])), rtol=1e-6)
    accuracy.update_state(y, logits)
    assert float(accuracy.result()) == float(ka.MaskedAccuracy()(y0, logits[:3]))


def test_even_batches_weigh_image_copies_zero():
    import keras_attention as ka
    from zoo import distribute

    padded = list(distribute.even_batches(_batches(), 2).as_numpy_iterator())
    assert [weight.tolist() for _, _, weight in padded] == [[1, 1, 1, 0], [1, 1]]
    (_, y, weight), (_, y0) = padded[0], next(_batches().as_numpy_iterator())
    np.testing.assert_array_equal(y, np.concatenate([y0, y0[:1]]))
    logits = np.random.default_rng(1).normal(size=(4, 3, 9)).astype("float32")
    loss = ka.MaskedSparseCategoricalCrossentropy(pad_id=None)
    np.testing.assert_allclose(float(loss(y, logits, sample_weight=weight)),
                               float(loss(y0, logits[:3])), rtol=1e-6)
