"""Causal (dilated) convolutions: the convolution row of the cost table
(docs/math.md#cost-per-layer).

A causal convolution's output at position t sees only inputs at positions ≤ t (left
padding by `(k - 1)·d` zeros); dilation `d` spaces the kernel's taps `d` positions
apart, so a stack with dilations 1, k, k², … sees n positions after O(log_k n) layers
instead of O(n/k) (van den Oord et al. 2016, WaveNet; Bai et al. 2018, TCN).
"""

import keras
from keras import ops

from keras_attention.checks import check_positive_int, check_rate


def receptive_field(kernel_size, dilations, convolutions_per_dilation=1):
    """Inputs seen by one output of a stack of causal convolutions: `1 + c·(k - 1)·Σ d`.

    Args:
        kernel_size: k, the kernel size of every convolution.
        dilations: the dilation of each layer (or block), e.g. `[1, 2, 4, 8]`.
        convolutions_per_dilation: c, convolutions per entry of `dilations` (2 for
            `DilatedResidualBlock`, which has two convolutions at its dilation).

    Returns:
        The number of input positions, the current one included.
    """
    check_positive_int("kernel_size", kernel_size)
    check_positive_int("convolutions_per_dilation", convolutions_per_dilation)
    dilations = list(dilations)
    for dilation in dilations:
        check_positive_int("dilations entry", dilation)
    return 1 + convolutions_per_dilation * (kernel_size - 1) * sum(dilations)


class _CausalLayer(keras.layers.Layer):
    """What `CausalConv1D` and `DilatedResidualBlock` share: `filters`, `kernel_size` and
    `dilation_rate` (checked, first in `get_config`), masking (masked positions zeroed),
    the check of `(B, T, C)` inputs and the output shape `(B, T, filters)`."""

    def __init__(self, filters, kernel_size, dilation_rate, **kwargs):
        super().__init__(**kwargs)
        check_positive_int("filters", filters)
        check_positive_int("kernel_size", kernel_size)
        check_positive_int("dilation_rate", dilation_rate)
        self.filters = filters
        self.kernel_size = kernel_size
        self.dilation_rate = dilation_rate
        self.supports_masking = True

    @staticmethod
    def check_input_shape(input_shape):
        if len(input_shape) != 3 or input_shape[-1] is None:
            raise ValueError(
                "`inputs` must have shape (B, T, C) with known C; "
                f"received inputs.shape={tuple(input_shape)}."
            )

    @staticmethod
    def zero_padding(inputs, mask):
        """`inputs` `(B, T, C)` with the positions that `mask` `(B, T)` marks False zeroed."""
        if mask is None:
            return inputs
        return inputs * ops.cast(mask, inputs.dtype)[:, :, None]

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.filters,)

    def get_config(self):
        config = super().get_config()
        config.update({"filters": self.filters, "kernel_size": self.kernel_size,
                       "dilation_rate": self.dilation_rate})
        return config


@keras.saving.register_keras_serializable(package="keras_attention")
class CausalConv1D(_CausalLayer):
    """`y_t = Σ_{i<k} W_i x_{t - (k-1-i)·d} + b`: a 1-D convolution that never looks ahead.

    The input is padded on the left with `(k - 1)·d` zeros and convolved without
    padding, so the output has the input's length and position t depends on
    positions t - (k-1)·d, …, t - d, t only. Same weights as
    `keras.layers.Conv1D(padding="causal")`.

    Args:
        filters: output channels.
        kernel_size: k.
        dilation_rate: d, the spacing of the kernel's taps.
        activation: applied to the output (None: linear).
        use_bias: whether the convolution has a bias.
        kernel_initializer, bias_initializer: initializers.

    Call arguments:
        inputs: `(B, T, C)`.
        mask: optional `(B, T)` padding mask (from Keras); masked positions are zeroed
            before the convolution and the mask is passed on.

    Returns:
        `(B, T, filters)`.

    References:
        van den Oord et al., "WaveNet: A Generative Model for Raw Audio", 2016, section 2.1.
    """

    def __init__(
        self,
        filters,
        kernel_size,
        dilation_rate=1,
        activation=None,
        use_bias=True,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(filters, kernel_size, dilation_rate, **kwargs)
        self.activation = keras.activations.get(activation)
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)

    def build(self, input_shape):
        self.check_input_shape(input_shape)
        self._convolution = keras.layers.Conv1D(
            self.filters,
            self.kernel_size,
            dilation_rate=self.dilation_rate,
            padding="valid",
            use_bias=self.use_bias,
            kernel_initializer=self.kernel_initializer,
            bias_initializer=self.bias_initializer,
            dtype=self.dtype_policy,
            name="convolution",
        )
        self._convolution.build((input_shape[0], None, input_shape[-1]))
        self.built = True

    def call(self, inputs, mask=None):
        inputs = self.zero_padding(inputs, mask)
        left = (self.kernel_size - 1) * self.dilation_rate
        padded = ops.pad(inputs, ((0, 0), (left, 0), (0, 0)))  # (B, left + T, C)
        return self.activation(self._convolution(padded))  # (B, T, filters)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "activation": keras.activations.serialize(self.activation),
                "use_bias": self.use_bias,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config


@keras.saving.register_keras_serializable(package="keras_attention")
class DilatedResidualBlock(_CausalLayer):
    """TCN residual block: `relu(x + F(x))`, F two dilated causal convolutions with ReLU.

    `F = Dropout ∘ ReLU ∘ CausalConv1D(d) ∘ Dropout ∘ ReLU ∘ CausalConv1D(d)`; the
    residual is `x`, or a 1×1 convolution of `x` when its channels differ from
    `filters` (Bai, Kolter, Koltun 2018, figure 1b). Stacking blocks with dilations
    1, 2, 4, … gives `receptive_field(k, dilations, convolutions_per_dilation=2)`.

    Why ReLU and not WaveNet's gated unit `tanh(W_f * x) ⊙ σ(W_g * x)`: the gate
    doubles the convolution weights and was made for generating audio with skip
    connections to the output; the TCN block is the generic sequence-modelling form,
    shown by Bai et al. to match or beat LSTMs/GRUs on sequence tasks at the same size,
    and it is simpler to read. (The paper also uses weight normalisation and spatial
    dropout; this block uses plain dropout.)

    Args:
        filters: output channels of both convolutions.
        kernel_size: k.
        dilation_rate: d of both convolutions.
        dropout: dropout rate after each activation.
        kernel_initializer: initializer of the convolution kernels.
        seed: seed of the dropout.

    Call arguments:
        inputs: `(B, T, C)`.
        mask: optional `(B, T)` padding mask; masked positions are zeroed.
        training: whether dropout is active.

    Returns:
        `(B, T, filters)`; position t depends on inputs at positions ≤ t only.

    References:
        Bai, Kolter, Koltun, "An Empirical Evaluation of Generic Convolutional and
        Recurrent Networks for Sequence Modeling", 2018, section 3.
    """

    def __init__(
        self,
        filters,
        kernel_size,
        dilation_rate=1,
        dropout=0.0,
        kernel_initializer="he_normal",
        seed=None,
        **kwargs,
    ):
        super().__init__(filters, kernel_size, dilation_rate, **kwargs)
        check_rate("dropout", dropout)
        self.dropout = dropout
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.seed = seed

    def build(self, input_shape):
        self.check_input_shape(input_shape)

        def convolution(name):
            return CausalConv1D(
                self.filters, self.kernel_size, dilation_rate=self.dilation_rate,
                activation="relu", kernel_initializer=self.kernel_initializer,
                dtype=self.dtype_policy, name=name,
            )

        self._first = convolution("first_convolution")
        self._first.build(input_shape)
        self._second = convolution("second_convolution")
        self._second.build(tuple(input_shape[:-1]) + (self.filters,))
        self._dropout_layers = [
            keras.layers.Dropout(self.dropout, seed=self.seed, dtype=self.dtype_policy)
            for _ in range(2)
        ]
        self._residual = None
        if input_shape[-1] != self.filters:
            self._residual = keras.layers.Conv1D(
                self.filters, 1, kernel_initializer=self.kernel_initializer,
                dtype=self.dtype_policy, name="residual_projection",
            )
            self._residual.build(input_shape)
        self.built = True

    def call(self, inputs, mask=None, training=None):
        inputs = self.zero_padding(inputs, mask)
        hidden = self._dropout_layers[0](self._first(inputs), training=training)
        hidden = self._dropout_layers[1](self._second(hidden), training=training)
        residual = inputs if self._residual is None else self._residual(inputs)
        return ops.relu(residual + hidden)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "dropout": self.dropout,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "seed": self.seed,
            }
        )
        return config
