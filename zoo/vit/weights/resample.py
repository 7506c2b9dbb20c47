"""Bicubic resampling of ViT position embeddings, as timm's `resample_abs_pos_embed`.

Fine-tuning at another image size changes the patch grid G×G; the table of
learned position embeddings `(prefix + G·G, D)` is resized as an image of D
channels, the class token's row kept aside (Dosovitskiy et al., 2021,
section 3.2, "Fine-tuning and higher resolution").

The two kernels are PyTorch's `F.interpolate(mode="bicubic",
align_corners=False)`, which timm calls:

- `antialias=False`: cubic convolution with a = -0.75 at the source point
  `(i + 0.5) · in / out - 0.5`, edge pixels repeated.
- `antialias=True` (timm's default): PIL's filter (a = -0.5), stretched by
  `in / out` when shrinking, truncated at the edges and normalised to sum 1.

Both are separable: a `(out, in)` weight matrix per axis. Numpy only, float64
weights; checked against timm in tests/test_vit_checkpoints.py.
"""

import math

import numpy as np

from zoo.errors import ZooError


def _cubic(x, a):
    """Keys' cubic convolution kernel with parameter `a`."""
    x = np.abs(x)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return np.where(x <= 1, near, np.where(x < 2, far, 0.0))


def _weights(size_in, size_out, antialias):
    """`(size_out, size_in)` matrix: row i holds the weights of output pixel i."""
    scale = size_in / size_out
    matrix = np.zeros((size_out, size_in))
    for i in range(size_out):
        if not antialias:
            source = (i + 0.5) * scale - 0.5
            base = math.floor(source)
            for j in range(base - 1, base + 3):
                matrix[i, min(max(j, 0), size_in - 1)] += _cubic(source - j, -0.75)
            continue
        support = 2.0 * max(scale, 1.0)
        center = (i + 0.5) * scale
        first = max(int(center - support + 0.5), 0)
        last = min(int(center + support + 0.5), size_in)
        stretch = 1.0 / max(scale, 1.0)
        taps = _cubic((np.arange(first, last) - center + 0.5) * stretch, -0.5)
        matrix[i, first:last] = taps / taps.sum()
    return matrix


def resize_bicubic(grid, size, antialias=True):
    """Resize `(H, W, D)` to `(size[0], size[1], D)` as PyTorch's bicubic `F.interpolate`."""
    grid = np.asarray(grid, np.float64)
    rows = _weights(grid.shape[0], size[0], antialias)
    columns = _weights(grid.shape[1], size[1], antialias)
    return np.einsum("ih,jw,hwd->ijd", rows, columns, grid)


def resample_position_embeddings(table, grid_size, prefix_tokens=1, antialias=True):
    """A `(prefix + G·G, D)` position table for a `grid_size`×`grid_size` patch grid.

    Args:
        table: `(prefix + g·g, D)`, the first `prefix_tokens` rows (the class
            token's) kept as they are; the rest a row-major g×g grid.
        grid_size: the new G.
        prefix_tokens: rows before the grid (1 with a class token, else 0).
        antialias: timm's default True; False for plain bicubic.

    Returns:
        `(prefix + G·G, D)` float32.
    """
    table = np.asarray(table)
    prefix, grid = table[:prefix_tokens], table[prefix_tokens:]
    old = math.isqrt(grid.shape[0])
    if old * old != grid.shape[0]:
        raise ZooError(
            f"The position table's {grid.shape[0]} grid rows (after {prefix_tokens} prefix "
            "rows) are not a square grid; received table.shape="
            f"{tuple(table.shape)}."
        )
    depth = table.shape[-1]
    resized = resize_bicubic(grid.reshape(old, old, depth), (grid_size, grid_size), antialias)
    resized = resized.reshape(grid_size * grid_size, depth).astype(table.dtype)
    return np.concatenate([prefix, resized], axis=0)
