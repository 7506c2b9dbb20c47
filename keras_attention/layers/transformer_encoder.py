"""The Transformer encoder block (docs/math.md#the-transformer-blocks; Vaswani et al. 2017, section 3.1)."""

import keras

from keras_attention.layers.transformer_block import TransformerBlockBase, keras_mask


@keras.saving.register_keras_serializable(package="keras_attention")
class TransformerEncoderBlock(TransformerBlockBase):
    """One encoder layer: self-attention, then the position-wise FFN, each with add & norm.

    Post-norm (the paper): `x = LayerNorm(x + Dropout(Sublayer(x)))`.
    Pre-norm (`norm_first=True`, ViT): `x = x + Dropout(Sublayer(LayerNorm(x)))`;
    a stack of pre-norm blocks needs a final LayerNorm.

    Args:
        num_heads: N.
        intermediate_dim: d_ff, the FFN's inner size.
        key_dim: head size H; defaults to `d_model / num_heads` (which must divide).
        dropout: residual dropout on each sub-layer's output (0.1 in the paper).
        attention_dropout: dropout on the attention weights.
        activation: FFN activation (`"relu"`; `"gelu"` for ViT).
        norm_first: pre-norm instead of post-norm.
        layer_norm_epsilon: epsilon of the layer norms.
        scoring: attention pooling of the heads (see `MultiHeadAttention`).
        attention: `"softmax"` (`MultiHeadAttention`) or `"linear"` (`LinearAttention`,
            O(n) in the length; no attention weights, no attention dropout; cached
            decoding keeps its constant-size state `(S, z)` instead of keys and values).
        flash_attention: `MultiHeadAttention`'s (softmax attention only): None (default)
            computes the attention with `keras.ops.dot_product_attention` on PyTorch and
            on JAX with a GPU or TPU (`fused_by_default`) whenever the call allows it:
            not while `attention_dropout > 0` is active in training, nor for
            `return_attention_scores=True`; True always, False never.

    Call arguments:
        inputs: `(B, S, D)`.
        padding_mask: `(B, S)`, True for real tokens; defaults to the inputs' Keras mask.
        attention_mask: `(B, S, S)`, True = may attend.
        training: whether dropout is active.
        return_attention_scores: also return the weights `(B, N, S, S)`.

    Returns:
        `(B, S, D)` (and the attention weights).
    """

    def build(self, inputs_shape):
        d_model = inputs_shape[-1]
        self.self_attention = self._attention("self_attention", d_model)
        self.self_attention.build(inputs_shape, inputs_shape)
        self.self_attention_norm = self._norm("self_attention_norm", inputs_shape)
        self.feed_forward = self._feed_forward(inputs_shape)
        self.feed_forward_norm = self._norm("feed_forward_norm", inputs_shape)
        self._residual_dropout = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)
        self.built = True

    def call(
        self,
        inputs,
        padding_mask=None,
        attention_mask=None,
        training=None,
        return_attention_scores=False,
    ):
        if padding_mask is None:
            padding_mask = keras_mask(inputs)

        def attend(x):
            return self.self_attention(
                x,
                x,
                query_mask=padding_mask,
                value_mask=padding_mask,
                attention_mask=attention_mask,
                training=training,
                **self._scores_argument(return_attention_scores),
            )

        x, *weights = self._sublayer(self.self_attention_norm, attend, inputs, training)
        (x,) = self._sublayer(
            self.feed_forward_norm, lambda h: self.feed_forward(h, training=training), x, training
        )
        if return_attention_scores:
            return x, weights[0]
        return x

    def compute_output_shape(self, inputs_shape):
        return inputs_shape

    def compute_output_spec(self, inputs, *args, return_attention_scores=False, **kwargs):
        output = keras.KerasTensor(inputs.shape, dtype=self.compute_dtype)
        if not return_attention_scores:
            return output
        batch, length = inputs.shape[0], inputs.shape[1]
        weights = keras.KerasTensor((batch, self.num_heads, length, length), self.compute_dtype)
        return output, weights


