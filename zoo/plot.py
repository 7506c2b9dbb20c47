"""Pictures of attention: alignment heat maps, positional encodings, ViT maps, training curves.

Every function returns a `matplotlib.figure.Figure` drawn on the Agg canvas
(no pyplot, no display, no global figure list: safe in scripts, tests and
servers) and, given `path=`, also writes it as a PNG (parent folders are
created); `fig.savefig("x.png")` saves it later. In Jupyter with the inline
backend (`%matplotlib inline`), a figure left at the end of a cell is shown.

* `attention_heatmap`: attention weights, target (query) tokens × source
  (key) tokens, one head, the mean over heads, or every head.
* `positional_encoding`: the sinusoidal table `P` (positions × dimensions)
  and some of its columns as curves over the position.
* `position_embedding_similarity`: cosine similarity of each learned ViT
  position embedding to all the others, drawn on the patch grid (ViT paper,
  Fig. 7, centre).
* `attention_rollout` / `vit_attention_map`: attention rollout (Abnar &
  Zuidema 2020) of a ViT, over the input images.
* `training_curves`: metrics per epoch from a Keras `History`, its `history`
  dict, or a `keras.callbacks.CSVLogger` file.

Shape legend: B batch, N heads, T target (query) length, S source (key)
length, P patches, D embedding size, L layers.
"""

import csv
import math
import pathlib

import keras
import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

import keras_attention as ka
from zoo import files, vit

__all__ = [
    "attention_heatmap",
    "attention_rollout",
    "position_embedding_similarity",
    "positional_encoding",
    "read_history",
    "rollout_maps",
    "training_curves",
    "vit_attention_map",
]

DPI = 100


def _figure(width, height):
    """A figure with its own Agg canvas (never registered with pyplot)."""
    figure = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _finish(figure, path):
    if path is not None:
        files.replace(path, lambda temporary: figure.savefig(temporary, dpi=DPI, format="png"))
    return figure


def _array(name, value, ranks):
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


def _tokens(name, tokens, length):
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


# === Attention heat maps ===


def attention_heatmap(
    weights,
    source_tokens=None,
    target_tokens=None,
    head="mean",
    title=None,
    cmap="viridis",
    path=None,
):
    """Heat map of attention weights: one row per target (query) token, one column per source token.

    The classic alignment picture of Bahdanau et al. (2015, Fig. 3): cell
    `(t, s)` is the weight `α_{t,s}` with which target position t attends to
    source position s (each row sums to 1).

    Args:
        weights: `(T, S)` (one map, e.g. RNNsearch alignments of one example)
            or `(N, T, S)` (the heads of one example, e.g.
            `zoo.attention_weights(...)["decoder_block_0/cross_attention"][i]`).
        source_tokens: S labels for the columns (x axis); default 0..S-1.
        target_tokens: T labels for the rows (y axis); default 0..T-1.
        head: for `(N, T, S)` weights: an int (one head), `"mean"` (the
            average over heads) or `"all"` (one panel per head).
        title: figure title.
        cmap: matplotlib colour map.
        path: also save the PNG there.

    Returns:
        `matplotlib.figure.Figure`.
    """
    weights = _array("weights", weights, (2, 3))
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
            panels, names = list(weights), [f"head {i}" for i in range(num_heads)]
        elif isinstance(head, (int, np.integer)) and not isinstance(head, bool):
            if not -num_heads <= head < num_heads:
                raise ValueError(
                    f"`head` must be in [0, {num_heads}) for {num_heads} heads; received {head}."
                )
            panels, names = [weights[head]], [f"head {int(head) % num_heads}"]
        else:
            raise ValueError(f"`head` must be an int, 'mean' or 'all'; received {head!r}.")
    targets, sources = panels[0].shape
    source_tokens = _tokens("source_tokens", source_tokens, sources)
    target_tokens = _tokens("target_tokens", target_tokens, targets)

    columns = min(len(panels), 4)
    rows = math.ceil(len(panels) / columns)
    cell = 0.32  # inches per token
    width = max(3.5, 1.6 + cell * sources) * columns + 1.0
    height = max(3.0, 1.2 + cell * targets) * rows
    figure = _figure(width, height)
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
    return _finish(figure, path)


# === Positional encodings ===


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

    figure = _figure(11, 4)
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
    return _finish(figure, path)


# === Vision Transformer ===


def _vit_layers(model):
    return {layer.name: layer for layer in getattr(model, "layers", [])}


def _is_square(n):
    return n >= 1 and math.isqrt(n) ** 2 == n


def position_embedding_similarity(model_or_embeddings, class_token=None, path=None):
    """Cosine similarity of ViT's learned position embeddings (ViT paper, Fig. 7, centre).

    The tile at (row r, column c) of a grid × grid mosaic is a small grid ×
    grid image: the cosine similarity between the embedding of patch (r, c)
    and the embeddings of every patch. A trained ViT shows its 2-D layout:
    nearby patches, and patches in the same row or column, are similar.

    Args:
        model_or_embeddings: a zoo ViT (`zoo.get("vit-…")` or a loaded
            `.keras` file; the table is the `position_embedding` layer's
            weight: `(P + 1, D)` with row 0 the class token's, or `(P, D)`
            for a ViT without one, `pooling="gap"` or `"seq"`), or an
            embedding matrix `(P, D)` or `(P + 1, D)` with P a square number.
        class_token: whether row 0 of a matrix is the class token's (it is
            left out). None: decided from the shape (P + 1 rows, P square).
            Ignored for a model (decided by its `class_token` layer).
        path: also save the PNG there.

    Returns:
        `matplotlib.figure.Figure`.
    """
    if hasattr(model_or_embeddings, "layers"):
        layers = _vit_layers(model_or_embeddings)
        if "position_embedding" not in layers or "patch_embedding" not in layers:
            raise ValueError(
                "model_or_embeddings: the model has no `patch_embedding`/`position_embedding` "
                f"layers; is {model_or_embeddings.name!r} a zoo ViT?"
            )
        table = _to_numpy(layers["position_embedding"].position_embeddings)
        embeddings = _array("model_or_embeddings", table, (2,))
        class_token = "class_token" in layers
    else:
        embeddings = _array("model_or_embeddings", model_or_embeddings, (2,))
    rows = embeddings.shape[0]
    if class_token is None:
        if _is_square(rows) and rows > 1:
            class_token = False
        elif _is_square(rows - 1):
            class_token = True
        else:
            raise ValueError(
                "model_or_embeddings: a (P, D) or (P + 1, D) matrix with P patches on a square "
                f"grid is needed; received {rows} rows, neither square nor square + 1."
            )
    patches = embeddings[1:] if class_token else embeddings  # (P, D)
    if not _is_square(patches.shape[0]):
        raise ValueError(
            f"model_or_embeddings: {patches.shape[0]} patch embeddings (class_token="
            f"{class_token}) do not fill a square grid."
        )
    grid = math.isqrt(patches.shape[0])
    norms = np.linalg.norm(patches, axis=-1, keepdims=True)
    if np.any(norms == 0):
        raise ValueError("model_or_embeddings: a position embedding is all zeros; cosine "
                         "similarity is undefined.")
    unit = patches / norms
    similarity = (unit @ unit.T).reshape(grid, grid, grid, grid)  # [r, c] -> (grid, grid) image

    # One mosaic image with a one-pixel gap between tiles (drawn blank).
    step = grid + 1
    mosaic = np.full((grid * step - 1, grid * step - 1), np.nan)
    for r in range(grid):
        for c in range(grid):
            mosaic[r * step: r * step + grid, c * step: c * step + grid] = similarity[r, c]

    size = min(9.0, 2.5 + 0.45 * grid)
    figure = _figure(size + 1.2, size)
    ax = figure.subplots()
    cmap = matplotlib.colormaps["viridis"].with_extremes(bad="white")
    image = ax.imshow(mosaic, cmap=cmap, vmin=-1, vmax=1, interpolation="nearest")
    centres = np.arange(grid) * step + (grid - 1) / 2
    ax.set_xticks(centres, [str(i + 1) for i in range(grid)])
    ax.set_yticks(centres, [str(i + 1) for i in range(grid)])
    ax.set_xlabel("input patch column")
    ax.set_ylabel("input patch row")
    ax.set_title("Position embedding similarity")
    figure.colorbar(image, ax=ax, label="cosine similarity", shrink=0.8)
    return _finish(figure, path)


def _to_numpy(variable):
    """A Keras variable (or anything array-like) as a numpy array."""
    if hasattr(variable, "numpy"):
        return np.asarray(variable.numpy())
    return keras.ops.convert_to_numpy(variable)


def attention_rollout(attentions, residual=True):
    """Attention rollout (Abnar & Zuidema, "Quantifying Attention Flow in Transformers", 2020).

    Per layer l the heads are averaged, `A_l = mean_heads(W_l)`; the residual
    connection is accounted for by adding the identity and renormalising the
    rows, `Â_l = (A_l + I) / rowsum(A_l + I)` (= `0.5 A_l + 0.5 I` when the
    rows of `A_l` sum to 1); the joint attention is the product from the
    first layer up, `Ã_L = Â_L · Â_{L-1} ⋯ Â_1`.

    Args:
        attentions: the L layers' weights `(B, N, T, T)`, first layer first: a
            list, an array `(L, B, N, T, T)`, or the dict returned by
            `zoo.attention_weights` for a ViT (`encoder_block_{i}/self_attention`).
        residual: add the identity (the paper's rollout); False multiplies the
            raw head-averaged maps.

    Returns:
        numpy `(B, T, T)`: row t says how much each input token flows into
        output token t of the last layer (rows sum to 1).
    """
    if isinstance(attentions, dict):
        keys = sorted(
            (k for k in attentions if k.startswith("encoder_block_") and
             k.endswith("/self_attention")),
            key=lambda k: int(k[len("encoder_block_"): k.index("/")]),
        )
        if not keys:
            raise ValueError(
                "attentions: the dict has no `encoder_block_{i}/self_attention` entries; "
                f"received keys {sorted(attentions)}."
            )
        attentions = [attentions[k] for k in keys]
    if not isinstance(attentions, (list, tuple)):
        attentions = list(_array("attentions", attentions, (5,)))
    if not attentions:
        raise ValueError("attentions is empty; need at least one layer.")
    layers = [_array(f"attentions[{i}]", a, (4,)) for i, a in enumerate(attentions)]
    shape = layers[0].shape
    if shape[-1] != shape[-2] or any(a.shape != shape for a in layers):
        raise ValueError(
            "attentions must all be self-attention weights (B, N, T, T) of one shape; received "
            f"{[a.shape for a in layers]}."
        )
    identity = np.eye(shape[-1])
    joint = None
    for weights in layers:
        mixed = weights.mean(axis=1)  # (B, T, T), heads averaged
        if residual:
            mixed = mixed + identity
            mixed = mixed / mixed.sum(axis=-1, keepdims=True)
        joint = mixed if joint is None else mixed @ joint  # Â_l · Ã_{l-1}
    return joint


def rollout_maps(attentions, residual=True, pooling=None):
    """The rollout of what a ViT's head sees, over the patches, on the patch grid: `(B, g, g)`.

    With a class token: row 0 (the class token) of `attention_rollout`, patches
    only (the class token's own column dropped). Without one (`pooling="gap"` or
    `"seq"`) the head sees `Σ_t α_t x_t`, a weighted average of the last layer's
    outputs, so its rollout is `Σ_t α_t Ã_L[t]` = `α · Ã_L` over all T = P
    tokens. Either way the P values are reshaped row-major to the `g × g` patch
    grid (g² = P), as `PatchEmbedding` orders the patches.

    Args:
        attentions: as for `attention_rollout`.
        residual: see `attention_rollout`.
        pooling: `(B, T)` pooling weights `α` of a ViT without a class token; by
            default the `pooling` entry of an `attentions` dict from
            `zoo.attention_weights` when there is one, else None (class token).
    """
    if pooling is None and isinstance(attentions, dict):
        pooling = attentions.get("pooling")
    joint = attention_rollout(attentions, residual=residual)  # (B, T, T)
    if pooling is None:
        patches = joint[:, 0, 1:]  # (B, P)
        tokens = "patch tokens (after the class token)"
    else:
        pooling = _array("pooling", pooling, (2,))
        if pooling.shape != joint.shape[:2]:
            raise ValueError(
                f"pooling must have shape (B, T) = {joint.shape[:2]} to match the attentions; "
                f"received {pooling.shape}."
            )
        patches = np.einsum("bt,bts->bs", pooling, joint)  # (B, P)
        tokens = "patch tokens"
    if not _is_square(patches.shape[-1]):
        raise ValueError(
            f"attentions: {patches.shape[-1]} {tokens} do not fill a square grid."
        )
    grid = math.isqrt(patches.shape[-1])
    return patches.reshape(-1, grid, grid)


def vit_attention_map(model, images, titles=None, residual=True, alpha=0.6, path=None):
    """Attention rollout of a ViT over its input images.

    For each image: the image (top) and the rollout of what the head sees
    (`rollout_maps`: the class token's, or the pooled tokens' without one),
    min-max scaled to [0, 1] per image, upsampled bilinearly from the patch
    grid to the image size and laid over the image (bottom).

    Args:
        model: a zoo ViT (`zoo.get("vit-…")` or a loaded `.keras` file).
        images: `(B, H, W, C)` or one `(H, W, C)` image, pixel values in
            [0, 255] as the model takes them. Keep B small (a column each).
        titles: B strings shown over the images (e.g. "true / predicted").
        residual: see `attention_rollout`.
        alpha: opacity of the attention overlay.
        path: also save the PNG there.

    Returns:
        `matplotlib.figure.Figure`.
    """
    if "patch_embedding" not in _vit_layers(model):
        raise ValueError(
            f"model: {getattr(model, 'name', model)!r} is not a zoo ViT (no `patch_embedding`)."
        )
    images = _array("images", images, (3, 4))
    if images.ndim == 3:
        images = images[None]
    batch, height, width, channels = images.shape
    if titles is not None and len(titles) != batch:
        raise ValueError(f"`titles` has {len(titles)} entries for {batch} images.")
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"`alpha` must be in [0, 1]; received {alpha!r}.")
    maps = rollout_maps(vit.attention_weights(model, images.astype("float32")), residual)
    low = maps.min(axis=(1, 2), keepdims=True)
    spread = maps.max(axis=(1, 2), keepdims=True) - low
    maps = (maps - low) / np.where(spread > 0, spread, 1.0)  # (B, g, g), min 0, max 1
    shown = images / 255.0
    shown = shown[..., 0] if channels == 1 else np.clip(shown, 0.0, 1.0)

    figure = _figure(1.9 * batch + 0.8, 4.0)
    axes = figure.subplots(2, batch, squeeze=False)
    extent = (-0.5, width - 0.5, height - 0.5, -0.5)  # the map's g × g cells cover the image
    overlay = None
    for i in range(batch):
        top, bottom = axes[0, i], axes[1, i]
        for ax in (top, bottom):
            ax.imshow(shown[i], cmap="gray" if channels == 1 else None, vmin=0, vmax=1)
            ax.set_xticks([])
            ax.set_yticks([])
        overlay = bottom.imshow(maps[i], cmap="inferno", alpha=alpha, vmin=0, vmax=1,
                                extent=extent, interpolation="bilinear")
        if titles is not None:
            top.set_title(str(titles[i]), fontsize="small")
    axes[0, 0].set_ylabel("image")
    axes[1, 0].set_ylabel("rollout")
    figure.colorbar(overlay, ax=axes[1, :].tolist(), shrink=0.8, label="rollout (min-max scaled)")
    return _finish(figure, path)


# === Training curves ===


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


def training_curves(history, metrics=None, title=None, path=None):  # noqa: C901 - accepts 4 history forms
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
    history = converted
    lengths = {len(values) for values in history.values()}
    if len(lengths) != 1 or 0 in lengths:
        raise ValueError(
            "history: every metric needs the same, non-zero number of epochs; received "
            f"{ {name: len(values) for name, values in history.items()} }."
        )
    epochs = history.pop("epoch", None)
    count = lengths.pop()
    x = epochs + 1 if epochs is not None else np.arange(1, count + 1)
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

    columns = min(len(metrics), 3)
    rows = math.ceil(len(metrics) / columns)
    figure = _figure(4.2 * columns, 3.2 * rows)
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
    return _finish(figure, path)
