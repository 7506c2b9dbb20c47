"""A JAX job of two processes (`--strategy multiworker` on JAX: `keras.distribution.initialize`
and `DataParallel` over both processes' devices), proven on CPU (#62).

docs/distributed.md's two-process command lines, smaller, one CPU device per process, JAX's
Gloo collectives over localhost (tests/distributed_worker.py wraps each): process 1 stops
in the middle of epoch 1 and both are killed; the same commands resume from epoch 1. They
end with the weights of one process trained on the same global batches, interrupted at the
same step and resumed. Only process 0 writes the run directory.
"""

import json
import os
import re
import signal
import sys
import time

import pytest
from test_distribute import (
    TESTS,
    TINY_ARGS,
    _events,
    _free_ports,
    _tail,
    _wait,
    assert_replicas_hold_the_reference_weights,
    readme_block_commands,
)

TIMEOUT = 300  # seconds for any one process; each takes about 30 on the 2-core VM
PROCESS_FLAGS = ("--coordinator", "--num-processes", "--process-id")


def readme_two_process_commands():
    """The zoo argv of each line of docs/distributed.md's two-process JAX block."""
    commands = readme_block_commands("KERAS_BACKEND=jax")
    for words in commands:
        assert words[:2] == ["KERAS_BACKEND=jax", "zoo"], words
    return [words[2:] for words in commands]


def _jax_env(temp=None):
    """One CPU device per process (the suite's JAX pass asks for two), the suite's XLA flags."""
    flags = re.sub(r"--xla_force_host_platform_device_count=\d+", "",
                   os.environ.get("XLA_FLAGS", "")).strip()
    env = dict(os.environ, KERAS_BACKEND="jax", XLA_FLAGS=flags, TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONUNBUFFERED="1")
    if temp is not None:
        env["TMPDIR"] = str(temp)
    return env


def _with(argv, flag, value):
    argv = list(argv)
    argv[argv.index(flag) + 1] = str(value)
    return argv


def _without_process_flags(argv):
    kept, skip = [], False
    for word in argv:
        if skip:
            skip = False
        elif word in PROCESS_FLAGS:
            skip = True
        else:
            kept.append(word)
    return kept


@pytest.mark.large
def test_two_jax_processes_train_as_one_and_resume_after_a_kill(tmp_path, processes):
    commands = readme_two_process_commands()
    assert [c[c.index("--process-id") + 1] for c in commands] == ["0", "1"]
    for argv in commands:
        assert argv[:2] == ["train", "transformer-tiny"]
        assert argv[argv.index("--strategy") + 1] == "multiworker"
    run_dir = tmp_path / "two-processes"

    def start_job(round_, pause_at=None):
        port = _free_ports(1)[0]
        temp = tmp_path / f"tmp-{round_}"  # each process's temporary folders go here
        temp.mkdir()
        job = []
        for index, argv in enumerate(commands):
            argv = _with(_with(argv, "--out", run_dir), "--coordinator", f"localhost:{port}")
            files = {k: tmp_path / f"{k}-{round_}-{index}" for k in ("log", "out")}
            files["weights"] = tmp_path / f"weights-{round_}-{index}.npz"
            probe = ["--weights", str(files["weights"]), "--log", str(files["log"]), "--no-export"]
            if pause_at and index == 1:  # only process 1 stops
                probe += ["--pause-at", pause_at]
            argv = [sys.executable, str(TESTS / "distributed_worker.py"), *probe, "--", *argv,
                    *TINY_ARGS]
            job.append((processes(argv, _jax_env(temp), files["out"]), files))
        return job, temp

    # The reference: one process, the same global batch (2 x 4), interrupted where process 1
    # stops and resumed by the same command (a resumed run reshuffles from the start).
    reference = {"weights": tmp_path / "reference.npz", "log": tmp_path / "reference.log",
                 "out": tmp_path / "reference.out"}
    reference_argv = _with(_without_process_flags(_with(commands[0], "--strategy", "default")),
                           "--out", tmp_path / "reference")
    reference_process = processes(
        [sys.executable, str(TESTS / "distributed_worker.py"), "--weights",
         str(reference["weights"]), "--log", str(reference["log"]), "--no-export",
         "--interrupt-at", "1:1", "--", *reference_argv, *TINY_ARGS, "--batch-size", "8"],
        _jax_env(), reference["out"])

    # --- Round 1: process 1 stops after the 2nd step of epoch 1; SIGKILL it, then process 0
    # (which waits for it at the next step's all-reduce).
    job, _ = start_job(1, pause_at="1:1")
    (first, first_files), (second, second_files) = job
    deadline = time.monotonic() + TIMEOUT
    while not any(e["event"] == "paused" for e in _events(second_files["log"])):
        for process, files in job:
            if process.poll() is not None:
                pytest.fail(f"a process ended early (rc {process.returncode}):\n"
                            f"{_tail(files['out'])}")
        if time.monotonic() > deadline:
            pytest.fail(f"no pause before the deadline:\n{_tail(second_files['out'])}")
        time.sleep(0.2)
    os.kill(second.pid, signal.SIGKILL)
    os.kill(first.pid, signal.SIGKILL)
    for process in (first, second):
        process.wait(timeout=30)
    for _, files in job:
        assert [e["epoch"] for e in _events(files["log"]) if e["event"] == "epoch_end"] == [0]
    assert json.loads((run_dir / "backup/training_metadata.json").read_text())["epoch"] == 1
    assert not (run_dir / "summary.json").exists()

    # --- Round 2: the same commands resume from the backup of epoch 0.
    job, temp = start_job(2)
    deadline = time.monotonic() + TIMEOUT
    for process, files in job:
        assert _wait(process, deadline, files["out"]) == 0, _tail(files["out"])
    assert _wait(reference_process, deadline, reference["out"]) == 0, _tail(reference["out"])
    for index, (_, files) in enumerate(job):
        events = _events(files["log"])
        assert events[0]["event"] == "start" and events[0]["chief"] == (index == 0)
        assert events[0]["replicas"] == 2
        assert [e["epoch"] for e in events if e["event"] == "epoch_begin"] == [1, 2]
        assert events[-1]["event"] == "done" and events[-1]["initial_epoch"] == 1

    # Both processes hold the same weights, those of the one process (the key bias, whose
    # gradient is rounding noise, aside: tests/test_distribute.py's NOISE_ONLY).
    assert_replicas_hold_the_reference_weights(job, reference)

    # Only process 0 wrote the run directory; the backup is gone; process 1 left nothing.
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["epochs"] == 3 and summary["resumed_from_epoch"] == 1
    history = (run_dir / "history.csv").read_text().splitlines()
    assert [row.split(",")[0] for row in history[1:]] == ["0", "1", "2"]
    config = json.loads((run_dir / "config.json").read_text())
    assert config["training"]["strategy"] == "multiworker"
    assert config["training"]["backend"] == "jax"
    assert not (run_dir / "backup").exists() and list(temp.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("two-processes")) \
        == ["two-processes"]
