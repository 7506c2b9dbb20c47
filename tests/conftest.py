"""Shared pytest fixtures: no network, quiet TensorFlow, fixed seeds, a clean Keras state per
test, and one small trained and exported translation run per session (`numbers_run`)."""

import contextlib
import dataclasses
import hashlib
import io
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


# === One tiny translation run (and its export) per session, through `zoo train`/`zoo export` ===


@dataclasses.dataclass(frozen=True)
class NumbersRun:
    """transformer-tiny trained on `numbers`, once per session (per xdist worker), by
    `zoo train` in this process.

    Read-only: a test that writes into the run (`zoo evaluate` writes metrics.json)
    copies it first (`shutil.copytree`); the fixture fails at the end of the session if
    a file changed.

    Attributes:
        run_dir: the finished run directory (`zoo train ... --out run_dir`).
        stdout: what `zoo train` printed (Keras' progress, the summary).
        result: the `zoo.runs.RunResult` that `zoo train` got from `zoo.runs.train`.
        overrides: the config fields given with `--set`.
        options: the training and data options given (`epochs`, `train_size`,
            `test_size`, `seed`); the batch size is left to its default (64 for translation).
    """

    run_dir: pathlib.Path
    stdout: str
    result: object
    overrides: dict
    options: dict


@dataclasses.dataclass(frozen=True)
class NumbersExport:
    """`zoo export` of the session's `NumbersRun` (read-only too).

    Attributes:
        saved_models: the export root (`--to`), holding version 1.
        stdout: what `zoo export` printed.
    """

    saved_models: pathlib.Path
    stdout: str


NUMBERS_RUN_OVERRIDES = dict(num_encoder_layers=1, num_decoder_layers=1, d_model=16, num_heads=2,
                             intermediate_dim=32, vocabulary_size=100, max_length=16)
NUMBERS_RUN_OPTIONS = dict(epochs=2, train_size=200, test_size=8, seed=3)


def _zoo_main_output(argv):
    """`zoo.cli.main(argv)` in this process: (exit code, stdout, stderr)."""
    from zoo import cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def _digest(root):
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(pathlib.Path(root).rglob("*")) if p.is_file()}


@contextlib.contextmanager
def _read_only(root, name):
    """Fails on leaving if a file under `root` changed, appeared or went away."""
    before = _digest(root)
    yield
    assert _digest(root) == before, f"a test wrote into the session's {name}: copy it first"


@pytest.fixture(scope="session")
def numbers_run(tmp_path_factory):
    """A `NumbersRun`: `zoo train transformer-tiny --data numbers ...` through `zoo.cli.main`."""
    import keras

    from zoo import runs

    run_dir = tmp_path_factory.mktemp("numbers_run") / "run"
    keras.backend.clear_session(free_memory=False)  # the same layer names whichever test asks first
    argv = ["train", "transformer-tiny", "--data", "numbers", "--out", run_dir]
    for key, value in NUMBERS_RUN_OVERRIDES.items():
        argv += ["--set", f"{key}={value}"]
    for key, value in NUMBERS_RUN_OPTIONS.items():
        argv += [f"--{key.replace('_', '-')}", value]
    real_train, returned = runs.train, []

    def train_and_keep_result(*args, **kwargs):
        returned.append(real_train(*args, **kwargs))
        return returned[-1]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runs, "train", train_and_keep_result)
        code, stdout, err = _zoo_main_output(argv)
    assert code == 0 and len(returned) == 1, err[-3000:]
    with _read_only(run_dir, "numbers_run"):
        yield NumbersRun(run_dir, stdout, returned[0], dict(NUMBERS_RUN_OVERRIDES),
                         dict(NUMBERS_RUN_OPTIONS))


@pytest.fixture(scope="session")
def numbers_export(numbers_run, tmp_path_factory):
    """A `NumbersExport`: `zoo export RUN --to ROOT` of `numbers_run` through `zoo.cli.main`."""
    root = tmp_path_factory.mktemp("numbers_export") / "saved_models"
    code, stdout, err = _zoo_main_output(["export", numbers_run.run_dir, "--to", root])
    assert code == 0, err[-3000:]
    with _read_only(root, "numbers_export"):
        yield NumbersExport(root, stdout)
