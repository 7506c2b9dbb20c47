"""Convolutional sequence to sequence learning (ConvS2S, Gehring et al., 2017): `zoo.get("convs2s-wmt-en-ro")`.

`model` builds it and registers its sizes; `layers` holds its GLU
convolutions and multi-step attention. Its cached decoding step is
`zoo.decode.steps.IncrementalDecoder`, beside the other families' steps.
"""

from zoo.convs2s.layers import ConvS2SDecoderBlock, ConvS2SEncoderBlock, SourceKeysAndValues
from zoo.convs2s.model import (
    OPTIMIZERS,
    ConvS2SConfig,
    attention_weights,
    build,
    compile_model,
    decode,
    encode,
)

__all__ = [
    "OPTIMIZERS",
    "ConvS2SConfig",
    "ConvS2SDecoderBlock",
    "ConvS2SEncoderBlock",
    "SourceKeysAndValues",
    "attention_weights",
    "build",
    "compile_model",
    "decode",
    "encode",
]
