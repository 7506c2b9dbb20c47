"""The Transformer of "Attention Is All You Need" (Vaswani et al., 2017): `zoo.get("transformer-base")`.

The family's shape: `config` holds its sizes and registers the paper's, `model` builds it,
`recipe` compiles it for training, `decoding` holds its cached step for `zoo.decode`'s
searches, `copying` its pointer-generator, `layers` its two zoo-specific layers, and
`weights` imports OPUS-MT checkpoints into it (`zoo.transformer.weights.marian`, loaded on
first use: it reads safetensors; `marian_config` maps their config.json to
`TransformerConfig`). `FAMILY` is the family object the registry holds.

Importing the package loads only `config` (no Keras): the other names load
their module on first use (PEP 562), so that `zoo list` runs without TensorFlow.
"""

from keras_attention import lazy
from zoo import registry
from zoo.transformer.config import ACTIVATIONS, TransformerConfig

_MARIAN = "zoo.transformer.weights.marian"
# `zoo.get("transformer-base", weights=FOLDER)` builds the model from the folder; `zoo train
# transformer-base --weights FOLDER` fine-tunes it with the folder's tokenizers.
FAMILY = registry.package_family(
    __name__, "transformer", TransformerConfig, "translation",
    import_weights=registry.Lazy(_MARIAN, "build_model"),
    import_config=registry.Lazy(f"{_MARIAN}_config", "transformer_config"),
    import_tokenizers=registry.Lazy(_MARIAN, "load_tokenizers"),
)

# The other public names, by the module that defines them, imported on first use.
_LAZY = lazy.by_module({
    "zoo.transformer.layers": ("FinalLogitsBias", "PaddingMask"),
    "zoo.transformer.model": ("attention_weights", "build"),
    "zoo.transformer.recipe": ("compile_model",),
})


__getattr__ = lazy.module_getattr(__name__, _LAZY)


__all__ = [
    "ACTIVATIONS", "FAMILY", "FinalLogitsBias", "PaddingMask", "TransformerConfig",
    "attention_weights", "build", "compile_model",
]
