"""Chaos training: SIGKILL `zoo train` again and again, restart it each time, check what is kept.

Starts `zoo train transformer-tiny --data numbers --max-steps N --steps-per-epoch K
--seed S --out RUN` (a 7,000-parameter Transformer; `--time-limit MINUTES` instead of
`--max-steps` with `--time-limit`), kills it with SIGKILL at `--kills` moments drawn from
`--seed`, restarts the same command after each kill until a process finishes, then checks
the run directory (`tools/chaos_checks.py`) against `--baselines` runs of the same command
that nobody kills. The moments, one per process, of three kinds:

    step   K' steps after the process's first one (K' uniform in 1..2K), then a random
           0-300 ms more: mid-epoch, in validation or in the epoch end's writes
    watch  the moment a temporary checkpoint file (last.keras, best.keras or the backup's
           weights) appears in checkpoints/ or backup/: during the write
    hook   zoo.files' test hook ($ZOO_TEST_KILL_BEFORE_RENAME) kills the process after it
           has written one of last.keras, best.keras, the backup's weights or metadata, or
           history.csv, before the rename: the worst moment of a write

Each process runs as `python tools/chaos_probe.py ARGS` (`python -m zoo ARGS` that counts
its finished steps in a file), which measures the work each kill loses.

    python tools/chaos_train.py                          # 20 kills, --max-steps 240
    python tools/chaos_train.py --time-limit 1.5         # 20 kills, 1.5 minutes of training
    python tools/chaos_train.py --kills 3 --steps 24 --baselines 0 --json report.json
"""

import argparse
import dataclasses
import json
import os
import pathlib
import platform
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tools")]  # this checkout's zoo, chaos_checks

import chaos_checks  # noqa: E402 - tools/ is not a package

from zoo import files  # noqa: E402

PROBE = ROOT / "tools" / "chaos_probe.py"
TINY = ["--set", "num_encoder_layers=1", "--set", "num_decoder_layers=1", "--set", "d_model=16",
        "--set", "num_heads=2", "--set", "intermediate_dim=32", "--set", "vocabulary_size=100",
        "--set", "max_length=16"]
KINDS = ("step", "watch", "hook")
WATCHED = {"last.keras": "last", "best.keras": "best", "backup weights": "epoch-"}
HOOKED = ("checkpoints/last.keras", "checkpoints/best.keras", ".weights.h5",
          "training_metadata.json", "history.csv")
POLL_SECONDS = 0.002


@dataclasses.dataclass
class ChaosOptions:
    """One chaos run and its uninterrupted baselines.

    Attributes:
        steps: `--max-steps` (ignored with `time_limit`).
        steps_per_epoch: `--steps-per-epoch`: the checkpoint interval.
        kills: the SIGKILLs.
        seed: draws the kill moments; also the training's `--seed`.
        time_limit: `--time-limit` minutes instead of `--max-steps`.
        baselines: uninterrupted runs of the same command.
        kinds: the kill kinds, in turn (default: drawn, half `step`, a quarter each other).
        train_size, batch_size: the data (`--train-size`, `--batch-size`).
        out: the folder of the runs and the step logs (default: a new temporary one).
        timeout: seconds one process may take.
        plan: the `Kill`s, in turn, instead of drawn ones (`kills` is then their number).
        extra: more arguments of `zoo train` (e.g. `("--val-ratio", "0")`).
    """

    steps: int = 240
    steps_per_epoch: int = 8
    kills: int = 20
    seed: int = 0
    time_limit: float | None = None
    baselines: int = 3
    kinds: tuple | None = None
    train_size: int = 256
    batch_size: int = 32
    out: pathlib.Path | None = None
    timeout: float = 600.0
    extra: tuple = ()
    plan: tuple | None = None

    def command(self, run_dir):
        budget = (["--time-limit", f"{self.time_limit:g}"] if self.time_limit
                  else ["--max-steps", str(self.steps)])
        return [sys.executable, str(PROBE), "train", "transformer-tiny", "--data", "numbers",
                "--train-size", str(self.train_size), "--test-size", "8",
                "--batch-size", str(self.batch_size), *budget,
                "--steps-per-epoch", str(self.steps_per_epoch), "--seed", str(self.seed),
                *TINY, *self.extra, "--out", str(run_dir)]


@dataclasses.dataclass
class Kill:
    """When to kill one process: `kind` (KINDS), after `steps` (step), `delay` seconds more
    (step), the temporary file's `target` (watch) or the hook's pattern (hook)."""

    kind: str
    steps: int = 0
    delay: float = 0.0
    target: str = ""


def plan_kills(options):
    """The `Kill` of each killed process, drawn from `options.seed`."""
    if options.plan is not None:
        return list(options.plan)
    rng = random.Random(options.seed)
    plan = []
    for index in range(options.kills):
        kind = (options.kinds[index % len(options.kinds)] if options.kinds
                else rng.choices(KINDS, weights=(2, 1, 1))[0])
        plan.append(Kill(kind, steps=rng.randint(1, 2 * options.steps_per_epoch),
                         delay=round(rng.uniform(0.0, 0.3), 3),
                         target=rng.choice(list(WATCHED) if kind == "watch" else HOOKED)))
    return plan


def environment(step_log, kill=None):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop(files.KILL_HOOK, None)
    env["ZOO_CHAOS_STEP_LOG"] = str(step_log)
    if kill is not None and kill.kind == "hook":
        env[files.KILL_HOOK] = kill.target
    return env


def _steps_in(step_log):
    try:
        return os.stat(step_log).st_size
    except FileNotFoundError:
        return 0


def _writing(run_dir, stem):
    """Whether a hidden temporary file named after `stem` is in checkpoints/ or backup/."""
    for folder in ("checkpoints", "backup"):
        try:
            names = os.listdir(run_dir / folder)
        except FileNotFoundError:
            continue
        if any(name.startswith(".") and stem in name and "tmp" in name for name in names):
            return True
    return False


def _due(kill, run_dir, step_log, reached):
    """Whether to kill now (`reached`: when the step count was reached, or None)."""
    if kill.kind == "watch":
        return _writing(run_dir, WATCHED[kill.target]), reached
    if kill.kind == "step":
        if reached is None and _steps_in(step_log) >= kill.steps:
            reached = time.monotonic()
        return reached is not None and time.monotonic() - reached >= kill.delay, reached
    return False, reached  # hook: the process kills itself


def _children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_process(options, run_dir, step_log, kill=None, output=None):
    """Run the command once, killing it as `kill` says; `(exit code, wall seconds, CPU
    seconds)`."""
    started, cpu = time.monotonic(), _children_cpu()
    with open(output or os.devnull, "ab") as log:
        process = subprocess.Popen(options.command(run_dir), env=environment(step_log, kill),
                                   stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
        reached = None
        while process.poll() is None:
            due, reached = (False, None) if kill is None else _due(kill, run_dir, step_log,
                                                                   reached)
            if due or time.monotonic() - started > options.timeout:
                process.send_signal(signal.SIGKILL)
                break
            time.sleep(POLL_SECONDS)
        code = process.wait()
    if time.monotonic() - started > options.timeout:
        raise RuntimeError(f"{run_dir}: a process ran past {options.timeout:g} s")
    return code, time.monotonic() - started, _children_cpu() - cpu


def _kept(run_dir):
    """`(steps, training seconds)` the run directory keeps for the next process (its backup)."""
    metadata = {}
    path = run_dir / "backup" / "training_metadata.json"
    if path.is_file():
        metadata = files.read_json(path, dict)
    return int(metadata.get("steps", 0)), float(metadata.get("train_seconds", 0.0))


def chaos(options, folder):
    """Kill and restart until a process finishes; the list of processes (attempts)."""
    run_dir, attempts = folder / "run", []
    plan = plan_kills(options)
    while not (run_dir / "summary.json").is_file():
        kill = plan[len(attempts)] if len(attempts) < len(plan) else None
        steps, seconds = _kept(run_dir)
        step_log = folder / f"steps-{len(attempts)}.log"
        code, wall, cpu = run_process(options, run_dir, step_log, kill, folder / "chaos.log")
        if code not in (0, -signal.SIGKILL):
            raise RuntimeError(f"process {len(attempts)} ended with exit code {code}: "
                               f"see {folder / 'chaos.log'}")
        attempts.append({"kill": None if kill is None else dataclasses.asdict(kill),
                         "killed": code == -signal.SIGKILL, "exit_code": code,
                         "kept_steps": steps, "kept_seconds": seconds,
                         "executed_steps": _steps_in(step_log), "wall_seconds": round(wall, 2),
                         "cpu_seconds": round(cpu, 2),
                         "partial_files_after": chaos_checks.partial_files(run_dir)})
        if len(attempts) > options.kills + 5:
            raise RuntimeError(f"{len(attempts)} processes and no summary.json")
    final_steps = chaos_checks.check_summary(run_dir)["steps"]
    for attempt, after in zip(attempts, attempts[1:] + [None]):
        kept_after = final_steps if after is None else after["kept_steps"]
        attempt["lost_steps"] = attempt["executed_steps"] - (kept_after - attempt["kept_steps"])
    return attempts


def baselines(options, folder):
    """Run the command `options.baselines` times, unkilled; their run directories."""
    dirs = []
    for index in range(options.baselines):
        run_dir = folder / f"uninterrupted-{index}"
        code, _, _ = run_process(options, run_dir, folder / f"uninterrupted-{index}.log",
                              output=folder / "uninterrupted.log")
        if code != 0:
            raise RuntimeError(f"uninterrupted run {index} ended with exit code {code}")
        dirs.append(run_dir)
    return dirs


def machine():
    """The CPU model, cores and load average (other processes share the cores)."""
    model = "unknown"
    with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {"cpu": model, "cores": os.cpu_count(), "python": platform.python_version(),
            "load_average": [round(value, 2) for value in os.getloadavg()]}


def run(options):
    """The chaos run, the baselines and every check: the report (a dict)."""
    folder = pathlib.Path(options.out or tempfile.mkdtemp(prefix="chaos-train-"))
    for child in ("run", *(f"uninterrupted-{i}" for i in range(options.baselines))):
        shutil.rmtree(folder / child, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    before, started = machine(), time.monotonic()
    attempts = chaos(options, folder)
    chaos_seconds = time.monotonic() - started
    baseline_dirs = baselines(options, folder)
    max_steps = None if options.time_limit else options.steps
    checks = chaos_checks.check_run(folder / "run", attempts, baseline_dirs,
                                    kills=sum(a["killed"] for a in attempts),
                                    max_steps=max_steps, steps_per_epoch=options.steps_per_epoch)
    if options.time_limit:
        checks["time_budget"] = chaos_checks.check_time_budget(folder / "run", attempts,
                                                               options.time_limit)
    return {
        "command": " ".join(["python -m zoo", *options.command(folder / "run")[2:]]),
        "options": {**dataclasses.asdict(options), "out": str(folder)},
        "kills": sum(attempt["killed"] for attempt in attempts),
        "kills_by_kind": _by_kind(attempts),
        "processes": len(attempts),
        "chaos_seconds": round(chaos_seconds, 1),
        "chaos_cpu_seconds": round(sum(attempt["cpu_seconds"] for attempt in attempts), 1),
        "machine_before": before, "machine_after": machine(),
        "ok": all(check["ok"] for check in checks.values()),
        "checks": checks,
        "attempts": attempts,
    }


def _by_kind(attempts):
    counts = {}
    for attempt in attempts:
        if attempt["killed"]:
            kind = attempt["kill"]["kind"]
            counts[kind] = counts.get(kind, 0) + 1
    return counts


def _figures(name, check):
    """One line of figures of a check, for the table."""
    if name == "summary":
        return f"steps {check.get('steps')}, epochs {check.get('epochs')}, " \
               f"stopped by {check.get('stopped_by')}"
    if name == "history_once":
        return f"{check['epochs']} epochs, duplicates {check['duplicates'] or 'none'}"
    if name == "steps_exact":
        return (f"expected {check['expected'] or '-'}; summary {check['summary_steps']}, "
                f"optimizer iterations {check['optimizer_iterations']}, history "
                f"{check['history_epochs']} epochs x K = {check['history_epochs_x_steps_per_epoch']}")
    if name == "no_partial_files":
        return f"left: {', '.join(check['left']) or 'none'}; backup/ left: {check['backup_left']}"
    if name == "checkpoints_load":
        return ", ".join(f"{path}: {result}" for path, result in check["checkpoints"].items())
    if name == "val_loss_within_spread":
        if "skipped" in check:
            return check["skipped"]
        low, high = check["spread"]
        return f"{check['val_loss']:.6f} in [{low:.6f}, {high:.6f}]"
    if name == "work_lost":
        return (f"{check['lost_steps']} steps lost <= bound {check['bound']} (max "
                f"{check['max_per_kill']} per kill; {check['executed_steps']} steps run in all)")
    if name == "time_budget":
        return (f"counted {check['counted_seconds']} s of {check['limit_seconds']:g} s; wall "
                f"{check['wall_seconds_all_processes']} s; rate after the last step "
                f"{check['rate_after_the_end']:.3g} (peak {check['peak_rate']:.3g})")
    return json.dumps(check)


def markdown(report):
    lines = [f"`{report['command']}`", "",
             f"{report['kills']} kills ({report['kills_by_kind']}), {report['processes']} "
             f"processes, {report['chaos_seconds']} s; load average "
             f"{report['machine_before']['load_average']} -> "
             f"{report['machine_after']['load_average']}", "",
             "| check | result | figures |", "|---|---|---|"]
    for name, check in report["checks"].items():
        lines.append(f"| {name} | {'pass' if check['ok'] else 'FAIL'} | "
                     f"{_figures(name, check)} |")
    return "\n".join(lines) + "\n"


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    defaults = ChaosOptions()
    parser.add_argument("--steps", type=int, default=defaults.steps, help="--max-steps N")
    parser.add_argument("--steps-per-epoch", type=int, default=defaults.steps_per_epoch)
    parser.add_argument("--kills", type=int, default=defaults.kills)
    parser.add_argument("--seed", type=int, default=defaults.seed,
                        help="draws the kill moments; the training's --seed too")
    parser.add_argument("--time-limit", type=float, metavar="MINUTES",
                        help="train with --time-limit MINUTES instead of --max-steps")
    parser.add_argument("--baselines", type=int, default=defaults.baselines,
                        help="uninterrupted runs to compare the final val_loss with")
    parser.add_argument("--train-size", type=int, default=defaults.train_size)
    parser.add_argument("--out", type=pathlib.Path, help="folder of the runs (default: temporary)")
    parser.add_argument("--json", type=pathlib.Path, help="write the report here too")
    args = parser.parse_args(argv)
    options = ChaosOptions(steps=args.steps, steps_per_epoch=args.steps_per_epoch,
                           kills=args.kills, seed=args.seed, time_limit=args.time_limit,
                           baselines=args.baselines, train_size=args.train_size, out=args.out)
    return options, args.json


def main(argv):
    options, json_path = parse(argv)
    report = run(options)
    text = json.dumps(report, indent=2, default=str)
    if json_path is not None:
        json_path.write_text(text + "\n", encoding="utf-8")
    print(text)
    print(markdown(report))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
