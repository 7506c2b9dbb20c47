"""Attention heat maps and the sinusoidal positional encodings, for `zoo.plot`."""

import math

import numpy as np

import keras_attention as ka
from zoo.plot.figures import checked_array, finish, new_figure, token_labels


def attention_heatmap(
    weights,
    source_tokens=None,
    target_tokens=None,
    head="mean",
    title=None,
    cmap="viridis",
    path=None,
    head_names=None,
):
    """Heat map of attention weights: one row per target (query) token, one column per source token.

    The classic alignment picture of Bahdanau et al. (2015, Fig. 3): cell
    `(t, s)` is the weight `α_{t,s}` with which target position t attends to
    source position s (each row sums to 1).

    Args:
        weights: `(T, S)` (one map, e.g. the RNNsearch alignments of one example,
            `zoo.attention_weights(model, batch)["decoder/alignment"][i]`, with
            additive or location-aware attention) or `(N, T, S)` (the heads of one example, e.g.
            `zoo.attention_weights(...)["decoder_block_0/cross_attention"][i]`).
        source_tokens: S labels for the columns (x axis); default 0..S-1.
        target_tokens: T labels for the rows (y axis); default 0..T-1.
        head: for `(N, T, S)` weights: an int (one head), `"mean"` (the
            average over heads) or `"all"` (one panel per head).
        title: figure title.
        cmap: matplotlib colour map.
        path: also save the PNG there.
        head_names: N panel titles for `(N, T, S)` weights instead of "head n" (e.g.
            the alignments of N models on one example, drawn with `head="all"`).

    Returns:
        `matplotlib.figure.Figure`.
    """
    weights = checked_array("weights", weights, (2, 3))
    panels, names = _panels(weights, head, head_names)
    targets, sources = panels[0].shape
    source_tokens = token_labels("source_tokens", source_tokens, sources)
    target_tokens = token_labels("target_tokens", target_tokens, targets)

    columns = min(len(panels), 4)
    rows = math.ceil(len(panels) / columns)
    cell = 0.32  # inches per token
    width = max(3.5, 1.6 + cell * sources) * columns + 1.0
    height = max(3.0, 1.2 + cell * targets) * rows
    figure = new_figure(width, height)
    axes = figure.subplots(rows, columns, squeeze=False).ravel()
    image = None
    for ax, panel, name in zip(axes, panels, names):
        image = ax.imshow(panel, cmap=cmap, vmin=0.0, vmax=1.0, aspect="auto",
                          interpolation="nearest")
        ax.set_xticks(range(sources), source_tokens, rotation=90)
        ax.set_yticks(range(targets), target_tokens)
        ax.set_xlabel("source (keys)")
        ax.set_ylabel("target (queries)")
        if name:
            ax.set_title(name)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    figure.colorbar(image, ax=axes[: len(panels)].tolist(), label="attention weight", shrink=0.8)
    if title:
        figure.suptitle(title)
    return finish(figure, path)


# === Positional encodings ===


def _panels(weights, head, head_names):
    """The `(T, S)` maps to draw and their titles, as `head` and `head_names` ask."""
    if head_names is not None and (weights.ndim != 3 or len(head_names) != len(weights)):
        raise ValueError(
            f"`head_names` must name the {weights.shape[0] if weights.ndim == 3 else 0} heads "
            f"of (N, T, S) weights; received {len(head_names)} names for weights of shape "
            f"{weights.shape}."
        )
    if weights.ndim == 2:
        if head not in ("mean", 0):
            raise ValueError(
                f"`head` must be 'mean' (or 0) for 2-D weights (T, S); received head={head!r}."
            )
        panels, names = [weights], [None]
    else:
        num_heads = weights.shape[0]
        if head == "mean":
            panels, names = [weights.mean(axis=0)], [f"mean of {num_heads} heads"]
        elif head == "all":
            panels = list(weights)
            names = [str(name) for name in head_names] if head_names is not None else [
                f"head {i}" for i in range(num_heads)]
        elif isinstance(head, (int, np.integer)) and not isinstance(head, bool):
            if not -num_heads <= head < num_heads:
                raise ValueError(
                    f"`head` must be in [0, {num_heads}) for {num_heads} heads; received {head}."
                )
            names = [f"head {int(head) % num_heads}" if head_names is None else str(head_names[head])]
            panels = [weights[head]]
        else:
            raise ValueError(f"`head` must be an int, 'mean' or 'all'; received {head!r}.")
    return panels, names


def positional_encoding(
    length=60, depth=32, columns=(6, 7, 8, 9), max_wavelength=10000, path=None
):
    """The sinusoidal positional encodings `P` of "Attention Is All You Need".

    Left: `P` as a heat map, positions (rows, i) × dimensions (columns).
    Right: the chosen columns of `P` as curves over the position i (the
    lecture figure: columns 6-9 of a 60 × 32 table; the pair (6, 7) has a
    higher frequency than (8, 9)). `P` is `keras_attention.ops.sinusoidal_encoding`:
    `P[i, 2j] = sin(i / max_wavelength^(2j/depth))`, `P[i, 2j+1] = cos(...)`.

    Args:
        length: number of positions.
        depth: encoding size d.
        columns: dimensions to draw as curves (each in `[0, depth)`).
        max_wavelength: the base (10000 in the paper).
        path: also save the PNG there.

    Returns:
        `matplotlib.figure.Figure`.
    """
    for name, value in (("length", length), ("depth", depth)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"`{name}` must be a positive int; received {name}={value!r}.")
    columns = list(columns)
    for column in columns:
        if isinstance(column, bool) or not isinstance(column, (int, np.integer)) or not (
            0 <= column < depth
        ):
            raise ValueError(
                f"`columns` must hold ints in [0, depth={depth}); received columns={columns}."
            )
    encoding = ka.ops.sinusoidal_encoding(length, depth, max_wavelength=max_wavelength)  # (L, d)

    figure = new_figure(11, 4)
    heat_ax, curve_ax = figure.subplots(1, 2, width_ratios=(1, 1.3))
    image = heat_ax.imshow(encoding, cmap="RdBu", vmin=-1, vmax=1, aspect="auto",
                           interpolation="nearest")
    heat_ax.set_xlabel("encoding dimension")
    heat_ax.set_ylabel("position i")
    heat_ax.set_title(f"P, {length} positions × {depth} dimensions")
    figure.colorbar(image, ax=heat_ax, shrink=0.9)
    positions = np.arange(length)
    for column in columns:
        curve_ax.plot(positions, encoding[:, column], label=f"column {column}")
    curve_ax.set_xlabel("position i")
    curve_ax.set_ylabel("P[i, column]")
    curve_ax.set_title("columns of P over the position")
    curve_ax.set_ylim(-1.1, 1.1)
    if columns:
        curve_ax.legend(loc="upper right", fontsize="small")
    return finish(figure, path)
