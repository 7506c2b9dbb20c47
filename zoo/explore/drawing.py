"""The pictures of `zoo explore`, drawn by `zoo.plot`: heat maps as inline SVG (their token
labels stay text, which a reader can select and a browser test can read), the training
curves, and the run's files in words."""

import io
import json

import matplotlib

from zoo import files, plot
from zoo.errors import ZooError

MEAN = "mean of the heads"


def svg(figure):
    """`figure` as an SVG document (str), its text kept as text, not paths."""
    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "zoo-explore"}):
        figure.savefig(buffer, format="svg", metadata={"Date": None})  # the same map, the same SVG
    return buffer.getvalue()


def head_choices(translation, name):
    """The heads of map `name` to choose from: the mean, then `head 0` ... (one map: none)."""
    weights = translation.maps.get(name)
    if weights is None or weights.ndim == 2:
        return [MEAN]
    return [MEAN] + [f"head {i}" for i in range(weights.shape[0])]


def heatmap(translation, name, head=MEAN):
    """Attention map `name` of a `Translation` as inline SVG in a `div.attention-map`: one
    head (`"head 2"`) or the heads' mean, its rows and columns labelled with the tokens."""
    if name not in translation.maps:
        raise ZooError(f"no attention map {name!r}; the model has {sorted(translation.maps)}")
    weights = translation.maps[name]
    rows, columns = translation.axes(name)
    chosen = "mean" if head in (None, MEAN) or weights.ndim == 2 else int(head.split()[-1])
    figure = plot.attention_heatmap(weights, source_tokens=columns, target_tokens=rows,
                                    head=chosen, title=name)
    return f'<div class="attention-map">{svg(figure)}</div>'  # apart from Gradio's own icons


def curves(run_dir):
    """The training curves of `history.csv` (`zoo.plot.training_curves`), or None."""
    history = run_dir / "history.csv"
    if not history.is_file():
        return None
    try:
        return plot.training_curves(plot.read_history(history))
    except (ValueError, OSError):
        return None


def run_files(run_dir):
    """`config.json`, and `summary.json` and `metrics.json` where written, as one dict."""
    shown = {}
    for name in ("config", "summary", "metrics"):
        path = run_dir / f"{name}.json"
        if path.is_file():
            try:
                shown[name] = files.read_json(path, dict)
            except (ZooError, OSError, json.JSONDecodeError) as error:
                shown[name] = {"unreadable": " ".join(str(error).split())}
    return shown
