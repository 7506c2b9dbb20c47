"""The position-wise feed-forward network (docs/math.md#the-transformer-blocks)."""

import keras

from keras_attention import xla
from keras_attention.checks import check_positive_int, check_rate


@keras.saving.register_keras_serializable(package="keras_attention")
class PositionwiseFeedForward(keras.layers.Layer):
    """`FFN(x) = act(x W_1 + b_1) W_2 + b_2`, the same weights at every position.

    With `activation="relu"` this is the Transformer's `max(0, xW_1 + b_1)W_2 + b_2`;
    ViT's MLP uses `"gelu"`.

    Args:
        intermediate_dim: d_ff, the inner size (2048 in Transformer-base).
        output_dim: output size; defaults to the input's D.
        activation: the inner non-linearity.
        dropout: dropout on the inner activations (0 in the paper; ViT uses it).
        use_bias: whether W_1 and W_2 have biases.

    Call arguments:
        inputs: `(B, L, D)` (any rank; applied on the last axis).

    Returns:
        `(B, L, output_dim)`.
    """

    def __init__(
        self,
        intermediate_dim,
        output_dim=None,
        activation="relu",
        dropout=0.0,
        use_bias=True,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("intermediate_dim", intermediate_dim)
        check_positive_int("output_dim", output_dim, allow_none=True)
        check_rate("dropout", dropout)
        self.intermediate_dim = intermediate_dim
        self.output_dim = output_dim
        self.activation = keras.activations.get(activation)
        self.dropout = dropout
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = True

    def build(self, input_shape):
        if input_shape[-1] is None:
            raise ValueError(
                f"The last axis of the inputs must be known; received shape {tuple(input_shape)}."
            )
        dense = dict(
            use_bias=self.use_bias,
            kernel_initializer=self.kernel_initializer,
            bias_initializer=self.bias_initializer,
            dtype=self.dtype_policy,
        )
        self.inner_dense = keras.layers.Dense(
            self.intermediate_dim, activation=self.activation, name="inner_dense", **dense
        )
        self.inner_dense.build(input_shape)
        self.inner_dropout = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)
        self.output_dense = keras.layers.Dense(
            self.output_dim or input_shape[-1], name="output_dense", **dense
        )
        self.output_dense.build(tuple(input_shape[:-1]) + (self.intermediate_dim,))
        self.built = True

    def call(self, inputs, training=None):
        hidden = xla.dense(self.inner_dense, inputs)  # (B, L, d_ff)
        hidden = self.inner_dropout(hidden, training=training)
        return xla.dense(self.output_dense, hidden)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.output_dim or input_shape[-1],)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "intermediate_dim": self.intermediate_dim,
                "output_dim": self.output_dim,
                "activation": keras.activations.serialize(self.activation),
                "dropout": self.dropout,
                "use_bias": self.use_bias,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config
