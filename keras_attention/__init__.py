"""keras_attention: attention layers that implement the textbook math exactly.

See docs/math.md for the formulas. Public names are re-exported here:

    import keras_attention as ka
    mha = ka.MultiHeadAttention(num_heads=8, key_dim=64)
"""

from keras_attention import backends, chunked, layers, losses, metrics, ops, schedules
from keras_attention.chunked import chunked_dot_product_attention
from keras_attention.layers import (
    BahdanauAttention,
    CausalConv1D,
    ClassToken,
    DilatedResidualBlock,
    LinearAttention,
    LocationAwareAttention,
    MonotonicAttention,
    MultiHeadAttention,
    MultiResolutionAttention,
    PatchEmbedding,
    PointerGenerator,
    PositionEmbedding,
    PositionwiseFeedForward,
    SequencePooling,
    SinusoidalPositionalEncoding,
    TokenAndPositionEmbedding,
    TransformerDecoderBlock,
    TransformerEncoderBlock,
)
from keras_attention.layers.causal_convolution import receptive_field
from keras_attention.losses import MaskedSparseCategoricalCrossentropy, PointerGeneratorCrossentropy
from keras_attention.metrics import MaskedAccuracy
from keras_attention.ops import (
    additive_scores,
    causal_mask,
    masked_softmax,
    padding_mask,
    scaled_dot_product_attention,
    sinusoidal_encoding,
)
from keras_attention.schedules import BudgetSchedule, TransformerSchedule

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
