"""What every `zoo.plot` picture shares: a figure on its own Agg canvas, saving it,
and checking the arrays and token labels it is given."""


import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from zoo import files

DPI = 100


def new_figure(width, height):
    """A figure with its own Agg canvas (never registered with pyplot)."""
    figure = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def finish(figure, path):
    """Save `figure` as a PNG at `path` (folders created) unless `path` is None; return it."""
    if path is not None:
        files.replace(path, lambda temporary: figure.savefig(temporary, dpi=DPI, format="png"))
    return figure


def checked_array(name, value, ranks):
    """`value` as a finite float64 numpy array of one of the `ranks`, else ValueError."""
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f"`{name}` must be a numeric array; received {type(value).__name__} "
                         f"({error}).") from None
    if array.ndim not in ranks:
        raise ValueError(
            f"`{name}` must have rank {' or '.join(map(str, ranks))}; received shape "
            f"{array.shape}."
        )
    if array.size == 0:
        raise ValueError(f"`{name}` is empty; received shape {array.shape}.")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"`{name}` holds NaN or infinite values.")
    return array


def token_labels(name, tokens, length):
    """`length` labels as strings (default 0..length-1); ValueError if the count differs."""
    if tokens is None:
        return [str(i) for i in range(length)]
    if isinstance(tokens, (str, bytes)):
        raise ValueError(f"`{name}` must be a list of tokens, not one string; received {tokens!r}.")
    tokens = [t.decode("utf-8") if isinstance(t, bytes) else str(t) for t in tokens]
    if len(tokens) != length:
        raise ValueError(
            f"`{name}` has {len(tokens)} tokens but the weights have {length} along that axis."
        )
    return tokens
