"""Training curves for `zoo.plot`: metrics per epoch from a Keras `History`, its
dict, or a `keras.callbacks.CSVLogger` file."""

import csv
import math
import pathlib

import numpy as np
from matplotlib.ticker import MaxNLocator

from zoo.plot.figures import finish, new_figure


def read_history(path):
    """A `keras.callbacks.CSVLogger` file as `{"epoch": [...], "loss": [...], ...}` of floats.

    Cells that are not numbers (empty, "NA") become NaN.
    """
    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"history file not found: {path}")
    with path.open(newline="", encoding="utf-8") as file:
        reader = csv.DictReader(file)
        if not reader.fieldnames:
            raise ValueError(f"{path} is empty; expected a CSVLogger file with a header row.")
        history = {name: [] for name in reader.fieldnames}
        for row in reader:
            for name in reader.fieldnames:
                try:
                    history[name].append(float(row[name]))
                except (TypeError, ValueError):
                    history[name].append(float("nan"))
    return history


def training_curves(history, metrics=None, title=None, path=None):
    """Metrics per epoch, one panel per metric with its `val_` twin.

    Args:
        history: a `keras.callbacks.History` (what `fit` returns), its
            `.history` dict of lists, or the path of a
            `keras.callbacks.CSVLogger` file (whose `epoch` column, counted
            from 0, gives the x axis).
        metrics: names to draw (without `val_`), e.g. `["loss", "accuracy"]`;
            default every metric in the history (the learning rate included).
        title: figure title.
        path: also save the PNG there.

    Returns:
        `matplotlib.figure.Figure`.
    """
    history = _as_arrays(history)
    epochs = history.pop("epoch", None)
    count = len(next(iter(history.values())))
    x = epochs + 1 if epochs is not None else np.arange(1, count + 1)
    metrics = _chosen_metrics(history, metrics)

    columns = min(len(metrics), 3)
    rows = math.ceil(len(metrics) / columns)
    figure = new_figure(4.2 * columns, 3.2 * rows)
    axes = figure.subplots(rows, columns, squeeze=False).ravel()
    for ax, name in zip(axes, metrics):
        for key, label, style in ((name, "train", "-"), ("val_" + name, "validation", "--")):
            if key in history:
                ax.plot(x, history[key], style, marker="o" if count <= 30 else None,
                        markersize=3, label=label)
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title(name)
        ax.grid(alpha=0.3)
        if "val_" + name in history:
            ax.legend(fontsize="small")
    for ax in axes[len(metrics):]:
        ax.set_visible(False)
    if title:
        figure.suptitle(title)
    return finish(figure, path)


def _as_arrays(history):
    """Any of the accepted history forms as `{name: float64 (epochs,)}`, every metric
    with the same, non-zero number of epochs."""
    if isinstance(history, (str, pathlib.Path)):
        history = read_history(history)
    elif hasattr(history, "history") and isinstance(history.history, dict):
        history = history.history
    if not isinstance(history, dict) or not history:
        raise ValueError(
            "history must be a keras History, a non-empty dict of lists or a CSVLogger path; "
            f"received {type(history).__name__}."
        )
    converted = {}
    for name, values in history.items():
        try:
            converted[str(name)] = np.asarray(values, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            raise ValueError(
                f"history[{name!r}] must be a list of numbers (one per epoch); received "
                f"{values!r:.80}."
            ) from None
    lengths = {len(values) for values in converted.values()}
    if len(lengths) != 1 or 0 in lengths:
        raise ValueError(
            "history: every metric needs the same, non-zero number of epochs; received "
            f"{ {name: len(values) for name, values in converted.items()} }."
        )
    return converted


def _chosen_metrics(history, metrics):
    """The metric names to draw (without `val_`): `metrics`, checked, or all of them."""
    available = [name for name in history if not name.startswith("val_")]
    available += [name[4:] for name in history if name.startswith("val_")
                  and name[4:] not in history]
    if metrics is None:
        metrics = available
    else:
        if isinstance(metrics, str):
            metrics = [metrics]
        unknown = [name for name in metrics if name not in available]
        if unknown:
            raise ValueError(
                f"metrics: {unknown} not in the history; it has {available}."
            )
    if not metrics:
        raise ValueError("metrics is empty; nothing to draw.")
    return list(metrics)
