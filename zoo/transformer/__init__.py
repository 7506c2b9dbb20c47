"""The Transformer of "Attention Is All You Need" (Vaswani et al., 2017): `zoo.get("transformer-base")`.

`config` holds its sizes and registers the paper's, `model` builds it, `layers` holds its two
zoo-specific layers, and `marian` imports OPUS-MT checkpoints into it
(`zoo.transformer.marian`, loaded on first use: it reads safetensors;
`marian_config` maps their config.json to `TransformerConfig`).

Importing the package loads only `config` (no Keras): the other names load
their module on first use (PEP 562), so that `zoo list` runs without TensorFlow.
"""

from keras_attention import lazy
from zoo.transformer.config import ACTIVATIONS, TransformerConfig

# The other public names and their modules, imported on first use.
_LAZY = {
    "FinalLogitsBias": "zoo.transformer.layers",
    "PaddingMask": "zoo.transformer.layers",
    "attention_weights": "zoo.transformer.model",
    "build": "zoo.transformer.model",
    "compile_model": "zoo.transformer.model",
}


__getattr__ = lazy.module_getattr(__name__, _LAZY)


__all__ = [
    "ACTIVATIONS",
    "FinalLogitsBias",
    "PaddingMask",
    "TransformerConfig",
    "attention_weights",
    "build",
    "compile_model",
]
