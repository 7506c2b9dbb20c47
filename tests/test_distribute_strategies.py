"""Tests for zoo/distribute/strategies.py: strategy names, TF_CONFIG, XLA over CPU
replicas, and a TPU that is not there (quick one-line errors)."""

import json
import os
import pathlib
import socket
import subprocess
import sys
import time
import types

import pytest
import tensorflow as tf

from zoo import distribute

ROOT = pathlib.Path(__file__).resolve().parent.parent
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONUNBUFFERED="1")
TIMEOUT = 240  # seconds for any one process; they take seconds on an idle machine


def test_get_strategy_names_and_errors():
    assert distribute.get_strategy("default") is tf.distribute.get_strategy()
    strategy = tf.distribute.get_strategy()
    assert distribute.get_strategy(strategy) is strategy
    with pytest.raises(ValueError, match="default, mirrored, multiworker, tpu"):
        distribute.get_strategy("gpus")
    assert distribute.global_batch_size(32, strategy) == 32
    with pytest.raises(ValueError, match="per_replica"):
        distribute.global_batch_size(0, strategy)
    assert distribute.default_policy(strategy) is None
    assert distribute.is_chief(strategy)
    assert distribute.worker_dir("runs/x", strategy) == "runs/x"
    assert distribute.worker_path("runs/x/model.keras", strategy) == "runs/x/model.keras"
    assert distribute.worker_backup_dir("runs/x/backup", strategy) == "runs/x/backup"


@pytest.mark.parametrize(
    "tf_config, message",
    [
        ("{not json", "not valid JSON"),
        ('{"task": {"type": "worker", "index": 0}}', "'cluster' and a 'task'"),
        ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 1}}', "not in its cluster"),
        ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "chief", "index": 0}}', "not in its cluster"),
    ],
)
def test_multiworker_rejects_malformed_tf_config(monkeypatch, tf_config, message):
    monkeypatch.setenv("TF_CONFIG", tf_config)
    with pytest.raises(ValueError, match="TF_CONFIG") as error:
        distribute.get_strategy("multiworker")
    assert message in str(error.value)


def _fake_strategy(*devices):
    return types.SimpleNamespace(
        num_replicas_in_sync=len(devices),
        extended=types.SimpleNamespace(worker_devices=devices),
    )


def test_check_jit_compile_refuses_xla_over_several_cpu_replicas():
    two_cpus = _fake_strategy(
        "/job:localhost/replica:0/task:0/device:CPU:0", "/job:localhost/replica:0/task:0/device:CPU:1"
    )
    with pytest.raises(ValueError, match="cannot compile a train step distributed over 2 CPU"):
        distribute.check_jit_compile(two_cpus, True)
    distribute.check_jit_compile(two_cpus, False)
    # A worker of a two-worker cluster lists its own device; the replicas are 2.
    worker = _fake_strategy("/job:worker/replica:0/task:1/device:CPU:0")
    worker.num_replicas_in_sync = 2
    with pytest.raises(ValueError, match="without --jit"):
        distribute.check_jit_compile(worker, True)
    # GPUs (NCCL), one replica, and the default strategy compile fine.
    gpus = _fake_strategy("/job:localhost/replica:0/task:0/device:GPU:0",
                          "/job:localhost/replica:0/task:0/device:GPU:1")
    distribute.check_jit_compile(gpus, True)
    distribute.check_jit_compile(_fake_strategy("/job:localhost/replica:0/task:0/device:CPU:0"), True)
    distribute.check_jit_compile(tf.distribute.get_strategy(), True)
    distribute.check_jit_compile(None, True)  # the current strategy: the default one here


# One fresh process runs both command lines below: it splits its CPU into two logical
# devices first (only possible before TensorFlow initialises its devices), then runs
# `zoo train --jit` with `--strategy mirrored` (`zoo.cli.main`), then `python -m zoo train
# --strategy tpu --tpu local` (the `zoo/__main__.py` entry point, `runpy`): each command's
# exit code, stdout and stderr (what Python writes) are one JSON line.
TWO_COMMANDS = """
import contextlib, io, json, runpy, sys
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import zoo
from zoo import cli, distribute


def jit(argv):
    with distribute.get_strategy("mirrored").scope():  # zoo.get in a scope
        try:
            zoo.get("vit-tiny", jit_compile=True)
        except ValueError as error:
            print("zoo.get refused:", error)
    return cli.main(argv)


def python_m_zoo(argv):
    sys.argv = ["zoo", *argv]
    try:
        runpy.run_module("zoo", run_name="__main__", alter_sys=True)
    except SystemExit as exit_:
        return exit_.code
    return 0


commands = json.loads(sys.argv[1])
for name, run in (("jit", jit), ("tpu", python_m_zoo)):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(commands[name])
    print(json.dumps({"name": name, "code": code, "stdout": out.getvalue(),
                      "stderr": err.getvalue()}), flush=True)
"""


@pytest.fixture(scope="module")
def two_commands(tmp_path_factory):
    """`{name: {"code", "stdout", "stderr", "out"}}` of the two command lines, run in one
    fresh process; `out` is the run directory each was given."""
    base = tmp_path_factory.mktemp("strategy-errors")
    commands = {
        "jit": ["train", "transformer-tiny", "--data", "numbers", "--strategy", "mirrored",
                "--jit", "--out", str(base / "jit")],
        "tpu": ["train", "transformer-tiny", "--data", "numbers", "--strategy", "tpu",
                "--tpu", "local", "--out", str(base / "tpu")],
    }
    result = subprocess.run(
        [sys.executable, "-c", TWO_COMMANDS, json.dumps(commands)],
        capture_output=True, text=True, timeout=TIMEOUT, env=ENV, cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    runs = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert [run["name"] for run in runs] == ["jit", "tpu"], result.stdout[-4000:]
    return {run["name"]: dict(run, out=base / run["name"]) for run in runs}


@pytest.mark.large
def test_train_with_jit_on_two_cpu_replicas_is_a_one_line_error(two_commands):
    """What TensorFlow would do at the first step (a traceback, or an abort under
    MultiWorkerMirroredStrategy) is refused before the data is loaded."""
    result = two_commands["jit"]
    assert result["code"] == 2, result["stderr"][-4000:]
    errors = [line for line in result["stderr"].splitlines() if line.startswith("zoo train: error:")]
    assert len(errors) == 1 and "2 CPU replicas (MirroredStrategy)" in errors[0], result["stderr"]
    assert "Traceback" not in result["stderr"]
    assert "zoo.get refused: XLA" in result["stdout"], result["stdout"]
    assert "Loading" not in result["stdout"] + result["stderr"]  # refused before the data
    assert not result["out"].exists()


def _closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("tpu", ["no-such-tpu", "grpc://127.0.0.1:{port}"])
def test_tpu_without_tpu_is_a_quick_one_line_error(tpu, expect_network_block):
    tpu = tpu.format(port=_closed_port())
    started = time.monotonic()
    with pytest.raises(ValueError, match="No TPU found") as error:
        distribute.get_strategy("tpu", tpu=tpu)
    assert time.monotonic() - started < 15
    assert "\n" not in str(error.value) and tpu in str(error.value)
    # A TPU name is resolved through the Google Cloud metadata server, the one
    # host TensorFlow asks (here refused by the tests' network guard); an address
    # is dialled directly.
    hosts = {target.rsplit(":", 1)[0] for target in expect_network_block}
    assert hosts <= {"metadata.google.internal"}, hosts
    assert bool(hosts) == (tpu == "no-such-tpu")


def test_cli_train_on_tpu_without_tpu_exits_2_with_one_line(two_commands):
    # `--tpu local` goes all the way to initialize_tpu_system, in a fresh process.
    result = two_commands["tpu"]
    assert result["code"] == 2, result["stderr"][-2000:]
    errors = [line for line in result["stderr"].splitlines() if line.startswith("zoo train: error:")]
    assert len(errors) == 1 and "No TPU found (--tpu 'local')" in errors[0], result["stderr"][-2000:]
    assert not result["out"].exists()


def test_the_process_settings_of_a_jax_job_are_refused_elsewhere(monkeypatch):
    """`--coordinator`, `--num-processes`, `--process-id` (`distribute.Processes`) start a JAX
    job (tests/test_jax_processes.py); with TensorFlow, whose workers read TF_CONFIG, they are
    refused before any work, and none given (the CLI's default) changes nothing."""
    processes = distribute.Processes("localhost:1234", 2, 0)
    for strategy in ("multiworker", "mirrored", None):
        with pytest.raises(ValueError, match="are for --strategy multiworker on JAX"):
            distribute.place(strategy, processes=processes)
    assert distribute.place("default", processes=distribute.Processes()).name == "default"
    for name in distribute.placement.PROCESS_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert not distribute.Processes().given() and processes.given()
    monkeypatch.setenv("KERAS_DISTRIBUTION_NUM_PROCESSES", "2")
    assert distribute.Processes().given()
