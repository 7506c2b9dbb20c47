"""The layers of keras_attention, one concept per module."""

from keras_attention.layers.bahdanau import BahdanauAttention
from keras_attention.layers.causal_convolution import CausalConv1D, DilatedResidualBlock
from keras_attention.layers.feed_forward import PositionwiseFeedForward
from keras_attention.layers.linear import LinearAttention
from keras_attention.layers.location_aware import LocationAwareAttention
from keras_attention.layers.monotonic import MonotonicAttention
from keras_attention.layers.multi_head import MultiHeadAttention
from keras_attention.layers.multi_resolution import MultiResolutionAttention
from keras_attention.layers.pointer_generator import PointerGenerator
from keras_attention.layers.positional import (
    PositionEmbedding,
    SinusoidalPositionalEncoding,
    TokenAndPositionEmbedding,
)
from keras_attention.layers.transformer_decoder import TransformerDecoderBlock
from keras_attention.layers.transformer_encoder import TransformerEncoderBlock
from keras_attention.layers.vision import ClassToken, PatchEmbedding, SequencePooling

__all__ = [
    "BahdanauAttention",
    "CausalConv1D",
    "ClassToken",
    "DilatedResidualBlock",
    "LinearAttention",
    "LocationAwareAttention",
    "MonotonicAttention",
    "MultiHeadAttention",
    "MultiResolutionAttention",
    "PatchEmbedding",
    "PointerGenerator",
    "PositionEmbedding",
    "PositionwiseFeedForward",
    "SequencePooling",
    "SinusoidalPositionalEncoding",
    "TokenAndPositionEmbedding",
    "TransformerDecoderBlock",
    "TransformerEncoderBlock",
]
