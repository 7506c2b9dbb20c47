"""Shared pytest fixtures: no network, quiet TensorFlow, fixed seeds, a clean Keras state per test."""

import os
import pathlib
import runpy
import sys

import pytest

import no_network

# Must be set before TensorFlow is imported anywhere; keras is imported lazily
# inside the fixtures below so that this line runs first.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# No test reaches the network: this process refuses connections outside
# loopback, and so does every Python process the tests start (sitecustomize).
no_network.install()
_GUARD_DIR = str(pathlib.Path(__file__).resolve().parent / "sitecustomize")
os.environ["PYTHONPATH"] = os.pathsep.join(
    [_GUARD_DIR] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
)

SEED = 1234


@pytest.fixture
def seed():
    """Seed Python, NumPy, TensorFlow and Keras's global SeedGenerator; return the seed."""
    import keras

    keras.utils.set_random_seed(SEED)
    return SEED


@pytest.fixture
def rng():
    """A NumPy generator with a fixed seed, for test inputs."""
    import numpy as np

    return np.random.default_rng(SEED)


@pytest.fixture(autouse=True)
def _clean_keras_state():
    """Every test starts seeded and leaves float32 and a cleared Keras state behind.

    Resetting the dtype policy keeps a mixed-precision test from leaking into the
    next one. `clear_session(free_memory=False)` resets Keras's global state (layer
    name counters, graph state) without the full `gc.collect()`, which would cost
    about half a second per test.
    """
    import keras

    keras.utils.set_random_seed(SEED)
    yield
    keras.config.set_dtype_policy("float32")
    keras.backend.clear_session(free_memory=False)


@pytest.fixture(autouse=True)
def _no_network_reached():
    """Fail the test if its code tried the network, even if it swallowed the error."""
    already = len(no_network.blocked)
    yield
    tried = no_network.blocked[already:]
    del no_network.blocked[already:]
    if tried:
        pytest.fail(f"the test tried to reach the network: {', '.join(tried)}", pytrace=False)


@pytest.fixture
def expect_network_block():
    """For tests of the guard itself: the blocks they cause are theirs to check."""
    already = len(no_network.blocked)
    yield no_network.blocked
    del no_network.blocked[already:]


# === Benchmark scripts, run in this process ===

BENCHMARKS = pathlib.Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture
def run_benchmark(monkeypatch, capsys):
    """`run_benchmark("bench_x.py", *args)` runs `python benchmarks/bench_x.py ARGS` in this
    process (`runpy`, `sys.argv` set; no other TensorFlow import) and returns its stdout.

    A script's own subprocesses (fresh processes per measured point) stay processes. The
    script exiting non-zero (`sys.exit`, `SystemExit`) fails the test with its output.
    """
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # sys.path comes back after the test

    def run(script, *args):
        path = str(BENCHMARKS / script)
        monkeypatch.setattr(sys, "argv", [path, *map(str, args)])
        capsys.readouterr()  # only this run's output
        try:
            runpy.run_path(path, run_name="__main__")
        except SystemExit as exit_:
            if exit_.code not in (None, 0):
                captured = capsys.readouterr()
                pytest.fail(f"{script} exited with {exit_.code!r}:\n{captured.out[-3000:]}\n"
                            f"{captured.err[-3000:]}", pytrace=False)
        return capsys.readouterr().out

    return run


# === Small WordPiece tokenizers of the `numbers` task (tests of zoo.text) ===


@pytest.fixture(scope="session")
def numbers_data():
    from zoo import datasets

    return datasets.numbers(num_train=1500, num_test=200, seed=3)


@pytest.fixture(scope="session")
def german(numbers_data):
    from zoo import text

    return text.WordPieceTokenizer.from_corpus(numbers_data.train_sources, 200)


@pytest.fixture(scope="session")
def english(numbers_data):
    from zoo import text

    return text.WordPieceTokenizer.from_corpus(numbers_data.train_targets, 200)
