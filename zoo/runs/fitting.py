"""Fitting a run's model: `model.fit` with the run's callbacks, then `summary.json`.

`fit` trains (checkpoints, backup, history, TensorBoard, step and time
limits: `zoo.runs.callbacks`); `finish` writes `curves.png` and
`summary.json`, removes the backup and returns the `RunResult`.
"""

import dataclasses
import datetime
import pathlib
import shutil
import sys
import time
import warnings

import keras
import numpy as np

from zoo import files, plot
from zoo.runs.callbacks import Backup, RunCallbacks, build_optimizer
from zoo.runs.rundir import MONITOR, history_dict, read_history


@dataclasses.dataclass
class RunResult:
    """What `train` returns.

    Attributes:
        run_dir: the run directory (`pathlib.Path`).
        model: the trained `keras.Model` (weights of the last epoch).
        history: every epoch's logs so far, from `history.csv`, as
            `{"epoch": [...], "loss": [...], ...}` (a resumed run included).
        epochs: epochs completed in total.
        initial_epoch: the epoch this call started from (> 0 when resumed).
        stopped_by: None, `"max_steps"` or `"time_limit"`.
        train_seconds: time spent in `fit` by this call.
        summary: the content of `summary.json`.
        data: the loaded dataset (`TranslationData` or `ImageData`), test
            split included; `evaluate(..., data=result.data)` reuses it.
    """

    run_dir: pathlib.Path
    model: keras.Model
    history: dict
    epochs: int
    initial_epoch: int
    stopped_by: str | None
    train_seconds: float
    summary: dict
    data: object = None



@dataclasses.dataclass
class Fitted:
    """What `fit` hands to `finish`."""

    history_path: pathlib.Path
    backup: Backup
    stopped_by: str | None
    train_seconds: float
    budget: dict | None = None


def fit(model, train_data, val_data, training, run_dir, write_dir, callbacks, verbose, quiet,
        pace=None):
    """`model.fit` with the run's callbacks; `pace` (`zoo.runs.pacing.Pace`): the epochs, their
    steps, the training time so far and a budget's callbacks."""
    history_path = write_dir / "history.csv"
    run_callbacks = RunCallbacks(training, run_dir, write_dir, history_path,
                                 has_validation=val_data is not None,
                                 spent_seconds=pace.spent_seconds if pace else 0.0)
    if pace is not None:
        pace.attach(run_callbacks, write_dir / "checkpoints")
    build_optimizer(model)
    if verbose is None:
        verbose = 1 if sys.stdout.isatty() else 2
    if quiet and verbose == 2:
        verbose = 0
    started = time.monotonic()
    with warnings.catch_warnings():
        # Bucketed datasets have no known length, so Keras warns at each first epoch end.
        warnings.filterwarnings("ignore", message="Your input ran out of data")
        model.fit(
            pace.train_data(train_data) if pace else train_data,
            validation_data=val_data,
            epochs=pace.epochs if pace else training["epochs"],
            steps_per_epoch=pace.steps_per_epoch if pace else None,
            callbacks=run_callbacks.in_order() + list(callbacks or []),
            verbose=verbose,
            shuffle=False,  # the datasets shuffle themselves, seeded
        )
    return Fitted(history_path, run_callbacks.backup, run_callbacks.stopped_by(),
                  time.monotonic() - started, pace.summary() if pace else None)


def finish(name, run_dir, write_dir, model, data, fitted, quiet):
    """`curves.png` and `summary.json` (the run is finished), then the backup goes."""
    rows = read_history(fitted.history_path)
    # The last epoch's logs (from history.csv: also right when nothing was left to train).
    final = {key: value for key, value in (rows[-1] if rows else {}).items() if key != "epoch"}
    summary = {
        "completed": True,
        "epochs": len(rows),
        "resumed_from_epoch": fitted.backup.restored_epoch,
        "steps": fitted.backup.steps,
        "stopped_by": fitted.stopped_by,
        "train_seconds_this_call": round(fitted.train_seconds, 2),
        "final": {key: float(value) for key, value in final.items()},
        "finished": datetime.datetime.now().isoformat(timespec="seconds"),
    }
    if fitted.budget is not None:
        summary["budget"] = fitted.budget
    best = [row.get(MONITOR, row.get("loss")) for row in rows]
    if best:
        summary["best_epoch"] = int(rows[int(np.nanargmin(best))]["epoch"])
    if rows:
        plot.training_curves(fitted.history_path, title=name, path=write_dir / "curves.png")
    files.write_json(write_dir / "summary.json", summary)
    shutil.rmtree(write_dir / "backup", ignore_errors=True)
    if not quiet:
        _print_training_summary(name, run_dir, summary, rows)
    return RunResult(
        run_dir=run_dir,
        model=model,
        history=history_dict(rows),
        epochs=len(rows),
        initial_epoch=fitted.backup.restored_epoch,
        stopped_by=fitted.stopped_by,
        train_seconds=fitted.train_seconds,
        summary=summary,
        data=data,
    )


def _print_training_summary(name, run_dir, summary, rows):
    final = summary["final"]
    final_metrics = ", ".join(
        f"{key} {value:.4g}" for key, value in final.items()
        if key not in ("learning_rate", "predicted_steps")
    )
    how = f" (stopped by {summary['stopped_by']})" if summary["stopped_by"] else ""
    resumed = (f", resumed from epoch {summary['resumed_from_epoch']}"
               if summary["resumed_from_epoch"] else "")
    print(f"\nTrained {name}: {summary['epochs']} epochs, {summary['steps']} steps in "
          f"{summary['train_seconds_this_call'] / 60:.1f} min{how}{resumed}")
    print(f"  final: {final_metrics}")
    print(f"  run directory: {run_dir} (config.json, checkpoints/, history.csv, curves.png, logs/)")
