"""keras_attention: attention layers that implement the textbook math exactly.

See docs/math.md for the formulas. Public names are re-exported here:

    import keras_attention as ka
    mha = ka.MultiHeadAttention(num_heads=8, key_dim=64)

`import keras_attention` itself imports no Keras: the names below load on
first use (PEP 562), so that its light modules (`keras_attention.checks`)
import without TensorFlow, as `zoo list` needs. The first public class or
function asked for loads them all (Keras, and every layer, loss, metric and
schedule registered for `keras.saving.load_model`); a submodule name
(`ka.ops`, `from keras_attention import backends`) loads that module. Once
Keras is imported, by anyone, they all load too (`after_import`), so that a
`.keras` file naming them loads after `import keras_attention` as it always did.
"""

import importlib

from keras_attention import after_import, lazy

# Each public name and the module that defines it.
_SUBMODULES = ("backends", "chunked", "layers", "losses", "metrics", "ops", "schedules")
_NAMES = {
    "chunked_dot_product_attention": "keras_attention.chunked",
    **dict.fromkeys((
        "BahdanauAttention", "CausalConv1D", "ClassToken", "DilatedResidualBlock",
        "LinearAttention", "LocationAwareAttention", "MonotonicAttention", "MultiHeadAttention",
        "MultiResolutionAttention", "PatchEmbedding", "PointerGenerator", "PositionEmbedding",
        "PositionwiseFeedForward", "SequencePooling", "SinusoidalPositionalEncoding",
        "TokenAndPositionEmbedding", "TransformerDecoderBlock", "TransformerEncoderBlock",
    ), "keras_attention.layers"),
    "receptive_field": "keras_attention.layers.causal_convolution",
    "MaskedSparseCategoricalCrossentropy": "keras_attention.losses",
    "PointerGeneratorCrossentropy": "keras_attention.losses",
    "MaskedAccuracy": "keras_attention.metrics",
    **dict.fromkeys(("additive_scores", "causal_mask", "masked_softmax", "padding_mask",
                     "scaled_dot_product_attention", "sinusoidal_encoding"),
                    "keras_attention.ops"),
    "BudgetSchedule": "keras_attention.schedules",
    "TransformerSchedule": "keras_attention.schedules",
}


def _load_all():
    """Import every submodule of `_SUBMODULES` and bind the public names here.

    Run too when Keras has been imported, which may be from inside one of the submodules
    (`import keras_attention.schedules` before Keras): that one is still running then, its
    names not yet defined; they are bound on first use (`__getattr__` runs this again)."""
    for name in _SUBMODULES:
        globals()[name] = importlib.import_module(f"keras_attention.{name}")
    for name, module in _NAMES.items():
        loaded = importlib.import_module(module)
        if hasattr(loaded, name):
            globals()[name] = getattr(loaded, name)


def __getattr__(name):
    if name in _SUBMODULES:  # imported alone: the submodules import one another by name
        return importlib.import_module(f"keras_attention.{name}")
    if name in _NAMES:
        _load_all()
        return globals()[name]
    return lazy.submodule(__name__, name)


def __dir__():
    return sorted(set(globals()) | set(__all__))


after_import.when_keras_loaded(_load_all)


__version__ = "0.1.0"

__all__ = [
    "BahdanauAttention",
    "BudgetSchedule",
    "CausalConv1D",
    "ClassToken",
    "DilatedResidualBlock",
    "LinearAttention",
    "LocationAwareAttention",
    "MaskedAccuracy",
    "MaskedSparseCategoricalCrossentropy",
    "MonotonicAttention",
    "MultiHeadAttention",
    "MultiResolutionAttention",
    "PatchEmbedding",
    "PointerGenerator",
    "PointerGeneratorCrossentropy",
    "PositionEmbedding",
    "PositionwiseFeedForward",
    "SequencePooling",
    "SinusoidalPositionalEncoding",
    "TokenAndPositionEmbedding",
    "TransformerDecoderBlock",
    "TransformerEncoderBlock",
    "TransformerSchedule",
    "additive_scores",
    "backends",
    "causal_mask",
    "chunked",
    "chunked_dot_product_attention",
    "layers",
    "losses",
    "masked_softmax",
    "metrics",
    "ops",
    "padding_mask",
    "receptive_field",
    "scaled_dot_product_attention",
    "schedules",
    "sinusoidal_encoding",
]
