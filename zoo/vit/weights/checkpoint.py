"""Pretrained weights for the zoo's ViTs: `zoo.get("vit-b16", weights=PATH)`.

Three formats are read, without PyTorch, JAX or the Hugging Face libraries:

- Google's `.npz` (vit_jax, big_vision; `zoo.vit.weights.npz`),
- a timm state dict, `.safetensors` or `.pth` (`zoo.vit.weights.timm`),
- a Hugging Face `ViTModel` / `ViTForImageClassification` folder
  (`config.json` + `model.safetensors`; `zoo.vit.weights.huggingface`).

Each reader turns the file into a `Checkpoint`: its tensors keyed by the
zoo's weight paths (`encoder_block_0/self_attention/query_kernel`, ...) in a
head-independent layout (attention kernels `(D, N·H)`, their biases `(N·H,)`,
the output kernel `(N·H, D)`, dense kernels `(in, out)`, the position table
`(T, D)`), and the `ViTConfig` fields the file implies (layer-norm epsilon,
GELU kind, pooling, norm order, input normalisation, image size, classes).

The sizes come from the registry entry: a file that does not fit it is
refused with one line naming the first tensor whose shape disagrees. A
different `image_size` resamples the position table (`zoo.vit.weights.resample`); a
different `num_classes` initialises a new head, with a warning.
"""

import dataclasses
import math
import warnings

import numpy as np

from zoo.errors import ZooError
from zoo.vit.weights.resample import resample_position_embeddings

# The fine-tuning recipe of a model loaded with weights (overrides given to
# `zoo.get` win): AdamW at a learning rate 30 times lower than from scratch,
# a 100-step warm-up, and no weight decay, as Google's fine-tuning (Dosovitskiy
# et al., 2021, Appendix B.1.1; clipping at global norm 1 is the zoo's
# recipe already). With `trainable_backbone=False` (only the head trains, a
# linear probe) the learning rate is `LINEAR_PROBE_LEARNING_RATE`.
FINE_TUNING = dict(learning_rate=3e-5, warmup_steps=100, weight_decay=0.0)
LINEAR_PROBE_LEARNING_RATE = 1e-3

_ATTENTION = ("query", "key", "value")


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    """ViT weights read from a file, ready to load into a zoo ViT.

    Attributes:
        path: the file or folder read.
        format: `"npz"`, `"timm"` or `"huggingface"`.
        tensors: zoo weight path -> `(the file's tensor name, array or None
            when the file lacks it)`, in the layout of the module docstring.
        num_layers: the file's encoder blocks.
        fields: `ViTConfig` fields the file implies.
        num_heads: the file's attention heads, where it says (a timm state
            dict does not: its fused `qkv` fits any head count).
        statistics_warning: set when the file does not say its input
            statistics: why, and the `pixel_mean`/`pixel_std` in `fields`
            that were assumed instead. `overrides` warns with it unless the
            user gives both.
    """

    path: str
    format: str
    tensors: dict
    num_layers: int
    fields: dict
    num_heads: int | None = None
    statistics_warning: str | None = None

    def overrides(self, user_overrides):
        """The config overrides for `zoo.get`: the file's fields, the recipe, then the user's."""
        if self.statistics_warning and not {"pixel_mean", "pixel_std"} <= set(user_overrides):
            warnings.warn(self.statistics_warning, stacklevel=4)  # zoo.get's caller
        recipe = dict(FINE_TUNING)
        if user_overrides.get("trainable_backbone") is False:
            recipe["learning_rate"] = LINEAR_PROBE_LEARNING_RATE
        return {**self.fields, **recipe, **user_overrides}

    def load_into(self, model, config, name="the model"):
        """Assign the weights to a ViT built from `config` (checked first, then all assigned)."""
        if self.num_layers != config.num_layers:
            raise ZooError(
                f"{self.path}: {self.num_layers} encoder blocks, but {name} has "
                f"num_layers={config.num_layers}."
            )
        if self.num_heads is not None and self.num_heads != config.num_heads:
            raise ZooError(
                f"{self.path}: {self.num_heads} attention heads, but {name} has "
                f"num_heads={config.num_heads}."
            )
        values = {}
        skip_head = self._head_mismatch(model, config, name)
        for weight in model.weights:
            path = weight.path
            if path.startswith("augmentation/") or (skip_head and path.startswith("head/")):
                continue
            values[path] = self._value(path, tuple(weight.shape), config, name)
        for weight in model.weights:
            if weight.path in values:
                weight.assign(values[weight.path])

    def _head_mismatch(self, model, config, name):
        """True (with a warning) when the file's head does not fit `num_classes`."""
        _, kernel = self.tensors.get("head/kernel", (None, None))
        if kernel is not None and kernel.shape[-1] == config.num_classes:
            return False
        found = "no head" if kernel is None else f"a head for {kernel.shape[-1]} classes"
        warnings.warn(
            f"{self.path}: {found}; {name} gets a new head for num_classes={config.num_classes}, "
            "randomly initialised.",
            stacklevel=4,
        )
        return True

    def _value(self, path, shape, config, name):
        """The array for weight `path` of shape `shape`, checked, resampled or reshaped."""
        source, array = self.tensors.get(path, (None, None))
        if source is None:
            raise ZooError(f"{self.path}: no {self.format} tensor maps to {name}'s weight "
                           f"{path} ({name} is not the architecture of this file).")
        if array is None:
            if path.endswith(tuple(f"{n}_bias" for n in _ATTENTION)):
                return np.zeros(shape, np.float32)  # a file without query/key/value biases
            raise ZooError(f"{self.path}: missing tensor {source!r} (for {name}'s weight {path}).")
        expected = neutral_shape(path, shape)
        if path == "position_embedding/position_embeddings" and array.shape != expected:
            array = self._resampled(source, array, expected, config, name)
        if array.shape != expected:
            raise ZooError(f"{self.path}: tensor {source!r} has shape {array.shape}, but "
                           f"{name} needs {expected} for {path}.")
        return array.reshape(shape).astype(np.float32)

    def _resampled(self, source, table, expected, config, name):
        prefix = int(config.pooling == "cls")
        old = math.isqrt(max(table.shape[0] - prefix, 0))
        if table.ndim != 2 or table.shape[1] != expected[1] or old * old != table.shape[0] - prefix:
            raise ZooError(f"{self.path}: tensor {source!r} has shape {table.shape}, but "
                           f"{name} needs {expected} for position_embedding.")
        return resample_position_embeddings(table, config.image_size // config.patch_size, prefix)


def neutral_shape(path, shape):
    """The head-independent shape of a zoo weight (see the module docstring)."""
    leaf = path.rsplit("/", 1)[-1]
    if leaf in tuple(f"{n}_kernel" for n in _ATTENTION):
        return (shape[0], shape[1] * shape[2])  # (D, N, H) -> (D, N·H)
    if leaf in tuple(f"{n}_bias" for n in _ATTENTION):
        return (shape[0] * shape[1],)  # (N, H) -> (N·H,)
    if leaf == "output_kernel" and len(shape) == 3:
        return (shape[0] * shape[1], shape[2])  # (N, H, D) -> (N·H, D)
    return shape


def block_path(i, part):
    """The zoo path of a weight of encoder block `i`, e.g. `block_path(0, "feed_forward_norm/gamma")`."""
    return f"encoder_block_{i}/{part}"


def implied_fields(path, tensors):
    """The `ViTConfig` fields every format implies the same way: pooling, image size, classes."""
    _, kernel = tensors.get("patch_embedding/projection/kernel", (None, None))
    _, table = tensors.get("position_embedding/position_embeddings", (None, None))
    if kernel is None or table is None or kernel.ndim != 4 or table.ndim != 2:
        raise ZooError(f"{path}: no patch embedding kernel (P, P, C, D) and position table.")
    cls = tensors.get("class_token/token", (None, None))[1] is not None
    grid = math.isqrt(table.shape[0] - int(cls))
    if grid * grid != table.shape[0] - int(cls):
        raise ZooError(f"{path}: the position table's {table.shape[0]} rows are not "
                       f"{'1 + ' if cls else ''}a square grid.")
    fields = {"pooling": "cls" if cls else "gap", "image_size": grid * kernel.shape[0]}
    _, head = tensors.get("head/kernel", (None, None))
    if head is not None:
        fields["num_classes"] = int(head.shape[-1])
    return fields
