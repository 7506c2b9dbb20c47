"""Shared pytest fixtures: no network, quiet TensorFlow, fixed seeds, a clean Keras state per
test, and one small trained and exported translation run per session (`numbers_run`)."""

import contextlib
import dataclasses
import gc
import hashlib
import importlib.util
import os
import pathlib
import runpy
import subprocess
import sys

import pytest

import no_network
from zoo_cli import run_main

# Must be set before TensorFlow is imported anywhere; keras is imported lazily
# inside the fixtures below so that this line runs first.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# XLA compiles (`jit_compile=True`, and every JAX op) at LLVM's optimisation level 0 and with
# XLA's older loop emitters instead of its fusion emitters (which lower each fusion through MLIR
# first), here and in every process the tests start: their programs compile in about half the
# time, and run the same computation (the tests compare results, never XLA's speed; benchmarks/
# measure speed with XLA's defaults). The fusion emitters alone, on the 2-core AMD EPYC VM
# (AVX-512): tests/test_multi_head.py under JAX 40.8 -> 25.7 CPU-s (XLA's compile time
# 47.5 -> 16.5 s over 1,016 compiles); a TensorFlow `jit_compile` step 2.23 -> 1.69 CPU-s.
os.environ["XLA_FLAGS"] = (
    f"{os.environ.get('XLA_FLAGS', '')} --xla_backend_optimization_level=0"
    " --xla_cpu_use_fusion_emitters=false".strip()
)
# TensorFlow's own kernels instead of oneDNN's, here and in every process the tests start: the
# tests' models are tiny, and oneDNN's per-op set-up costs more than it saves on them (4 test
# files with `-n 2`, alternating: 79.2 and 78.5 s without, 83.1 and 82.7 s with, on the 2-core
# Xeon VM). `TF_ENABLE_ONEDNN_OPTS=1 make test` runs the suite with oneDNN, TensorFlow's default.
# The CPU allocator stays the one oneDNN brings (BFC), which keeps the peak-memory statistics
# that tests/test_chunked.py reads (`tf.config.experimental.get_memory_info("CPU:0")`).
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")

# No test reaches the network: this process refuses connections outside
# loopback, and so does every Python process the tests start (sitecustomize).
no_network.install()
_GUARD_DIR = str(pathlib.Path(__file__).resolve().parent / "sitecustomize")
os.environ["PYTHONPATH"] = os.pathsep.join(
    [_GUARD_DIR] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
)

SEED = 1234

# The Keras backend of this run (read by Keras from the same variable when it loads).
BACKEND = os.environ.get("KERAS_BACKEND", "tensorflow")
if BACKEND == "torch" and importlib.util.find_spec("torch") is None:
    raise pytest.UsageError(
        "KERAS_BACKEND=torch, but PyTorch is not installed: .venv/bin/pip install torch==2.13.0 "
        "(the CPU build among this machine's wheels; a plain `pip install torch` pulls the CUDA "
        "build), then make test-torch."
    )

# The test files that run under every Keras backend: the layer library's NumPy-reference tests
# and the families' training on NumPy arrays. Under JAX or PyTorch (`make test-jax`,
# `make test-torch`, tests/test_backends.py) only these files are collected, and their tests
# marked `tensorflow_only` are deselected; everything else is TensorFlow's (tf.data pipelines,
# tokenizers, decoding loops, exports, tf.distribute, the CLI).
BACKEND_TEST_FILES = (
    "test_ops.py", "test_masks.py", "test_checks.py", "test_layers.py", "test_multi_head.py",
    "test_chunked.py", "test_linear_attention.py", "test_location_aware.py",
    "test_pointer_generator.py", "test_causal_convolution.py", "test_kv_cache.py",
    "test_monotonic.py", "test_quantization.py", "test_backend_training.py",
)


def pytest_ignore_collect(collection_path, config):
    """Under JAX or PyTorch, only the files of BACKEND_TEST_FILES."""
    if BACKEND == "tensorflow" or collection_path.is_dir():
        return None
    if collection_path.suffix == ".py" and collection_path.name.startswith("test_"):
        return collection_path.name not in BACKEND_TEST_FILES
    return None

# tests/web/: `zoo explore`'s page driven in a real browser, run by `make test-web` (which
# installs the web extras and sets ZOO_WEB_TESTS=1); `make test` and `make test-large` never
# collect it.
collect_ignore = [] if os.environ.get("ZOO_WEB_TESTS") == "1" else ["web"]

# The files whose tests use the session's trained runs (`numbers_run`, `numbers_export`,
# `fashion_run`, below): one xdist work unit, so that one worker trains and exports them once,
# where `--dist loadfile` alone gave the files to both workers and each built them (these six
# files with `-n 2`: 216 s of CPU before, 205 s after; `make test` 501 -> 470 s on the 2-core
# Xeon VM). tests/test_layout.py checks that the list names every file that uses them.
SHARED_RUN_FILES = (
    "test_cli.py", "test_export_int8.py", "test_failure_matrix.py", "test_export_buckets.py",
    "test_runs.py", "test_sampling.py", "test_train_jax.py",
)


# The files that take 5 s or more, longest first (a profiled `make test` on a 2-core VM). `make
# test` gives each pytest-xdist worker a whole file at a time (`--dist loadfile`) in collection
# order (`--no-loadscope-reorder`): starting with the longest files and ending with short ones
# keeps both workers busy to the end, instead of one finishing a long file alone.
# The files of SHARED_RUN_FILES come first, as one work unit (`pytest_xdist_make_scheduler`).
HEAVIEST_FILES = (
    *SHARED_RUN_FILES, "test_backends.py", "test_chaos_train.py", "test_zoo.py",
    "test_distribute.py", "test_budget.py", "test_marian.py", "test_serving_soak.py",
    "test_decode.py", "test_export.py", "test_copy_export.py", "test_run_fixtures.py",
    "test_export_ctranslate2.py",
    "test_tutorials.py",
    "test_bench_translation_smoke.py", "test_layers.py", "test_vit_checkpoints.py",
    "test_monotonic.py", "test_convs2s.py", "test_copy_models.py", "test_tuning.py",
    "test_bench_gpu_smoke.py", "test_chunked.py", "test_export_attacks.py", "test_pipeline.py",
    "test_linear_transformer.py", "test_compare.py", "test_bench_serving_smoke.py",
    "test_text_wordpiece.py", "test_rnnsearch_location.py", "test_multi_head.py",
    "test_runs_options.py", "test_sentencepiece_tokenizer.py", "test_bench_complexity_smoke.py",
    "test_text_vocabulary.py",
)


def pytest_collection_modifyitems(config, items):
    """The tests of HEAVIEST_FILES first, in its order; the others after, as collected.

    Under JAX or PyTorch, the tests marked `tensorflow_only` are deselected.
    """
    if BACKEND != "tensorflow":
        kept = [item for item in items if item.get_closest_marker("tensorflow_only") is None]
        if len(kept) < len(items):
            config.hook.pytest_deselected(items=[item for item in items if item not in kept])
            items[:] = kept
    rank = {name: index for index, name in enumerate(HEAVIEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile`, with the files of SHARED_RUN_FILES as one work unit."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SharedRunsTogether(LoadFileScheduling):
        def _split_scope(self, nodeid):
            path = super()._split_scope(nodeid)
            return "shared runs" if pathlib.PurePath(path).name in SHARED_RUN_FILES else path

    return SharedRunsTogether(config, log)


# Python's garbage collector, made to look at each test's own objects only. By default a full
# collection walks every object the worker process holds (the TensorFlow and Keras modules and
# every fixture still alive: gigabytes late in a session), and the worker paid that walk again
# and again: 157 s of collector time in a 590-s `make test` on a 2-core VM. Instead, each test's
# garbage is collected when it ends and the survivors are frozen (`gc.freeze`: moved where no
# later collection walks them), and collections within a test come less often (the first
# threshold 700 -> 20,000 allocations). Same memory as before (each test's garbage is still
# freed); the suite about 10% faster.
gc.set_threshold(20_000, 20, 20)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    """After the test's fixtures are torn down: free its garbage, freeze what is left."""
    gc.collect()
    gc.freeze()


# `ZOO_TEST_CPU_LOG=FILE make test` appends each test's CPU seconds (user + system, this
# process's threads and the child processes it waited for), wall seconds and node id to FILE:
# CPU time, unlike pytest's `--durations`, hardly changes when other work shares the cores.
_CPU_LOG = os.environ.get("ZOO_TEST_CPU_LOG")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """With ZOO_TEST_CPU_LOG set, record the test's CPU and wall seconds (setup to teardown)."""
    if not _CPU_LOG:
        yield
        return
    import resource
    import time

    def cpu():
        own, children = (resource.getrusage(who) for who in
                         (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
        return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

    cpu_start, wall_start = cpu(), time.perf_counter()
    yield
    with open(_CPU_LOG, "a") as log:
        log.write(f"{cpu() - cpu_start:.2f}\t{time.perf_counter() - wall_start:.2f}\t"
                  f"{os.environ.get('KERAS_BACKEND', 'tensorflow')}\t{item.nodeid}\n")


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
    name counters, graph state) without its own `gc.collect()`: the collection that
    follows each test (`pytest_runtest_teardown` above) walks only that test's objects.
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


# === Runs trained once per session through `zoo train` (and exported through `zoo export`) ===


@dataclasses.dataclass(frozen=True)
class TrainedRun:
    """A tiny run trained once per session (per xdist worker) by `zoo train` in this process.

    Read-only: a test that writes into the run (`zoo evaluate` writes metrics.json)
    copies it first (`shutil.copytree`); the fixture fails at the end of the session if
    a file changed.

    Attributes:
        run_dir: the finished run directory (`zoo train ... --out run_dir`).
        stdout: what `zoo train` printed (Keras' progress, the summary).
        result: the `zoo.runs.RunResult` that `zoo train` got from `zoo.runs.train`.
        overrides: the config fields given with `--set`.
        options: the other options given (`--epochs 2` is `{"epochs": 2}`).
        arrays: the data written for the run, by file stem (`fashion_run`), else None.
    """

    run_dir: pathlib.Path
    stdout: str
    result: object
    overrides: dict
    options: dict
    arrays: dict = None


@dataclasses.dataclass(frozen=True)
class NumbersExport:
    """`zoo export` of the session's `numbers_run` (read-only too).

    Attributes:
        saved_models: the export root (`--to`), holding version 1.
        stdout: what `zoo export` printed.
    """

    saved_models: pathlib.Path
    stdout: str


def _zoo_train(name, data, run_dir, overrides, options):
    """`zoo train NAME --data DATA --out RUN_DIR --set K=V... --OPTION V...` in this process:
    (what it printed, the `RunResult` it got from `zoo.runs.train`)."""
    import keras

    from zoo import runs

    keras.backend.clear_session(free_memory=False)  # the same layer names whichever test asks first
    argv = ["train", name, "--data", data, "--out", run_dir]
    for key, value in overrides.items():
        argv += ["--set", f"{key}={value}"]
    for key, value in options.items():
        argv += [f"--{key.replace('_', '-')}", value]
    real_train, returned = runs.train, []

    def train_and_keep_result(*args, **kwargs):
        returned.append(real_train(*args, **kwargs))
        return returned[-1]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runs, "train", train_and_keep_result)
        code, stdout, err = run_main(*argv)
    assert code == 0 and len(returned) == 1, err[-3000:]
    return stdout, returned[0]


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
    """A `TrainedRun`: transformer-tiny on `numbers`, 2 epochs of 190 pairs (10 more for
    validation), 8 test pairs, seed 3; the batch size left to its default (64 for translation)."""
    run_dir = tmp_path_factory.mktemp("numbers_run") / "run"
    overrides = dict(num_encoder_layers=1, num_decoder_layers=1, d_model=16, num_heads=2,
                     intermediate_dim=32, vocabulary_size=100, max_length=16)
    options = dict(epochs=2, train_size=200, test_size=8, seed=3)
    stdout, result = _zoo_train("transformer-tiny", "numbers", run_dir, overrides, options)
    with _read_only(run_dir, "numbers_run"):
        yield TrainedRun(run_dir, stdout, result, overrides, options)


@pytest.fixture(scope="session")
def numbers_export(numbers_run, tmp_path_factory):
    """A `NumbersExport`: `zoo export RUN --to ROOT` of `numbers_run` through `zoo.cli.main`
    (`run_main`, tests/zoo_cli.py)."""
    root = tmp_path_factory.mktemp("numbers_export") / "saved_models"
    code, stdout, err = run_main("export", numbers_run.run_dir, "--to", root)
    assert code == 0, err[-3000:]
    with _read_only(root, "numbers_export"):
        yield NumbersExport(root, stdout)


@pytest.fixture(scope="session")
def fashion_run(tmp_path_factory):
    """A `TrainedRun`: vit-tiny on tiny Fashion-MNIST IDX files (`fashion_files`: 96 training
    and 16 test images), batches of 32, no validation, 2 epochs stopped after 4 steps."""
    from fashion_files import write_fashion_idx

    root = tmp_path_factory.mktemp("fashion_run")
    arrays = write_fashion_idx(root / "fm")
    overrides = dict(num_layers=1, hidden_dim=16, num_heads=2, mlp_dim=32, patch_size=7)
    options = dict(epochs=2, max_steps=4, batch_size=32, val_ratio=0.0, data_dir=root / "fm")
    stdout, result = _zoo_train("vit-tiny", "fashion-mnist", root / "run", overrides, options)
    with _read_only(root, "fashion_run"):
        yield TrainedRun(root / "run", stdout, result, overrides, options, arrays)


@pytest.fixture
def processes():
    """Starts processes (`start(argv, env, log)`, run from the repository's root, stdout and
    stderr appended to `log`); whatever happens, every one still running is killed at the end."""
    started = []

    def start(argv, env, log):
        with open(log, "ab") as output:
            process = subprocess.Popen(
                argv, env=env, cwd=pathlib.Path(__file__).resolve().parent.parent,
                stdout=output, stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)
