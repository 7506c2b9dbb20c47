"""Weight averaging at the end of a budget: `checkpoints/average.keras`.

Vaswani et al. (2017, section 6.1) averaged the last 5 checkpoints, written
at 10-minute intervals, of runs that lasted days. A run with a budget here
keeps `count` (default 5) snapshots of its weights spread evenly over the
last `window` (default 20%) of the steps its budget affords, the last one at
the end, in `checkpoints/average/step-<n>.npz` (one array per weight, by
variable path). When training ends, `write_average` writes the model with
the mean of each weight over those snapshots as `checkpoints/average.keras`
(`zoo evaluate --checkpoint average`, `zoo export --checkpoint average`).

A resumed run first removes the snapshots of steps it trains again.
"""

import pathlib

import keras
import numpy as np

from zoo import files

COUNT = 5
WINDOW = 0.2
DIRECTORY = "average"


def snapshot_paths(directory):
    """The snapshots in `directory`, by step."""
    paths = pathlib.Path(directory).glob("step-*.npz")
    return sorted(paths, key=lambda path: int(path.stem.split("-")[1]))


def _float_weights(model):
    return [weight for weight in model.weights
            if np.issubdtype(np.dtype(keras.backend.standardize_dtype(weight.dtype)), np.floating)]


def save_snapshot(model, directory, step):
    """The model's float weights at `step`, as `directory/step-<step>.npz`."""
    arrays = {weight.path: np.asarray(weight.numpy()) for weight in _float_weights(model)}
    path = pathlib.Path(directory) / f"step-{step}.npz"
    path.parent.mkdir(parents=True, exist_ok=True)
    files.replace(path, lambda temporary: _save_npz(temporary, arrays))
    return path


def _save_npz(path, arrays):
    with open(path, "wb") as file:  # np.savez would append ".npz" to the temporary name
        np.savez(file, **arrays)


def average_arrays(paths):
    """`{weight path: mean over the snapshots}` of the `.npz` files `paths`."""
    total, count = {}, 0
    for path in paths:
        with np.load(path) as snapshot:
            for name in snapshot.files:
                value = snapshot[name].astype(np.float64)
                total[name] = total[name] + value if name in total else value
        count += 1
    return {name: value / count for name, value in total.items()}


def write_average(model, directory, path, count=COUNT):
    """Write `model` with the mean of its last `count` snapshots in `directory` to `path`
    (a `.keras` file); the model gets its own weights back. Returns the snapshots used."""
    paths = snapshot_paths(directory)[-count:]
    if not paths:
        return []
    mean = average_arrays(paths)
    weights = _float_weights(model)
    missing = [weight.path for weight in weights if weight.path not in mean]
    if missing:
        raise ValueError(f"the snapshots in {directory} lack {missing[:3]}: not this model's")
    own = [np.asarray(weight.numpy()) for weight in weights]
    try:
        for weight in weights:
            weight.assign(mean[weight.path].astype(keras.backend.standardize_dtype(weight.dtype)))
        files.save_model(model, path)
    finally:
        for weight, value in zip(weights, own, strict=True):
            weight.assign(value)
    return paths


class TailSnapshots(keras.callbacks.Callback):
    """Snapshots over the last `window` of a budget's steps, and `average.keras` at the end.

    A snapshot is taken once the step passes `(1 - window) · total` and at least
    `window · total / (count - 1)` steps after the previous one, and at the end of
    training (replacing one less than half that spacing before it); `total()` is read
    at every step (a time limit's corrected prediction).

    Args:
        directory: the run's `checkpoints/` folder.
        total: a function returning the steps the budget affords.
        steps: the steps taken before this call (a resumed run's).
        count, window: see the module docstring.
    """

    def __init__(self, directory, total, steps, count=COUNT, window=WINDOW):
        super().__init__()
        self.directory = pathlib.Path(directory)
        self.snapshots = self.directory / DIRECTORY
        self.total, self.steps = total, steps
        self.count, self.window = count, window
        self.last = None
        self.used = []

    def on_train_begin(self, logs=None):
        for path in snapshot_paths(self.snapshots):  # trained again after a restart
            if int(path.stem.split("-")[1]) > self.steps:
                path.unlink(missing_ok=True)
        taken = snapshot_paths(self.snapshots)
        self.last = int(taken[-1].stem.split("-")[1]) if taken else None

    def on_train_batch_end(self, batch, logs=None):
        self.steps += 1
        total = self.total()
        if self.steps < (1.0 - self.window) * total:
            return
        spacing = self.window * total / max(1, self.count - 1)
        if self.last is None or self.steps - self.last >= spacing:
            self._take()

    def on_train_end(self, logs=None):
        if self.last != self.steps:
            spacing = self.window * self.total() / max(1, self.count - 1)
            if self.last is not None and self.steps - self.last < spacing / 2:
                # A snapshot just before the end: the end's replaces it, keeping the spacing.
                (self.snapshots / f"step-{self.last}.npz").unlink(missing_ok=True)
            self._take()
        self.used = write_average(self.model, self.snapshots, self.directory / "average.keras",
                                  self.count)

    def _take(self):
        save_snapshot(self.model, self.snapshots, self.steps)
        self.last = self.steps
