"""The Vision Transformer (Dosovitskiy et al., 2021): `zoo.get("vit-b16")`.

`model` builds it and registers its sizes, `recipe` compiles it for training,
`augmentation` holds its image augmentation layers, and `weights` reads
pretrained checkpoints (Google `.npz`, timm, Hugging Face) into it.
"""

from zoo.vit.augmentation import Augmentation, RandomShift, ShiftedImages
from zoo.vit.model import ViTConfig, attention_weights, build, gelu_tanh
from zoo.vit.recipe import compile_model, freeze_backbone

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
