"""Vision Transformer pictures for `zoo.plot`: position-embedding similarity and
attention rollout (Abnar & Zuidema, 2020) over the input images."""

import math

import keras
import matplotlib
import numpy as np

from zoo import vit
from zoo.plot.figures import checked_array, finish, new_figure


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
        embeddings = checked_array("model_or_embeddings", table, (2,))
        class_token = "class_token" in layers
    else:
        embeddings = checked_array("model_or_embeddings", model_or_embeddings, (2,))
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
    figure = new_figure(size + 1.2, size)
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
    return finish(figure, path)


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
        attentions = list(checked_array("attentions", attentions, (5,)))
    if not attentions:
        raise ValueError("attentions is empty; need at least one layer.")
    layers = [checked_array(f"attentions[{i}]", a, (4,)) for i, a in enumerate(attentions)]
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
        pooling = checked_array("pooling", pooling, (2,))
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
    images = checked_array("images", images, (3, 4))
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

    figure = new_figure(1.9 * batch + 0.8, 4.0)
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
    return finish(figure, path)
