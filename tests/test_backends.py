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


def _run_without_tensorflow(backend, out):
    """tests/without_tensorflow.py under KERAS_BACKEND=backend (two host devices under JAX);
    returns its report."""
    env = {**os.environ, "KERAS_BACKEND": backend}
    if backend == "jax":
        env["XLA_FLAGS"] = (f"{os.environ.get('XLA_FLAGS', '')} "
                            "--xla_force_host_platform_device_count=2").strip()
    result = subprocess.run([sys.executable, str(TESTS / "without_tensorflow.py"), str(out)],
                            capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads((out / "report.json").read_text())


def _check_losses(report):
    """Every family trained learns (3 finite losses, the last below the first); under JAX,
    DataParallel over two host devices gives one device's losses, from the same weights."""
    import numpy as np

    assert sorted(report["one_device_losses"]) == ["transformer-tiny", "vit-tiny"]
    for name, losses in report["one_device_losses"].items():
        assert len(losses) == 3 and all(np.isfinite(losses)), (name, losses)
        assert losses[-1] < losses[0], (name, losses)
    if report["backend"] != "jax":
        assert report["distribution"] is None and report["losses"] == {}
        assert "layouts" not in report
        return
    assert report["layouts"] == {  # ModelParallel's, over the 2 devices (zoo.layouts)
        "encoder_block_0/self_attention/query_kernel": [None, "model", None],
        "head/kernel": ["model", None]}
    assert report["devices"] == 2 and report["distribution"] == "DataParallel"
    assert sorted(report["losses"]) == ["transformer-tiny", "vit-tiny"]
    for name, losses in report["losses"].items():
        np.testing.assert_allclose(losses, report["one_device_losses"][name], rtol=1e-5,
                                   err_msg=name)


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_the_zoo_trains_without_tensorflow_and_its_keras_file_loads_here(backend, tmp_path):
    """`import zoo`, `zoo.list/describe/get` and `fit` on NumPy arrays under JAX or PyTorch
    with TensorFlow unimportable (under JAX also DataParallel, with one device's losses);
    the `.keras` file loads under TensorFlow with its outputs."""
    import keras
    import numpy as np

    if backend == "torch" and importlib.util.find_spec("torch") is None:
        pytest.skip("PyTorch is not installed, so the zoo did not train under it without "
                    "TensorFlow: .venv/bin/pip install torch==2.13.0 (the CPU build among this "
                    "machine's wheels); the JAX run checks the same")
    report = _run_without_tensorflow(backend, tmp_path)
    assert report["backend"] == backend
    assert report["tensorflow_modules"] == []
    assert report["export"].startswith("zoo.export needs TensorFlow, which is not installed: ")
    assert sorted(report["described"]) == sorted(zoo.list())
    assert set(report["built"]) == {"transformer-tiny", "seq2seq-bahdanau-small",
                                    "convs2s-small", "vit-tiny"}
    _check_losses(report)
    model = keras.saving.load_model(tmp_path / "transformer.keras")
    inputs = dict(np.load(tmp_path / "inputs.npz"))
    expected = np.load(tmp_path / "outputs.npy")
    np.testing.assert_allclose(keras.ops.convert_to_numpy(model(inputs, training=False)),
                               expected, rtol=1e-4, atol=1e-4)
