"""The Vision Transformer (Dosovitskiy et al., 2021): `zoo.get("vit-b16")`.

The family's shape: `config` holds its sizes and registers them, `model` builds it,
`recipe` compiles it for training, `augmentation` holds its image augmentation layers,
and `weights` reads pretrained checkpoints (Google `.npz`, timm, Hugging Face) into it.
It does not decode (no `decoding`): it exports as an image classifier. `FAMILY` is the
family object the registry holds.

Importing the package loads only `config` (no Keras): the other names load
their module on first use (PEP 562), so that `zoo list` runs without TensorFlow.
"""

from keras_attention import lazy
from zoo import registry
from zoo.vit.config import ViTConfig

# `zoo.get(name, weights=path)`: Google, timm and Hugging Face files.
FAMILY = registry.package_family(
    __name__, "vit", ViTConfig, "image", decodes=False,
    read_weights=registry.Lazy("zoo.vit.weights.pretrained", "read"),
)

# The other public names, by the module that defines them, imported on first use.
_LAZY = lazy.by_module({
    "zoo.vit.augmentation": ("Augmentation", "RandomShift", "ShiftedImages"),
    "zoo.vit.model": ("attention_weights", "build", "gelu_tanh"),
    "zoo.vit.recipe": ("compile_model", "freeze_backbone"),
})


__getattr__ = lazy.module_getattr(__name__, _LAZY)


__all__ = [
    "Augmentation", "FAMILY", "RandomShift", "ShiftedImages", "ViTConfig", "attention_weights",
    "build", "compile_model", "freeze_backbone", "gelu_tanh",
]
