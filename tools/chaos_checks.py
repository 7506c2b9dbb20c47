"""What `tools/chaos_train.py` checks in a run directory after repeated kills.

Each check returns `{"ok": bool, ...figures}`; `check_run` gathers them:

    summary          summary.json is there and says completed
    history_once     history.csv lists epochs 0..n-1, each exactly once
    steps_exact      summary.json's steps, the optimizer's iterations in
                     checkpoints/last.keras and the epochs of history.csv agree
                     (and equal --max-steps when it ends the run)
    no_partial_files no hidden or .tmp file, no backup/ left in the run directory
    checkpoints_load keras.saving.load_model reads every .keras file
    work_lost        steps finished by killed processes and not kept <= kills x steps per epoch
"""

import csv
import pathlib
import re

import keras
import numpy as np

import zoo  # noqa: F401 - registers the zoo's layers and schedules for load_model
from zoo import files

# A partial file: zoo.files' temporaries are hidden (".last.<random>.tmp.keras", ".tmp-2-...").
PARTIAL = re.compile(r"^\.|\.tmp(\.|$)")


def history_epochs(run_dir):
    """The `epoch` column of history.csv as written (duplicates kept)."""
    path = pathlib.Path(run_dir) / "history.csv"
    if not path.is_file():
        return []
    with path.open(newline="", encoding="utf-8") as file:
        return [int(row["epoch"]) for row in csv.DictReader(file)]


def check_summary(run_dir):
    path = pathlib.Path(run_dir) / "summary.json"
    if not path.is_file():
        return {"ok": False, "summary": None}
    summary = files.read_json(path, dict)
    return {"ok": bool(summary.get("completed")), "steps": summary.get("steps"),
            "epochs": summary.get("epochs"), "stopped_by": summary.get("stopped_by")}


def check_history(run_dir):
    epochs = history_epochs(run_dir)
    return {"ok": bool(epochs) and epochs == list(range(len(epochs))), "epochs": len(epochs),
            "duplicates": sorted({e for e in epochs if epochs.count(e) > 1})}


def optimizer_state(path):
    """`(iterations, learning rate of the last update, of the next one, peak rate or None)` of
    the compiled model saved in `path`."""
    model = keras.saving.load_model(path)
    optimizer = model.optimizer
    optimizer = getattr(optimizer, "inner_optimizer", None) or optimizer
    iterations = int(keras.ops.convert_to_numpy(optimizer.iterations))
    schedule = optimizer._learning_rate
    if not callable(schedule):
        rate = float(keras.ops.convert_to_numpy(schedule))
        return iterations, rate, rate, None

    def rate(step):
        return float(keras.ops.convert_to_numpy(schedule(step)))

    return iterations, rate(max(iterations - 1, 0)), rate(iterations), getattr(schedule, "peak",
                                                                              None)


def check_steps(run_dir, max_steps, steps_per_epoch):
    """summary.json's steps, last.keras's optimizer iterations and history.csv's epochs agree;
    with `max_steps` (the budget that ends the run) all of them are `max_steps`."""
    run_dir = pathlib.Path(run_dir)
    summary = check_summary(run_dir).get("steps")
    epochs = len(history_epochs(run_dir))
    last = run_dir / "checkpoints" / "last.keras"
    iterations = optimizer_state(last)[0] if last.is_file() else None
    fits_epochs = summary is not None and (epochs - 1) * steps_per_epoch < summary \
        <= epochs * steps_per_epoch
    ok = summary is not None and summary == iterations and fits_epochs
    if max_steps is not None:
        ok = ok and summary == max_steps == epochs * steps_per_epoch
    return {"ok": bool(ok), "expected": max_steps, "summary_steps": summary,
            "optimizer_iterations": iterations, "history_epochs": epochs,
            "history_epochs_x_steps_per_epoch": epochs * steps_per_epoch}


def partial_files(run_dir):
    """The hidden or `.tmp` files and folders under `run_dir`, relative to it."""
    run_dir = pathlib.Path(run_dir)
    return sorted(str(path.relative_to(run_dir)) for path in run_dir.rglob("*")
                  if PARTIAL.search(path.name))


def check_partial_files(run_dir):
    left = partial_files(run_dir)
    backup = (pathlib.Path(run_dir) / "backup").exists()
    return {"ok": not left and not backup, "left": left, "backup_left": backup}


def check_checkpoints(run_dir):
    """Every `.keras` file under `run_dir` loads (`keras.saving.load_model`)."""
    results = {}
    for path in sorted(pathlib.Path(run_dir).rglob("*.keras")):
        name = str(path.relative_to(run_dir))
        try:
            keras.saving.load_model(path)
            results[name] = "loads"
        except Exception as error:  # what fails to load is the finding, whatever the error
            results[name] = f"{type(error).__name__}: {' '.join(str(error).split())[:200]}"
    return {"ok": bool(results) and all(v == "loads" for v in results.values()),
            "checkpoints": results}


def check_work_lost(attempts, kills, steps_per_epoch):
    """Steps finished by each process minus the steps its run directory kept for the next one
    (the backup's counter), summed over the killed processes, against `kills x steps_per_epoch`."""
    lost = [attempt["lost_steps"] for attempt in attempts if attempt["killed"]]
    bound = kills * steps_per_epoch
    finished = [attempt["lost_steps"] for attempt in attempts if not attempt["killed"]]
    return {"ok": sum(lost) <= bound and all(steps == 0 for steps in finished),
            "lost_steps": sum(lost), "bound": bound, "per_kill": lost,
            "max_per_kill": max(lost, default=0),
            "executed_steps": sum(attempt["executed_steps"] for attempt in attempts)}


def final_val_loss(run_dir):
    summary = files.read_json(pathlib.Path(run_dir) / "summary.json", dict)
    return float(summary["final"].get("val_loss", np.nan))


def check_val_loss(run_dir, baseline_dirs):
    """The final val_loss against the min..max of the uninterrupted runs'."""
    value = final_val_loss(run_dir)
    baselines = [final_val_loss(path) for path in baseline_dirs]
    low, high = min(baselines), max(baselines)
    return {"ok": bool(low <= value <= high), "val_loss": value, "baselines": baselines,
            "spread": [low, high], "equal_to_a_baseline": value in baselines,
            "distance_to_spread": max(low - value, value - high, 0.0)}


def check_run(run_dir, attempts, baseline_dirs, *, kills, max_steps, steps_per_epoch):
    """Every check of the module docstring, by name."""
    return {
        "summary": check_summary(run_dir),
        "history_once": check_history(run_dir),
        "steps_exact": check_steps(run_dir, max_steps, steps_per_epoch),
        "no_partial_files": check_partial_files(run_dir),
        "checkpoints_load": check_checkpoints(run_dir),
        "val_loss_within_spread": (check_val_loss(run_dir, baseline_dirs) if baseline_dirs
                                   else {"ok": True, "skipped": "no uninterrupted runs"}),
        "work_lost": check_work_lost(attempts, kills, steps_per_epoch),
    }


def check_time_budget(run_dir, attempts, time_limit):
    """A `--time-limit` run: the training time it counted (the backup's `train_seconds` when the
    last process started, plus that process's time in `fit`) against the limit and against the
    wall time of every process; the learning rate at the end against the peak."""
    run_dir = pathlib.Path(run_dir)
    summary = files.read_json(run_dir / "summary.json", dict)
    counted = attempts[-1]["kept_seconds"] + summary["train_seconds_this_call"]
    wall = sum(attempt["wall_seconds"] for attempt in attempts)
    iterations, last_rate, next_rate, peak = optimizer_state(run_dir / "checkpoints" / "last.keras")
    predicted = summary.get("budget", {}).get("predicted_steps_final")
    return {
        "ok": bool(summary.get("stopped_by") == "time_limit" and next_rate == 0.0),
        "limit_seconds": 60.0 * time_limit, "counted_seconds": round(counted, 2),
        "wall_seconds_all_processes": round(wall, 2), "stopped_by": summary.get("stopped_by"),
        "steps": iterations, "predicted_steps_final": predicted, "peak_rate": peak,
        "rate_of_last_update": last_rate, "rate_after_the_end": next_rate,
    }
