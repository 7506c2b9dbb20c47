"""Transformer encoder and decoder blocks (MATH.md, "Transformer")."""

import keras

from keras_attention.checks import check_positive_int, check_rate
from keras_attention.layers.feed_forward import PositionwiseFeedForward
from keras_attention.layers.linear import LinearAttention
from keras_attention.layers.multi_head import SCORINGS, MultiHeadAttention


def keras_mask(tensor):
    """The Keras mask attached to `tensor` by a masking layer (e.g. `mask_zero=True`), or None."""
    return getattr(tensor, "_keras_mask", None)


class _TransformerBlockBase(keras.layers.Layer):
    """Arguments, checks and sub-layer factories shared by the encoder and decoder blocks."""

    def __init__(
        self,
        num_heads,
        intermediate_dim,
        key_dim=None,
        dropout=0.0,
        attention_dropout=0.0,
        activation="relu",
        norm_first=False,
        layer_norm_epsilon=1e-5,
        scoring="scaled_dot",
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        attention="softmax",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("num_heads", num_heads)
        check_positive_int("intermediate_dim", intermediate_dim)
        check_positive_int("key_dim", key_dim, allow_none=True)
        check_rate("dropout", dropout)
        check_rate("attention_dropout", attention_dropout)
        if scoring not in SCORINGS:
            raise ValueError(f"`scoring` must be one of {SCORINGS}; received scoring={scoring!r}.")
        if attention not in ("softmax", "linear"):
            raise ValueError(
                f"`attention` must be 'softmax' or 'linear'; received attention={attention!r}."
            )
        if attention == "linear" and (scoring != "scaled_dot" or attention_dropout > 0.0):
            raise ValueError(
                "attention='linear' has no scoring choice and no attention dropout; received "
                f"scoring={scoring!r}, attention_dropout={attention_dropout}."
            )
        self.attention = attention
        self.num_heads = num_heads
        self.intermediate_dim = intermediate_dim
        self.key_dim = key_dim
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.activation = keras.activations.get(activation)
        self.norm_first = norm_first
        self.layer_norm_epsilon = layer_norm_epsilon
        self.scoring = scoring
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = True

    def _head_size(self, d_model):
        if d_model is None:
            raise ValueError("The feature size d_model (last axis) of the inputs must be known.")
        if self.key_dim is not None:
            return self.key_dim
        if d_model % self.num_heads != 0:
            raise ValueError(
                "num_heads must divide d_model; received "
                f"num_heads={self.num_heads}, d_model={d_model}."
            )
        return d_model // self.num_heads

    def _attention(self, name, d_model):
        if self.attention == "linear":
            return LinearAttention(
                self.num_heads,
                self._head_size(d_model),
                kernel_initializer=self.kernel_initializer,
                bias_initializer=self.bias_initializer,
                dtype=self.dtype_policy,
                name=name,
            )
        return MultiHeadAttention(
            self.num_heads,
            self._head_size(d_model),
            dropout=self.attention_dropout,
            scoring=self.scoring,
            kernel_initializer=self.kernel_initializer,
            bias_initializer=self.bias_initializer,
            dtype=self.dtype_policy,
            name=name,
        )

    def _scores_argument(self, return_attention_scores):
        """`return_attention_scores` for softmax attention; linear attention has no weights."""
        if self.attention == "softmax":
            return {"return_attention_scores": return_attention_scores}
        if return_attention_scores:
            raise ValueError(
                "attention='linear' computes no attention weights; received "
                "return_attention_scores=True."
            )
        return {}

    def _norm(self, name, shape):
        norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name=name
        )
        norm.build(shape)
        return norm

    def _feed_forward(self, shape):
        ffn = PositionwiseFeedForward(
            self.intermediate_dim,
            activation=self.activation,
            kernel_initializer=self.kernel_initializer,
            bias_initializer=self.bias_initializer,
            dtype=self.dtype_policy,
            name="feed_forward",
        )
        ffn.build(shape)
        return ffn

    def _sublayer(self, norm, fn, x, training):
        """`LayerNorm(x + Dropout(fn(x)))` (post-norm) or `x + Dropout(fn(LayerNorm(x)))`."""
        residual = x
        if self.norm_first:
            x = norm(x)
        outputs = fn(x)
        extra = ()
        if isinstance(outputs, tuple):
            outputs, *extra = outputs
        x = self._residual_dropout(outputs, training=training) + residual
        if not self.norm_first:
            x = norm(x)
        return (x, *extra)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "intermediate_dim": self.intermediate_dim,
                "key_dim": self.key_dim,
                "dropout": self.dropout,
                "attention_dropout": self.attention_dropout,
                "activation": keras.activations.serialize(self.activation),
                "norm_first": self.norm_first,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "scoring": self.scoring,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
                "attention": self.attention,
            }
        )
        return config


@keras.saving.register_keras_serializable(package="keras_attention")
class TransformerEncoderBlock(_TransformerBlockBase):
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


@keras.saving.register_keras_serializable(package="keras_attention")
class TransformerDecoderBlock(_TransformerBlockBase):
    """One decoder layer: causal self-attention, cross-attention, FFN, each with add & norm.

    Cross (encoder-decoder) attention is built when the block is first called
    with an `encoder_sequence`; without one the block is a decoder-only layer.
    Same arguments as `TransformerEncoderBlock`.

    Call arguments:
        decoder_sequence: `(B, T, D)`.
        encoder_sequence: `(B, S, De)` or None.
        decoder_padding_mask: `(B, T)`; defaults to the Keras mask of `decoder_sequence`.
        encoder_padding_mask: `(B, S)`; defaults to the Keras mask of `encoder_sequence`.
        decoder_attention_mask: `(B, T, T)`, combined with the causal mask.
        use_causal_mask: the auto-regressive mask (query `t` sees keys `<= t`).
        training: whether dropout is active.
        return_attention_scores: also return self-attention weights `(B, N, T, T)`
            and cross-attention weights `(B, N, T, S)` (None without an encoder).

    Returns:
        `(B, T, D)`, or `(outputs, self_weights, cross_weights)`.
    """

    def build(self, decoder_sequence_shape, encoder_sequence_shape=None):
        d_model = decoder_sequence_shape[-1]
        self.self_attention = self._attention("self_attention", d_model)
        self.self_attention.build(decoder_sequence_shape, decoder_sequence_shape)
        self.self_attention_norm = self._norm("self_attention_norm", decoder_sequence_shape)
        self.cross_attention = None
        if encoder_sequence_shape is not None:
            self.cross_attention = self._attention("cross_attention", d_model)
            self.cross_attention.build(decoder_sequence_shape, encoder_sequence_shape)
            self.cross_attention_norm = self._norm("cross_attention_norm", decoder_sequence_shape)
        self.feed_forward = self._feed_forward(decoder_sequence_shape)
        self.feed_forward_norm = self._norm("feed_forward_norm", decoder_sequence_shape)
        self._residual_dropout = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)
        self.built = True

    def call(
        self,
        decoder_sequence,
        encoder_sequence=None,
        decoder_padding_mask=None,
        encoder_padding_mask=None,
        decoder_attention_mask=None,
        use_causal_mask=True,
        training=None,
        return_attention_scores=False,
    ):
        if (encoder_sequence is None) != (self.cross_attention is None):
            raise ValueError(
                "TransformerDecoderBlock was built "
                + ("with" if self.cross_attention is not None else "without")
                + " cross-attention; call it "
                + ("with" if self.cross_attention is not None else "without")
                + " an `encoder_sequence`."
            )
        if decoder_padding_mask is None:
            decoder_padding_mask = keras_mask(decoder_sequence)
        if encoder_sequence is not None and encoder_padding_mask is None:
            encoder_padding_mask = keras_mask(encoder_sequence)

        def self_attend(x):
            return self.self_attention(
                x,
                x,
                query_mask=decoder_padding_mask,
                value_mask=decoder_padding_mask,
                attention_mask=decoder_attention_mask,
                use_causal_mask=use_causal_mask,
                training=training,
                **self._scores_argument(return_attention_scores),
            )

        x, *self_weights = self._sublayer(
            self.self_attention_norm, self_attend, decoder_sequence, training
        )
        cross_weights = [None]
        if self.cross_attention is not None:

            def cross_attend(h):
                return self.cross_attention(
                    h,
                    encoder_sequence,
                    query_mask=decoder_padding_mask,
                    value_mask=encoder_padding_mask,
                    training=training,
                    **self._scores_argument(return_attention_scores),
                )

            x, *cross_weights = self._sublayer(
                self.cross_attention_norm, cross_attend, x, training
            )
        (x,) = self._sublayer(
            self.feed_forward_norm, lambda h: self.feed_forward(h, training=training), x, training
        )
        if return_attention_scores:
            return x, self_weights[0], cross_weights[0]
        return x

    # === Incremental decoding (key/value cache) ===

    def empty_self_attention_cache(self, batch_size, length, dtype=None):
        """Zero self-attention key/value buffers for `length` target positions.

        Returns:
            `(keys, values)`, see `MultiHeadAttention.empty_cache`; with
            `attention="linear"` the constant-size state `(S, z)` of
            `LinearAttention.initial_state` (`length` and `dtype` unused).
        """
        if self.attention == "linear":
            return self.self_attention.initial_state(batch_size)
        return self.self_attention.empty_cache(batch_size, length, dtype)

    def compute_cross_attention_cache(self, encoder_sequence):
        """The cross-attention keys and values of the encoder output, computed once.

        Args:
            encoder_sequence: `(B, S, De)`.

        Returns:
            `(keys, values)`, see `MultiHeadAttention.compute_key_value`.
        """
        if self.cross_attention is None:
            raise ValueError(
                "This TransformerDecoderBlock was built without cross-attention; it has no "
                "cross-attention cache."
            )
        return self.cross_attention.compute_key_value(encoder_sequence)

    def call_with_cache(
        self,
        decoder_sequence,
        self_attention_cache,
        cache_index,
        cross_attention_cache=None,
        encoder_padding_mask=None,
        training=None,
    ):
        """The block for new target positions only, reusing cached keys and values.

        Gives the same outputs as `call` (with the causal mask) at positions
        `cache_index … cache_index + T - 1`, given that the buffers hold the
        earlier positions. The target must have no padding before those positions.

        Args:
            decoder_sequence: `(B, T, D)`, usually T = 1.
            self_attention_cache: `(keys, values)` from `empty_self_attention_cache`
                or a previous call.
            cache_index: int or scalar int tensor, the position of `decoder_sequence[:, 0]`.
            cross_attention_cache: `(keys, values)` from `compute_cross_attention_cache`
                (required when the block has cross-attention).
            encoder_padding_mask: `(B, S)`, True for real source tokens.
            training: whether dropout is active.

        Returns:
            `(outputs (B, T, D), self_attention_cache)` with the new positions written.
        """
        if (cross_attention_cache is None) != (self.cross_attention is None):
            raise ValueError(
                "TransformerDecoderBlock was built "
                + ("with" if self.cross_attention is not None else "without")
                + " cross-attention; call it "
                + ("with" if self.cross_attention is not None else "without")
                + " a `cross_attention_cache`."
            )
        if self.attention == "linear":  # the cache is the recurrent state (S, z)

            def self_attend(x):
                return self.self_attention.call_with_state(x, self_attention_cache)

        else:

            def self_attend(x):
                output, key_cache, value_cache = self.self_attention.call_with_cache(
                    x, *self_attention_cache, cache_index=cache_index, training=training
                )
                return output, (key_cache, value_cache)

        x, self_attention_cache = self._sublayer(
            self.self_attention_norm, self_attend, decoder_sequence, training
        )
        if self.cross_attention is not None:

            def cross_attend(h):
                output, _, _ = self.cross_attention.call_with_cache(
                    h, *cross_attention_cache, value_mask=encoder_padding_mask,
                    training=training,
                )
                return output

            (x,) = self._sublayer(self.cross_attention_norm, cross_attend, x, training)
        (x,) = self._sublayer(
            self.feed_forward_norm, lambda h: self.feed_forward(h, training=training), x, training
        )
        return x, self_attention_cache

    def compute_output_shape(self, decoder_sequence_shape, encoder_sequence_shape=None):
        return decoder_sequence_shape

    def compute_output_spec(self, decoder_sequence, encoder_sequence=None, *args,
                            return_attention_scores=False, **kwargs):
        output = keras.KerasTensor(decoder_sequence.shape, dtype=self.compute_dtype)
        if not return_attention_scores:
            return output
        batch, length = decoder_sequence.shape[0], decoder_sequence.shape[1]
        self_weights = keras.KerasTensor(
            (batch, self.num_heads, length, length), dtype=self.compute_dtype
        )
        cross_weights = None
        if encoder_sequence is not None:
            cross_weights = keras.KerasTensor(
                (batch, self.num_heads, length, encoder_sequence.shape[1]),
                dtype=self.compute_dtype,
            )
        return output, self_weights, cross_weights
