"""Convolutional sequence to sequence learning (ConvS2S, Gehring et al., 2017): `zoo.get("convs2s-wmt-en-ro")`.

The family's shape: `config` holds its sizes and registers them, `model` builds it,
`recipe` compiles it for training, `decoding` holds its cached step for `zoo.decode`'s
searches (`IncrementalDecoder`); `layers` holds its GLU convolutions and multi-step
attention. `FAMILY` is the family object the registry holds.

Importing the package loads only `config` (no Keras): the other names load
their module on first use (PEP 562), so that `zoo list` runs without TensorFlow.
"""

from keras_attention import lazy
from zoo import registry
from zoo.convs2s.config import OPTIMIZERS, ConvS2SConfig

FAMILY = registry.package_family(__name__, "convs2s", ConvS2SConfig, "translation")

# The other public names, by the module that defines them, imported on first use.
_LAZY = lazy.by_module({
    "zoo.convs2s.layers": ("ConvS2SDecoderBlock", "ConvS2SEncoderBlock", "SourceKeysAndValues"),
    "zoo.convs2s.model": ("attention_weights", "build", "decode", "encode"),
    "zoo.convs2s.recipe": ("compile_model",),
})


__getattr__ = lazy.module_getattr(__name__, _LAZY)


__all__ = [
    "ConvS2SConfig", "ConvS2SDecoderBlock", "ConvS2SEncoderBlock", "FAMILY", "OPTIMIZERS",
    "SourceKeysAndValues", "attention_weights", "build", "compile_model", "decode", "encode",
]
