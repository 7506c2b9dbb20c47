"""The Vision Transformer (Dosovitskiy et al., 2021): `zoo.get("vit-b16")`.

`config` holds its sizes and registers them, `model` builds it, `recipe`
compiles it for training, `augmentation` holds its image augmentation layers,
and `weights` reads pretrained checkpoints (Google `.npz`, timm, Hugging Face)
into it.

Importing the package loads only `config` (no Keras): the other names load
their module on first use (PEP 562), so that `zoo list` runs without TensorFlow.
"""

from keras_attention import lazy
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


__getattr__ = lazy.module_getattr(__name__, _LAZY)


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
