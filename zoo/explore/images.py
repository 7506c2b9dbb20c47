"""A ViT's classes and attention for `zoo explore`, computed without Gradio.

The classes come from `zoo.runs.prediction.classify_files`, the code `zoo predict` runs on
an image file (an export: `zoo predict`'s SavedModel path), so the page shows its top-1.
The attention: the rollout (Abnar & Zuidema 2020, `zoo.plot.vit_attention_map`) and each
head's attention from the class token (or, without one, the pooling-weighted attention of
the tokens) in one layer, on the patch grid.
"""

import dataclasses
import math
import pathlib

import numpy as np
from PIL import Image

import zoo
from zoo import plot
from zoo.errors import ZooError
from zoo.plot.figures import new_figure
from zoo.runs import prediction

TOP_CLASSES = 5
MAX_IMAGE_BYTES = 20 * 2**20
MAX_IMAGE_PIXELS = 25_000_000  # 5000 × 5000


@dataclasses.dataclass
class Classification:
    """What the page shows for an image.

    Attributes:
        classes: the top classes, `[(name, probability), ...]`, most likely first.
        image: the image as the model took it, `(H, W, C)` uint8; None for an export.
        maps: `zoo.attention_weights` of the image, one example each (`(N, T, T)` per
            layer, `pooling` `(T,)` without a class token); empty for an export.
    """

    classes: list
    image: np.ndarray = None
    maps: dict = dataclasses.field(default_factory=dict)

    @property
    def layers(self):
        """The number of encoder layers whose maps are held."""
        return sum(name.startswith("encoder_block_") for name in self.maps)


def check_image_file(path):
    """ZooError (shown on the page) unless `path` is an image file of a sane size."""
    if not path:
        raise ZooError("upload an image or pick a test image")
    path = pathlib.Path(path)
    if not path.is_file():
        raise ZooError(f"{path.name}: no such file")
    if path.stat().st_size > MAX_IMAGE_BYTES:
        raise ZooError(f"{path.name}: {path.stat().st_size:,} bytes; at most "
                       f"{MAX_IMAGE_BYTES:,} are taken here")
    try:
        with Image.open(path) as image:
            width, height = image.size
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError):
        raise ZooError(f"{path.name}: not an image (unknown format)") from None
    if width * height > MAX_IMAGE_PIXELS:
        raise ZooError(f"{path.name}: {width} × {height} pixels; at most "
                       f"{MAX_IMAGE_PIXELS:,} pixels are taken here")


def classify(target, path):
    """A `Classification` of the image file `path` by the run or export of `target`."""
    check_image_file(path)
    path = str(path)
    if target.run is None:
        (result,) = prediction.predict(target.path, [path], top_k=TOP_CLASSES)
    else:
        (result,) = prediction.classify_files(target.run, [path], top_k=TOP_CLASSES)
    if "error" in result:
        raise ZooError(f"{pathlib.Path(path).name}: {result['error']}")
    if target.run is None:
        return Classification(result["classes"])
    images, _ = prediction.load_run_images(target.run, [path])  # (1, H, W, C)
    maps = zoo.attention_weights(target.run.model, images.astype("float32"))
    return Classification(result["classes"], images[0], {k: v[0] for k, v in maps.items()})


def rollout_figure(target, classification):
    """The image and its attention rollout (`zoo.plot.vit_attention_map`)."""
    name, probability = classification.classes[0]
    return plot.vit_attention_map(target.run.model, classification.image[None],
                                  titles=[f"{name} {100 * probability:.1f}%"])


def head_maps(classification, layer):
    """`(N, g, g)`: what each head of encoder layer `layer` attends to on the patch grid:
    the class token's row without its own column, or without a class token the rows
    weighted by the pooling weights."""
    weights = classification.maps[f"encoder_block_{layer}/self_attention"]  # (N, T, T)
    pooling = classification.maps.get("pooling")
    if pooling is None:
        patches = weights[:, 0, 1:]  # (N, P)
    else:
        patches = np.einsum("t,nts->ns", pooling, weights)  # (N, P)
    grid = math.isqrt(patches.shape[-1])
    return patches.reshape(-1, grid, grid)


def heads_figure(classification, layer):
    """One panel per head of `layer`: its attention (`head_maps`) over the image."""
    maps = head_maps(classification, layer)
    image = classification.image / 255.0
    height, width, channels = image.shape
    figure = new_figure(1.9 * len(maps) + 0.8, 2.4)
    axes = figure.subplots(1, len(maps), squeeze=False)[0]
    extent = (-0.5, width - 0.5, height - 0.5, -0.5)
    for head, (ax, grid) in enumerate(zip(axes, maps)):
        ax.imshow(image[..., 0] if channels == 1 else image, cmap="gray", vmin=0, vmax=1)
        ax.imshow(grid, cmap="inferno", alpha=0.6, extent=extent, interpolation="nearest")
        ax.set_title(f"layer {layer}, head {head}", fontsize="small")
        ax.set_xticks([])
        ax.set_yticks([])
    return figure
