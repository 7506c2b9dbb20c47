"""The Vision Transformer (Dosovitskiy et al., 2021): `zoo.get("vit-b16")`.

`config` holds its sizes and registers them, `model` builds it, `recipe`
compiles it for training, `augmentation` holds its image augmentation layers,
and `weights` reads pretrained checkpoints (Google `.npz`, timm, Hugging Face)
into it.

Importing the package loads only `config` (no Keras): the other names load
their module on first use (PEP 562), so that `zoo list` runs without TensorFlow.
"""

import importlib

from zoo.vit.config import ViTConfig

# The other public names and their modules, imported on first use.
_LAZY = {
    "Augmentation": "zoo.vit.augmentation",
    "RandomShift": "zoo.vit.augmentation",
    "ShiftedImages": "zoo.vit.augmentation",
    "attention_weights": "zoo.vit.model",
    "build": "zoo.vit.model",
    "gelu_tanh": "zoo.vit.model",
    "compile_model": "zoo.vit.recipe",
    "freeze_backbone": "zoo.vit.recipe",
}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if not name.startswith("__"):
        try:  # one of the package's modules: an attribute once imported, as when this file imported it
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as error:
            if error.name != f"{__name__}.{name}":
                raise  # the module exists; something it imports does not
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Augmentation",
    "RandomShift",
    "ShiftedImages",
    "ViTConfig",
    "attention_weights",
    "build",
    "compile_model",
    "freeze_backbone",
    "gelu_tanh",
]
