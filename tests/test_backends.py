"""The backend-agnostic tests (tests/conftest.py's BACKEND_TEST_FILES) pass under JAX and PyTorch.

Keras picks its backend once per process, so each backend's run is a fresh pytest process
(what `make test-jax` and `make test-torch` run), started from this TensorFlow run.
"""

import importlib.util
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

import zoo

TESTS = pathlib.Path(__file__).resolve().parent


def _run_suite(backend, extra_env=None):
    env = {**os.environ, "KERAS_BACKEND": backend, **(extra_env or {})}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", str(TESTS)],
        capture_output=True, text=True, env=env, cwd=TESTS.parent, timeout=900,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"KERAS_BACKEND={backend} pytest failed:\n{output[-6000:]}"
    counts = dict((kind, int(n)) for n, kind in re.findall(r"(\d+) (passed|failed|error)", output))
    assert counts.get("passed", 0) > 100 and not counts.get("failed"), output[-3000:]
    return output


def test_layer_library_and_families_under_jax():
    xla_flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=2"
    _run_suite("jax", {"XLA_FLAGS": xla_flags.strip()})


def test_layer_library_and_families_under_torch():
    if importlib.util.find_spec("torch") is None:
        pytest.skip("PyTorch is not installed, so the layer tests did not run under it: "
                    ".venv/bin/pip install torch==2.13.0 (the CPU build among this machine's "
                    "wheels), then make test-torch; the JAX run covers the same tests")
    _run_suite("torch")


def test_the_zoo_trains_on_jax_without_tensorflow_and_its_keras_file_loads_here(tmp_path):
    """`import zoo`, `zoo.list/describe/get` and `fit` with TensorFlow unimportable, under
    DataParallel with one device's losses; the `.keras` file loads under TensorFlow with its
    outputs."""
    import keras
    import numpy as np

    env = {**os.environ, "KERAS_BACKEND": "jax",
           "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} "
                        "--xla_force_host_platform_device_count=2".strip()}
    result = subprocess.run([sys.executable, str(TESTS / "jax_without_tensorflow.py"), str(tmp_path)],
                            capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["backend"] == "jax" and report["devices"] == 2
    assert report["distribution"] == "DataParallel"
    assert report["tensorflow_modules"] == []
    assert report["export"].startswith("zoo.export needs TensorFlow, which is not installed: ")
    assert sorted(report["described"]) == sorted(zoo.list())
    assert set(report["built"]) == {"transformer-tiny", "seq2seq-bahdanau-small",
                                    "convs2s-small", "vit-tiny"}
    # DataParallel over two host devices gives one device's losses, from the same weights.
    assert sorted(report["losses"]) == ["transformer-tiny", "vit-tiny"]
    for name, losses in report["losses"].items():
        assert len(losses) == 3 and all(np.isfinite(losses)), (name, losses)
        np.testing.assert_allclose(losses, report["one_device_losses"][name], rtol=1e-5,
                                   err_msg=name)
    model = keras.saving.load_model(tmp_path / "transformer.keras")
    inputs = dict(np.load(tmp_path / "inputs.npz"))
    expected = np.load(tmp_path / "outputs.npy")
    np.testing.assert_allclose(keras.ops.convert_to_numpy(model(inputs, training=False)),
                               expected, rtol=1e-4, atol=1e-4)
