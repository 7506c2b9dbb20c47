"""The Transformer of "Attention Is All You Need" (Vaswani et al., 2017): `zoo.get("transformer-base")`.

`config` holds its sizes and registers the paper's, `model` builds it, `layers` holds its two
zoo-specific layers, and `marian` imports OPUS-MT checkpoints into it
(`zoo.transformer.marian`, loaded on first use: it reads safetensors;
`marian_config` maps their config.json to `TransformerConfig`).

Importing the package loads only `config` (no Keras): the other names load
their module on first use (PEP 562), so that `zoo list` runs without TensorFlow.
"""

import importlib

from zoo.transformer.config import ACTIVATIONS, TransformerConfig

# The other public names and their modules, imported on first use.
_LAZY = {
    "FinalLogitsBias": "zoo.transformer.layers",
    "PaddingMask": "zoo.transformer.layers",
    "attention_weights": "zoo.transformer.model",
    "build": "zoo.transformer.model",
    "compile_model": "zoo.transformer.model",
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
    "ACTIVATIONS",
    "FinalLogitsBias",
    "PaddingMask",
    "TransformerConfig",
    "attention_weights",
    "build",
    "compile_model",
]
