"""Transformer encoder and decoder blocks (docs/math.md#the-transformer-blocks).

One module each: `transformer_encoder` (`TransformerEncoderBlock`),
`transformer_decoder` (`TransformerDecoderBlock`) and what they share,
`transformer_block`. The blocks stay importable from here.
"""

from keras_attention.layers.transformer_block import keras_mask
from keras_attention.layers.transformer_decoder import TransformerDecoderBlock
from keras_attention.layers.transformer_encoder import TransformerEncoderBlock

__all__ = ["TransformerDecoderBlock", "TransformerEncoderBlock", "keras_mask"]
