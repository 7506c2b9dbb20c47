"""Distributed training (`zoo.distribute`) proven on CPU.

- `MirroredStrategy` over 2 logical CPUs vs one device, every model family:
  training, validation and evaluation on batches that do not split evenly
  over the replicas (tests/distributed_mirrored.py, in a fresh process); and the
  gradient's global norm clipped after the replicas' sum (tests/distributed_clipping.py).
- `MultiWorkerMirroredStrategy`: docs/distributed.md's two-worker `zoo train` command
  lines on 127.0.0.1 (tests/distributed_worker.py), one worker SIGKILLed in
  the middle of an epoch, the job restarted and resumed, compared with a
  single-replica run interrupted at the same step and resumed (in this
  process, while the workers run).
The API's own tests: tests/test_distribute_{strategies,replica_sync,sharding,workers}.py.
"""

import json
import os
import pathlib
import re
import shlex
import signal
import socket
import subprocess
import sys
import time

import distributed_worker
import keras
import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONUNBUFFERED="1")
TIMEOUT = 240  # seconds for any one process; they take seconds on an idle machine

# The key bias of dot-product attention has no effect on the output (it adds
# q·b_k to every score of a row, which the softmax cancels), so its gradient
# is rounding noise, which Adam's normalisation (ε = 1e-9) turns into steps of
# full size: it is the one weight whose value differs between two summation
# orders. Everything else must match.
NOISE_ONLY = re.compile(r"key_bias")


def assert_replicas_hold_the_reference_weights(job, reference_files):
    """The two processes of `job` (`[(process, files)]`) saved identical weights, equal to
    those of the one-process run `reference_files` (the NOISE_ONLY ones aside)."""
    weights = [np.load(files["weights"]) for _, files in job]
    expected = np.load(reference_files["weights"])
    assert sorted(weights[0].files) == sorted(weights[1].files) == sorted(expected.files)
    for name in expected.files:
        np.testing.assert_array_equal(weights[1][name], weights[0][name], err_msg=name)
        if not NOISE_ONLY.search(name):
            np.testing.assert_allclose(
                weights[0][name], expected[name], rtol=1e-3, atol=2e-4, err_msg=name
            )


def _tail(path, lines=40):
    try:
        return "\n".join(pathlib.Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no output)"


# === MirroredStrategy on 2 logical CPUs ===


@pytest.mark.large
def test_mirrored_on_two_cpus_matches_one_device(tmp_path):
    out = tmp_path / "mirrored.npz"
    result = subprocess.run(
        [sys.executable, str(TESTS / "distributed_mirrored.py"), str(out)],
        capture_output=True, text=True, timeout=TIMEOUT, env=ENV, cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    runs = np.load(out, allow_pickle=True)
    for family in ("transformer", "seq2seq", "vit"):
        names = list(runs[f"{family}/names"])
        single = {k: runs[f"{family}/single/{k}"] for k in ("initial", "final")}
        mirrored = {k: runs[f"{family}/mirrored/{k}"] for k in ("initial", "final")}
        # Same seed, same weights before training.
        for i, name in enumerate(names):
            np.testing.assert_array_equal(mirrored["initial"][i], single["initial"][i], err_msg=name)
        # The same per-step losses and metrics (fit's running means over the
        # epoch, whose last batch splits 4 / 1), the same epoch logs (loss,
        # val_loss on batches that split unevenly, metrics) and the same
        # `evaluate` results (a last batch of 1: one replica empty).
        for kind, count in (("log", 2), ("epoch", 4), ("evaluate", 2)):
            prefix = f"{family}/single/{kind}/"
            keys = sorted(k[len(prefix):] for k in runs.files if k.startswith(prefix))
            assert "loss" in keys and len(keys) == count, (family, kind, keys)
            for key in keys:
                np.testing.assert_allclose(
                    runs[f"{family}/mirrored/{kind}/{key}"], runs[f"{family}/single/{kind}/{key}"],
                    rtol=1e-5, err_msg=f"{family} {kind} {key}",
                )
            if kind == "log":
                assert len(runs[f"{family}/single/log/loss"]) == 3, family
        # The same weights after training; and training moved them.
        moved = 0.0
        for i, name in enumerate(names):
            moved = max(moved, float(np.abs(single["final"][i] - single["initial"][i]).max()))
            if not NOISE_ONLY.search(name):
                np.testing.assert_allclose(
                    mirrored["final"][i], single["final"][i], rtol=1e-4, atol=2e-5,
                    err_msg=f"{family} {name}",
                )
        assert moved > 1e-2, (family, moved)
    # The ViT's augmentation step counter counts steps (8 + 8 + 5 examples: 3), not steps ×
    # replicas.
    step = list(runs["vit/names"]).index("augmentation/step")
    for run in ("single", "mirrored"):
        assert int(runs[f"vit/{run}/final"][step]) == 3, run


def _clip_global(gradients, clipnorm):
    """NumPy's `g · c / max(‖g‖, c)`, one norm over every variable's gradient."""
    norm = np.sqrt(sum(np.sum(np.square(g)) for g in gradients))
    return [g * clipnorm / max(norm, clipnorm) for g in gradients]


@pytest.mark.large
def test_mirrored_global_clipnorm_clips_the_replicas_summed_gradient(tmp_path):
    """`global_clipnorm` under 2 replicas (tests/distributed_clipping.py): the norm is that of
    both variables' gradients summed over the replicas, as on one device; clipping each
    replica's part (Keras 3.15 alone), or each variable's, gives other weights."""
    import distributed_clipping as script

    out = tmp_path / "clipping.npz"
    result = subprocess.run([sys.executable, str(TESTS / "distributed_clipping.py"), str(out)],
                            capture_output=True, text=True, timeout=TIMEOUT, env=ENV, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-4000:]
    got = np.load(out)
    assert int(got["iterations"]) == 2
    names, c = ("a", "b"), script.CLIPNORM
    weights = [script.INITIAL[name].astype("float64") for name in names]
    for step, replicas in enumerate(script.GRADIENTS, start=1):
        per_replica = [[np.array(r[name]) for name in names] for r in replicas]
        summed = [sum(parts) for parts in zip(*per_replica)]
        update = _clip_global(summed, c)
        for i, name in enumerate(names):
            np.testing.assert_allclose(got[f"{name}{step}"], weights[i] - update[i], rtol=1e-6,
                                       atol=1e-6, err_msg=f"{name} after step {step}")
        weights = [w - u for w, u in zip(weights, update)]
        if step == 1:  # clipped: the alternatives give other updates than the sum's global clip
            each_replica = [sum(p) for p in zip(*[_clip_global(g, c) for g in per_replica])]
            each_variable = [_clip_global([g], c)[0] for g in summed]
            for other in (each_replica, each_variable):
                assert max(np.abs(o - u).max() for o, u in zip(other, update)) > 0.05
        else:  # below the threshold: left whole
            np.testing.assert_allclose(update[0], summed[0])


# === MultiWorkerMirroredStrategy: docs/distributed.md's commands, a worker killed, a restart ===

# Appended to docs/distributed.md's command lines: seconds instead of minutes (4 steps an epoch).
# The held-out pairs are only drawn, not used: 32 + 40 numbers take all ten 1-digit ones
# (`datasets.numbers` then shares the rest among the longer numbers).
TINY_ARGS = [
    "--train-size", "32", "--test-size", "40", "--batch-size", "4", "--val-ratio", "0",
    "--set", "num_encoder_layers=1", "--set", "num_decoder_layers=1", "--set", "d_model=16",
    "--set", "num_heads=2", "--set", "intermediate_dim=32", "--set", "dropout=0.0",
    "--set", "warmup_steps=4", "--set", "max_length=32",
    # The multi-worker equivalence below (rtol 1e-3 against one replica) was established
    # with WordPiece; with the SentencePiece default the token embeddings of the two-worker
    # run drift further from the reference (8.6% of them past rtol 1e-3, up to 0.33); not
    # yet understood, so these runs keep WordPiece.
    "--tokenizer", "wordpiece",
]


def readme_block_commands(start):
    """The commands of docs/distributed.md's ```bash block whose text begins with `start`, as
    word lists, each line's closing `&` and the block's `wait` left out."""
    section = (ROOT / "docs" / "distributed.md").read_text(encoding="utf-8")
    block = re.search(rf"```bash\n({re.escape(start)}.*?)```", section, re.S).group(1)
    commands = []
    for line in block.replace("\\\n", " ").splitlines():
        words = shlex.split(line)
        if words and words[0] != "wait":
            assert words[-1] == "&", line
            commands.append(words[:-1])
    return commands


def readme_two_worker_commands():
    """`[(TF_CONFIG dict, zoo argv)]` of docs/distributed.md's CPU two-worker block."""
    commands = []
    for words in readme_block_commands("TF_CONFIG="):
        assert words[0].startswith("TF_CONFIG=") and words[1] == "zoo", words
        commands.append((json.loads(words[0].split("=", 1)[1]), words[2:]))
    return commands


def _free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _events(path):
    if not pathlib.Path(path).exists():
        return []
    return [json.loads(line) for line in pathlib.Path(path).read_text().splitlines() if line]


def _wait(process, deadline, output):
    try:
        return process.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        pytest.fail(f"pid {process.pid} still running after its deadline:\n{_tail(output)}")


@pytest.mark.large
def test_multiworker_readme_commands_kill_a_worker_and_resume(tmp_path, processes):
    commands = readme_two_worker_commands()
    assert len(commands) == 2
    assert [c["task"] for c, _ in commands] == [
        {"type": "worker", "index": 0}, {"type": "worker", "index": 1}
    ]
    for _, argv in commands:
        assert argv[:2] == ["train", "transformer-tiny"] and "--strategy" in argv
        assert argv[argv.index("--strategy") + 1] == "multiworker"
        assert argv[argv.index("--epochs") + 1] == "3"
    run_dir = tmp_path / "two-workers"

    def worker_argv(argv, weights, log, pause_at=None):
        argv = list(argv)
        argv[argv.index("--out") + 1] = str(run_dir)
        probe = ["--weights", str(weights), "--log", str(log)]
        if pause_at:
            probe += ["--pause-at", pause_at]
        return [sys.executable, str(TESTS / "distributed_worker.py"), *probe, "--", *argv, *TINY_ARGS]

    def start_job(round_, pause_at=None):
        ports = _free_ports(2)
        temp = tmp_path / f"tmp-{round_}"  # each worker's temporary folders go here
        temp.mkdir()
        job = []
        for index, (tf_config, argv) in enumerate(commands):
            tf_config = dict(tf_config, cluster={"worker": [f"127.0.0.1:{p}" for p in ports]})
            env = dict(ENV, TF_CONFIG=json.dumps(tf_config), TMPDIR=str(temp))
            files = {k: tmp_path / f"{k}-{round_}-{index}" for k in ("weights", "log", "out")}
            files["weights"] = files["weights"].with_suffix(".npz")
            pause = pause_at if index == 1 else None  # only worker 1 stops
            process = processes(
                worker_argv(argv, files["weights"], files["log"], pause), env, files["out"]
            )
            job.append((process, files))
        return job, temp

    # The reference: the same training on a single replica (`--strategy mirrored`
    # on this process's one device, see distributed_worker.py), interrupted at the
    # same point (Ctrl-C) and resumed by the same command: a resumed run reshuffles
    # its data from the start (`shuffle(seed=...)` starts over), so an interrupted
    # run sees other batches after the restart than an uninterrupted one; the
    # interruption itself must change nothing else.
    _, reference_argv = commands[0]
    reference_argv = list(reference_argv)
    reference_argv[reference_argv.index("--strategy") + 1] = "mirrored"
    reference_argv[reference_argv.index("--out") + 1] = str(tmp_path / "reference")
    reference_files = {"weights": tmp_path / "reference.npz", "log": tmp_path / "reference.log"}

    def paused(log):
        return any(e["event"] == "paused" for e in _events(log))

    # --- Round 1: worker 1 stops after the 2nd step of epoch 1; SIGKILL it, then the chief
    # (which cannot go on without worker 1: it waits at the next all-reduce).
    job, _ = start_job(1, pause_at="1:1")
    (chief, chief_files), (worker, worker_files) = job

    # The reference trains here while the workers start.
    keras.backend.clear_session()  # the layer names of a new process
    assert distributed_worker.main(
        ["--weights", str(reference_files["weights"]), "--log", str(reference_files["log"]),
         "--no-export", "--interrupt-at", "1:1", "--",
         *reference_argv, *TINY_ARGS, "--batch-size", "8"]  # the same global batch
    ) == 0
    deadline = time.monotonic() + TIMEOUT
    while not paused(worker_files["log"]):
        for process, files in job:
            if process.poll() is not None:
                pytest.fail(f"a process ended early (rc {process.returncode}):\n{_tail(files['out'])}")
        if time.monotonic() > deadline:
            pytest.fail(f"no pause before the deadline:\n{_tail(worker_files['out'])}")
        time.sleep(0.2)
    os.kill(worker.pid, signal.SIGKILL)
    os.kill(chief.pid, signal.SIGKILL)
    worker.wait(timeout=30)
    chief.wait(timeout=30)
    assert worker.returncode == -signal.SIGKILL
    for _, files in job:
        ends = [e["epoch"] for e in _events(files["log"]) if e["event"] == "epoch_end"]
        assert ends == [0], ends  # epoch 0 done, epoch 1 interrupted
    backup = json.loads((run_dir / "backup" / "training_metadata.json").read_text())
    assert backup["epoch"] == 1
    assert not (run_dir / "summary.json").exists()

    # --- Round 2: the same commands again resume from the backup of epoch 0.
    job, temp = start_job(2)
    deadline = time.monotonic() + TIMEOUT
    for process, files in job:
        assert _wait(process, deadline, files["out"]) == 0, _tail(files["out"])
    # The reference stopped where worker 1 was killed, and the same command resumed it.
    events = _events(reference_files["log"])
    assert [(e["event"], e.get("epoch")) for e in events if "epoch" in e and e["event"] != "epoch_end"
            ] == [("epoch_begin", 0), ("epoch_begin", 1), ("interrupted", 1), ("epoch_begin", 1),
                  ("epoch_begin", 2)], events

    for index, (_, files) in enumerate(job):
        events = _events(files["log"])
        assert events[0]["event"] == "start" and events[0]["chief"] == (index == 0)
        assert events[0]["replicas"] == 2
        # Epoch 0 is not trained again; epoch 1 (interrupted) and 2 are.
        assert [e["epoch"] for e in events if e["event"] == "epoch_begin"] == [1, 2]
        done = events[-1]
        assert done["event"] == "done" and done["initial_epoch"] == 1
        if index == 0:
            assert done["epochs"] == 3  # (worker 1 counts the epochs of its own temporary history)
            assert done["export"] == str(run_dir / "export") and done["export_exists"]
        else:  # worker 1 exported into a temporary folder, removed since
            assert not done["export"].startswith(str(run_dir)) and not done["export_exists"]

    # Both workers end with identical weights, equal to the single replica's.
    assert_replicas_hold_the_reference_weights(job, reference_files)

    # Only the chief wrote the run directory: config, history (each epoch once),
    # final checkpoints and export; the backup is gone, and worker 1 left
    # nothing in its temporary folder.
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["epochs"] == 3 and summary["resumed_from_epoch"] == 1
    history = (run_dir / "history.csv").read_text().splitlines()
    assert [row.split(",")[0] for row in history[1:]] == ["0", "1", "2"]
    for path in ("config.json", "checkpoints/last.keras", "export/saved_model.pb",
                 "tokenizer/vocab.txt"):
        assert (run_dir / path).is_file(), path
    assert not (run_dir / "backup").exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("two-workers")) == [
        "two-workers"
    ]
    assert list(temp.iterdir()) == []
