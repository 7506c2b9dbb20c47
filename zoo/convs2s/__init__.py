"""Convolutional sequence to sequence learning (ConvS2S, Gehring et al., 2017): `zoo.get("convs2s-wmt-en-ro")`.

`config` holds its sizes and registers them, `model` builds it; `layers` holds its GLU
convolutions and multi-step attention. Its cached decoding step is
`zoo.decode.steps.IncrementalDecoder`, beside the other families' steps.

Importing the package loads only `config` (no Keras): the other names load
their module on first use (PEP 562), so that `zoo list` runs without TensorFlow.
"""

from keras_attention import lazy
from zoo.convs2s.config import OPTIMIZERS, ConvS2SConfig

# The other public names and their modules, imported on first use.
_LAZY = {
    "ConvS2SDecoderBlock": "zoo.convs2s.layers",
    "ConvS2SEncoderBlock": "zoo.convs2s.layers",
    "SourceKeysAndValues": "zoo.convs2s.layers",
    "attention_weights": "zoo.convs2s.model",
    "build": "zoo.convs2s.model",
    "compile_model": "zoo.convs2s.model",
    "decode": "zoo.convs2s.model",
    "encode": "zoo.convs2s.model",
}


__getattr__ = lazy.module_getattr(__name__, _LAZY)


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
