"""What the Transformer's encoder and decoder blocks share (docs/math.md#the-transformer-blocks):
their arguments and checks, the sub-layer factories, and add & norm around a sub-layer."""

import keras

from keras_attention.checks import check_positive_int, check_rate
from keras_attention.layers.feed_forward import PositionwiseFeedForward
from keras_attention.layers.linear import LinearAttention
from keras_attention.layers.multi_head import SCORINGS, MultiHeadAttention


def keras_mask(tensor):
    """The Keras mask attached to `tensor` by a masking layer (e.g. `mask_zero=True`), or None."""
    return getattr(tensor, "_keras_mask", None)


class TransformerBlockBase(keras.layers.Layer):
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
        flash_attention=None,
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
        if attention == "linear" and (scoring != "scaled_dot" or attention_dropout > 0.0
                                      or flash_attention is not None):
            raise ValueError(
                "attention='linear' has no scoring choice, no attention dropout and no fused "
                f"softmax attention; received scoring={scoring!r}, "
                f"attention_dropout={attention_dropout}, flash_attention={flash_attention}."
            )
        self.attention = attention
        self.flash_attention = flash_attention
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
            flash_attention=self.flash_attention,
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
                "flash_attention": self.flash_attention,
            }
        )
        return config


