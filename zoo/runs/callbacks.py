"""The Keras callbacks of a run: a history, checkpoints and a backup that a kill at any
moment leaves consistent, and the two stopping rules (`max_steps`, `time_limit`)."""

import pathlib
import time

import keras
import numpy as np

from zoo import distribute, files
from zoo.runs.rundir import MONITOR, read_history, write_history


def build_optimizer(model):
    """Makes the optimizer's variables (Adam's moments) of a built `model`, in its strategy's
    scope, if they are not made yet; returns `model`. Made inside `fit`'s first trace instead,
    they make TensorFlow trace the training step twice (once to create them, then again to
    run it); a restored backup needs them to load the optimizer's state into."""
    if model.built and model.optimizer is not None and not model.optimizer.built:
        with distribute.scope(model):
            model.optimizer.build(model.trainable_variables)
    return model


class HistoryCSV(keras.callbacks.Callback):
    """`history.csv`, one row per epoch, that stays right across restarts.

    Like `keras.callbacks.CSVLogger(append=True)`, but the file is rewritten
    atomically at each epoch end, and the rows of epochs at or after the first
    epoch of this `fit` (epochs about to be trained again after a restart)
    are dropped first, so no epoch is listed twice.

    Args:
        path: the CSV file.
    """

    def __init__(self, path):
        super().__init__()
        self.path = pathlib.Path(path)
        self._rows = None

    def on_train_begin(self, logs=None):
        self._rows = None

    def on_epoch_begin(self, epoch, logs=None):
        if self._rows is None:
            self._rows = [row for row in read_history(self.path) if row["epoch"] < epoch]
            if self._rows or self.path.exists():
                write_history(self.path, self._rows)

    def on_epoch_end(self, epoch, logs=None):
        if self._rows is None:
            self.on_epoch_begin(epoch)
        row = {"epoch": epoch}
        for key, value in (logs or {}).items():
            try:
                row[key] = float(value)
            except (TypeError, ValueError):
                continue
        self._rows = [r for r in self._rows if r["epoch"] < epoch] + [row]
        write_history(self.path, self._rows)


class Checkpoints(keras.callbacks.Callback):
    """`last.keras` after every epoch and `best.keras` when `monitor` improves.

    Both are written atomically. After a restart the best value so far is
    read back from `history_path`, so `best.keras` is only replaced by a
    better epoch.

    Args:
        directory: where to write `last.keras` and `best.keras`.
        monitor: the logged value to minimise (falls back to `loss` when the
            logs have no `monitor`, e.g. without validation data).
        history_path: the run's `history.csv`.
    """

    def __init__(self, directory, monitor=MONITOR, history_path=None):
        super().__init__()
        self.directory = pathlib.Path(directory)
        self.monitor = monitor
        self.history_path = history_path
        self.best = None
        self.best_epoch = None
        self._started = False

    def on_train_begin(self, logs=None):
        self._started = False

    def on_epoch_begin(self, epoch, logs=None):
        if self._started:
            return
        self._started = True
        self.best, self.best_epoch = None, None
        if self.history_path is not None and (self.directory / "best.keras").exists():
            for row in read_history(self.history_path):
                value = row.get(self.monitor, row.get("loss"))
                if row["epoch"] < epoch and value is not None and np.isfinite(value):
                    if self.best is None or value < self.best:
                        self.best, self.best_epoch = value, row["epoch"]

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        last = self.directory / "last.keras"
        files.save_model(self.model, last)
        value = logs.get(self.monitor, logs.get("loss"))
        if value is None:
            return
        value = float(value)
        if np.isfinite(value) and (self.best is None or value < self.best):
            self.best, self.best_epoch = value, epoch
            files.copy(last, self.directory / "best.keras")


class Backup(keras.callbacks.BackupAndRestore):
    """`keras.callbacks.BackupAndRestore` whose backup cannot be half written.

    Each epoch's weights (model and optimizer) go to a new file
    `epoch-<n>.weights.h5`; then `training_metadata.json`, which names that
    file, is replaced atomically; then older weight files are removed. A kill
    at any moment leaves a consistent (weights, epoch) pair. On multi-worker
    runs the chief's backup (`read_dir`) is what every worker restores from.

    Args:
        backup_dir: where this process writes its backup.
        read_dir: where to restore from (default `backup_dir`).
        delete_checkpoint: remove the backup when `fit` ends (`train` removes
            it itself, only once `summary.json` is written).
        extra: functions returning more fields for `training_metadata.json` (the
            training time, a budget's corrected schedule), called at each backup.
    """

    def __init__(self, backup_dir, read_dir=None, delete_checkpoint=True, extra=()):
        super().__init__(backup_dir, save_freq="epoch", delete_checkpoint=delete_checkpoint)
        self.read_dir = pathlib.Path(read_dir or backup_dir)
        self.extra = list(extra)
        self.restored_epoch = 0
        self.steps = 0  # training steps taken in total, restored with the backup

    def on_train_begin(self, logs=None):
        self._load_model()

    def on_train_batch_end(self, batch, logs=None):
        # Counted here rather than read from `optimizer.iterations`, which Keras also
        # advances on the empty step that ends an epoch of unknown length.
        self.steps += 1

    def _load_model(self):
        metadata_path = self.read_dir / "training_metadata.json"
        self.restored_epoch, self.steps = 0, 0
        if not metadata_path.exists():
            return
        metadata = files.read_json(metadata_path, dict)
        weights = self.read_dir / metadata["weights"]
        build_optimizer(self.model)
        try:
            self.model.load_weights(weights)
        except (OSError, ValueError) as error:  # h5py: truncated or not HDF5
            if not weights.is_file():
                raise
            raise files.CorruptFileError(
                weights, "the backup's weights do not load", error,
                hint=f"remove {self.read_dir} to train again from the start") from None
        self.model._initial_epoch = metadata["epoch"]  # what fit() starts from, as in Keras
        self.restored_epoch = metadata["epoch"]
        self.steps = metadata.get("steps", 0)

    def _save_model(self):
        directory = pathlib.Path(self.backup_dir)
        directory.mkdir(parents=True, exist_ok=True)
        name = f"epoch-{self._current_epoch}.weights.h5"
        files.replace(directory / name,
                      lambda temporary: self.model.save_weights(temporary, overwrite=True))
        metadata = {"epoch": self._current_epoch, "batch": 0, "steps": self.steps, "weights": name}
        for fields in self.extra:
            metadata.update(fields())
        files.write_json(directory / "training_metadata.json", metadata)
        for old in directory.glob("epoch-*.weights.h5"):
            if old.name != name:
                old.unlink(missing_ok=True)


def has_backup(run_dir):
    """Whether `run_dir` holds a backup to restore: an epoch of the run has ended."""
    return (pathlib.Path(run_dir) / "backup" / "training_metadata.json").is_file()


def backup_metadata(run_dir):
    """The backup's `training_metadata.json` (epoch, steps, training time, ...), or {}."""
    if not has_backup(run_dir):
        return {}
    return files.read_json(pathlib.Path(run_dir) / "backup" / "training_metadata.json", dict)


class StopAfterSteps(keras.callbacks.Callback):
    """Stops training once `counter.steps` (a `Backup`, whose count survives a
    restart) reaches `max_steps`; place it after `counter` in the callbacks."""

    def __init__(self, max_steps, counter):
        super().__init__()
        self.max_steps = max_steps
        self.counter = counter
        self.stopped = False

    def on_train_batch_end(self, batch, logs=None):
        if self.counter.steps >= self.max_steps:
            self.model.stop_training = True
            self.stopped = True


class TimeLimit(keras.callbacks.Callback):
    """Stops training once `seconds` of training have passed: `spent` before this `fit`
    (earlier calls of a resumed run, timing before `fit`) and the time in it (checked
    after every batch).

    The check reads the clock once per step (`step_elapsed`), and a time budget's
    prediction (`zoo.runs.budget.StepPredictor`) reads that same reading: the budget ends
    its schedule at the step where this stops training, whatever time passes between the
    two callbacks."""

    def __init__(self, seconds, spent=0.0):
        super().__init__()
        self.seconds = seconds
        self.spent = spent
        self.start = None
        self.stopped = False
        self._reading = None

    def elapsed(self):
        """The seconds of the limit used so far."""
        return self.spent + (time.monotonic() - self.start if self.start is not None else 0.0)

    def step_elapsed(self):
        """`elapsed()` as read at the end of the current step: read once, on first use."""
        if self._reading is None:
            self._reading = self.elapsed()
        return self._reading

    def on_train_begin(self, logs=None):
        self.start = time.monotonic()
        self._reading = None

    def on_train_batch_begin(self, batch, logs=None):
        self._reading = None

    def on_train_batch_end(self, batch, logs=None):
        if self.step_elapsed() >= self.seconds:
            self.model.stop_training = True
            self.stopped = True

    def state(self):
        """What the backup keeps: the training time so far."""
        return {"train_seconds": round(self.elapsed(), 3)}


class RunCallbacks:
    """The callbacks of a run, made from its training options.

    `in_order()`: the order matters at each epoch end (history, checkpoints, then
    the backup), so a kill between two of them makes the epoch run again, never
    skips it. The backup outlives `fit` until `summary.json` is written: a kill in
    between then resumes at the last epoch (nothing to train) instead of starting over.
    """

    def __init__(self, training, run_dir, write_dir, history_path, has_validation,
                 spent_seconds=0.0):
        self.history = HistoryCSV(history_path)
        self.checkpoints = Checkpoints(write_dir / "checkpoints",
                                       MONITOR if has_validation else "loss", history_path)
        self.tensorboard = keras.callbacks.TensorBoard(str(write_dir / "logs"), write_graph=False)
        self.stop_time = (TimeLimit(60.0 * training["time_limit"], spent_seconds)
                          if training["time_limit"] else None)
        self.backup = Backup(write_dir / "backup", read_dir=run_dir / "backup",
                             delete_checkpoint=False,
                             extra=[self.stop_time.state] if self.stop_time else [])
        self.stop_steps = (StopAfterSteps(training["max_steps"], self.backup)
                           if training["max_steps"] else None)
        self.first, self.last = [], []  # a budget's schedule first, its snapshots last

    def add(self, callback, first=False):
        """Another callback of the run: `first` (before the history: its epoch-end logs are
        written), else after the others; its `state()`, if any, goes into the backup."""
        (self.first if first else self.last).append(callback)
        if hasattr(callback, "state"):
            self.backup.extra.append(callback.state)

    def in_order(self):
        callbacks = [*self.first, self.history, self.checkpoints, self.tensorboard, self.backup]
        return callbacks + [c for c in (self.stop_steps, self.stop_time) if c is not None] \
            + self.last

    def stopped_by(self):
        """None, or the rule that ended training: `"max_steps"` or `"time_limit"`."""
        if self.stop_steps is not None and self.stop_steps.stopped:
            return "max_steps"
        if self.stop_time is not None and self.stop_time.stopped:
            return "time_limit"
        return None
