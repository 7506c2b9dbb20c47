"""The Transformer of "Attention Is All You Need" (Vaswani et al., 2017): `zoo.get("transformer-base")`.

`model` builds it and registers its paper sizes, `layers` holds its two
zoo-specific layers, and `marian` imports OPUS-MT checkpoints into it
(`zoo.transformer.marian`, loaded on first use: it reads safetensors;
`marian_config` maps their config.json to `TransformerConfig`).
"""

from zoo.transformer.layers import FinalLogitsBias, PaddingMask
from zoo.transformer.model import (
    ACTIVATIONS,
    TransformerConfig,
    attention_weights,
    build,
    compile_model,
)

__all__ = [
    "ACTIVATIONS",
    "FinalLogitsBias",
    "PaddingMask",
    "TransformerConfig",
    "attention_weights",
    "build",
    "compile_model",
]
