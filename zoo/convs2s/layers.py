"""The layers of ConvS2S (Gehring et al., 2017): GLU convolutions and multi-step attention.

Legend: B batch, T target length, S source length, D the convolutions' width
(`hidden_dim`), F the embedding width (`embedding_dim`).

- `GatedConvolution`: `GLU(conv(Dropout(x)))`, centred (encoder) or causal
  (decoder, `ka.CausalConv1D`).
- `ConvS2SEncoderBlock`: `(GatedConvolution(x) + x)·√½`.
- `MultiStepAttention`: one decoder layer's dot-product attention over the
  encoder output `z` with the values `z + e`.
- `ConvS2SDecoderBlock`: causal `GatedConvolution`, attention, residual.
- `SourceKeysAndValues`: the encoder's keys `z` and values `(z + e)·√½`.

The `√½` factors keep the variance of a sum of two terms equal to that of one
(section 3.4 of the paper); the initial weights are the paper's (its
`4·(1 - p) / (k·n)` convolution variance), without its weight normalisation.
"""

import math

import keras
from keras import ops

import keras_attention as ka
from keras_attention.checks import check_positive_int, check_rate

SQRT_HALF = math.sqrt(0.5)


def _check_rank3(name, shape):
    if len(shape) != 3 or shape[-1] is None:
        raise ValueError(
            f"`{name}` must have shape (B, L, C) with known C; received {name}.shape={tuple(shape)}."
        )


def _zero_padding(x, mask):
    return x if mask is None else x * ops.cast(mask, x.dtype)[:, :, None]


def _attention_output_spec(inputs, keys, dtype, return_attention_scores):
    """The output spec of a layer that attends over `keys` `(B, S, ·)`: outputs shaped like
    `inputs` `(B, T, D)`, and with `return_attention_scores` the weights `(B, T, S)`."""
    outputs = keras.KerasTensor(inputs.shape, dtype=dtype)
    if not return_attention_scores:
        return outputs
    shape = (inputs.shape[0], inputs.shape[1], keys.shape[1])
    return outputs, keras.KerasTensor(shape, dtype=dtype)


@keras.saving.register_keras_serializable(package="zoo")
class GatedConvolution(keras.layers.Layer):
    """`v([A B]) = A ⊗ σ(B)` with `[A B] = conv(Dropout(x))`: a GLU convolution (section 3.2).

    The convolution has `2·hidden_dim` filters of width k; the gate halves them.
    Centred (`causal=False`, the encoder: `padding="same"`, `(k-1)//2` zeros on the
    left, `k//2` on the right) or causal (`causal=True`, the decoder:
    `ka.CausalConv1D`, output t sees inputs ≤ t). Kernel init: normal with variance
    `4·(1 - dropout) / (k·C)` (section 3.5), biases zero.

    Args:
        hidden_dim: D, the output width.
        kernel_size: k.
        causal: decoder (True) or encoder (False) padding.
        dropout: dropout rate on the input.
        seed: seed of the dropout.

    Call arguments:
        inputs: `(B, L, C)`.
        padding_mask: optional bool `(B, L)`; False positions are zeroed first.
        training: whether dropout is active.

    Returns:
        `(B, L, D)`.
    """

    def __init__(self, hidden_dim, kernel_size, causal=False, dropout=0.0, seed=None, **kwargs):
        super().__init__(**kwargs)
        check_positive_int("hidden_dim", hidden_dim)
        check_positive_int("kernel_size", kernel_size)
        check_rate("dropout", dropout)
        self.hidden_dim = hidden_dim
        self.kernel_size = kernel_size
        self.causal = bool(causal)
        self.dropout = dropout
        self.seed = seed

    def build(self, inputs_shape, padding_mask_shape=None):
        _check_rank3("inputs", inputs_shape)
        stddev = math.sqrt(4 * (1 - self.dropout) / (self.kernel_size * inputs_shape[-1]))
        common = dict(
            kernel_initializer=keras.initializers.RandomNormal(stddev=stddev, seed=self.seed),
            dtype=self.dtype_policy, name="convolution",
        )
        if self.causal:
            self._convolution = ka.CausalConv1D(2 * self.hidden_dim, self.kernel_size, **common)
        else:
            self._convolution = keras.layers.Conv1D(
                2 * self.hidden_dim, self.kernel_size, padding="same", **common
            )
        self._convolution.build((None, None, inputs_shape[-1]))
        self._dropout = keras.layers.Dropout(self.dropout, seed=self.seed, dtype=self.dtype_policy)
        self.built = True

    def call(self, inputs, padding_mask=None, training=None):
        x = self._dropout(_zero_padding(inputs, padding_mask), training=training)
        x = self._convolution(x)  # (B, L, 2D)
        gated, gate = ops.split(x, 2, axis=-1)
        return gated * ops.sigmoid(gate)  # (B, L, D)

    def last_position(self, window):
        """Causal only: the output at the last position of `window` `(B, k, C)` -> `(B, 1, D)`.

        For incremental decoding: `window` holds the k inputs that position sees.
        """
        if not self.causal:
            raise ValueError("last_position is for causal GatedConvolution layers only.")
        return self(window, training=False)[:, -1:, :]

    def compute_output_shape(self, inputs_shape, padding_mask_shape=None):
        return tuple(inputs_shape[:-1]) + (self.hidden_dim,)

    def get_config(self):
        config = super().get_config()
        config.update({"hidden_dim": self.hidden_dim, "kernel_size": self.kernel_size,
                       "causal": self.causal, "dropout": self.dropout, "seed": self.seed})
        return config


@keras.saving.register_keras_serializable(package="zoo")
class ConvS2SEncoderBlock(keras.layers.Layer):
    """`h^l = (GLU(conv(h^{l-1})) + h^{l-1})·√½`: one encoder layer (section 3.2).

    Args:
        hidden_dim: D (inputs and outputs).
        kernel_size: k (centred convolution).
        dropout: dropout rate on the convolution's input.
        seed: seed of the dropout.

    Call arguments:
        inputs: `(B, S, D)`.
        padding_mask: optional bool `(B, S)`: padding is zeroed before the convolution.
        training: whether dropout is active.

    Returns:
        `(B, S, D)`.
    """

    def __init__(self, hidden_dim, kernel_size, dropout=0.0, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.hidden_dim = hidden_dim
        self.kernel_size = kernel_size
        self.dropout = dropout
        self.seed = seed
        self._convolution = GatedConvolution(
            hidden_dim, kernel_size, causal=False, dropout=dropout, seed=seed,
            dtype=self.dtype_policy, name="gated_convolution",
        )

    def build(self, inputs_shape, padding_mask_shape=None):
        _check_rank3("inputs", inputs_shape)
        if inputs_shape[-1] != self.hidden_dim:
            raise ValueError(
                f"ConvS2SEncoderBlock: the residual needs inputs of width hidden_dim="
                f"{self.hidden_dim}; received inputs.shape={tuple(inputs_shape)}."
            )
        self._convolution.build(inputs_shape)
        self.built = True

    def call(self, inputs, padding_mask=None, training=None):
        x = self._convolution(inputs, padding_mask=padding_mask, training=training)
        return (x + inputs) * ops.cast(SQRT_HALF, inputs.dtype)

    def compute_output_shape(self, inputs_shape, padding_mask_shape=None):
        return tuple(inputs_shape)

    def get_config(self):
        config = super().get_config()
        config.update({"hidden_dim": self.hidden_dim, "kernel_size": self.kernel_size,
                       "dropout": self.dropout, "seed": self.seed})
        return config


@keras.saving.register_keras_serializable(package="zoo")
class MultiStepAttention(keras.layers.Layer):
    """One decoder layer's attention in ConvS2S's multi-step attention (section 3.3).

    `d_i = (W_d h_i + b_d + g_i)·√½`, `a_ij = softmax_j(d_i · z_j)` (dot product,
    unscaled), `c_i = √m · Σ_j a_ij v_j` with `m` the real source length and
    `v_j = (z_j + e_j)·√½`, output `(W_c c_i + b_c + h_i)·√½`. `h` is the
    layer's GLU output, `g` the target embedding (previous token + position),
    `z` the encoder output, `e` the source embedding.

    Args:
        embedding_dim: F, the width of `g`, `z` and `v` (`d_i` is projected to it).

    Call arguments:
        hidden: `h` `(B, T, D)`.
        target_embedding: `g` `(B, T, F)`.
        keys: `z` `(B, S, F)`.
        values: `v` `(B, S, F)`.
        padding_mask: optional bool `(B, S)`, True for real source tokens.
        return_attention_scores: also return `a` `(B, T, S)`.

    Returns:
        `(B, T, D)`, and `a` `(B, T, S)` with `return_attention_scores`.
    """

    def __init__(self, embedding_dim, **kwargs):
        super().__init__(**kwargs)
        check_positive_int("embedding_dim", embedding_dim)
        self.embedding_dim = embedding_dim

    def build(self, hidden_shape, target_embedding_shape=None, keys_shape=None,
              values_shape=None, padding_mask_shape=None):
        _check_rank3("hidden", hidden_shape)
        hidden_dim = hidden_shape[-1]

        def linear(units, fan_in, name):  # section 3.5: variance 1 / fan_in
            return keras.layers.Dense(
                units, kernel_initializer=keras.initializers.RandomNormal(stddev=fan_in**-0.5),
                dtype=self.dtype_policy, name=name,
            )

        self._in_projection = linear(self.embedding_dim, hidden_dim, "in_projection")
        self._in_projection.build((None, None, hidden_dim))
        self._out_projection = linear(hidden_dim, self.embedding_dim, "out_projection")
        self._out_projection.build((None, None, self.embedding_dim))
        self.built = True

    def call(self, hidden, target_embedding, keys, values, padding_mask=None,
             return_attention_scores=False):
        half = ops.cast(SQRT_HALF, hidden.dtype)
        query = (self._in_projection(hidden) + target_embedding) * half  # d_i (B, T, F)
        scores = ops.einsum("btf,bsf->bts", query, keys)  # (B, T, S)
        mask = None if padding_mask is None else padding_mask[:, None, :]
        weights = ka.masked_softmax(ops.cast(scores, "float32"), mask)
        weights = ops.cast(weights, hidden.dtype)
        context = ops.einsum("bts,bsf->btf", weights, values)  # (B, T, F)
        if padding_mask is None:
            length = ops.cast(ops.shape(keys)[1], hidden.dtype)
        else:
            length = ops.sum(ops.cast(padding_mask, hidden.dtype), axis=1)[:, None, None]
        context = context * ops.sqrt(length)  # m · √(1/m)
        outputs = (self._out_projection(context) + hidden) * half  # (B, T, D)
        return (outputs, weights) if return_attention_scores else outputs

    def compute_output_spec(self, hidden, target_embedding, keys, values, padding_mask=None,
                            return_attention_scores=False):
        return _attention_output_spec(hidden, keys, self.compute_dtype, return_attention_scores)

    def get_config(self):
        return {**super().get_config(), "embedding_dim": self.embedding_dim}


@keras.saving.register_keras_serializable(package="zoo")
class ConvS2SDecoderBlock(keras.layers.Layer):
    """One decoder layer: `h^l = (MultiStepAttention(GLU(causalconv(h^{l-1}))) + h^{l-1})·√½`.

    The convolution is causal (`ka.CausalConv1D` inside `GatedConvolution`), so
    output t depends on the layer's inputs at positions ≤ t only; the attention
    is per position. Sections 3.2 and 3.3.

    Args:
        hidden_dim: D (inputs and outputs).
        embedding_dim: F (target embedding, encoder keys and values).
        kernel_size: k.
        dropout: dropout rate on the convolution's input.
        seed: seed of the dropout.

    Call arguments:
        inputs: `(B, T, D)`.
        target_embedding: `g` `(B, T, F)`.
        encoder_keys: `z` `(B, S, F)`.
        encoder_values: `(z + e)·√½` `(B, S, F)`.
        encoder_padding_mask: optional bool `(B, S)`.
        training: whether dropout is active.
        return_attention_scores: also return the attention `(B, T, S)`.

    Returns:
        `(B, T, D)`, and the attention `(B, T, S)` with `return_attention_scores`.
    """

    def __init__(self, hidden_dim, embedding_dim, kernel_size, dropout=0.0, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.hidden_dim = hidden_dim
        self.embedding_dim = embedding_dim
        self.kernel_size = kernel_size
        self.dropout = dropout
        self.seed = seed
        self._convolution = GatedConvolution(
            hidden_dim, kernel_size, causal=True, dropout=dropout, seed=seed,
            dtype=self.dtype_policy, name="gated_convolution",
        )
        self._attention = MultiStepAttention(
            embedding_dim, dtype=self.dtype_policy, name="attention"
        )

    def build(self, inputs_shape, target_embedding_shape=None, encoder_keys_shape=None,
              encoder_values_shape=None, encoder_padding_mask_shape=None):
        _check_rank3("inputs", inputs_shape)
        if inputs_shape[-1] != self.hidden_dim:
            raise ValueError(
                f"ConvS2SDecoderBlock: the residual needs inputs of width hidden_dim="
                f"{self.hidden_dim}; received inputs.shape={tuple(inputs_shape)}."
            )
        self._convolution.build(inputs_shape)
        self._attention.build(inputs_shape)
        self.built = True

    def call(self, inputs, target_embedding, encoder_keys, encoder_values,
             encoder_padding_mask=None, training=None, return_attention_scores=False):
        x = self._convolution(inputs, training=training)  # (B, T, D)
        x, weights = self._attention(
            x, target_embedding, encoder_keys, encoder_values, padding_mask=encoder_padding_mask,
            return_attention_scores=True,
        )
        outputs = (x + inputs) * ops.cast(SQRT_HALF, inputs.dtype)
        return (outputs, weights) if return_attention_scores else outputs

    def call_with_cache(self, inputs, window, target_embedding, encoder_keys, encoder_values,
                        encoder_padding_mask=None):
        """One decoding step: inputs `(B, 1, D)` at position t and `window`, the block's
        inputs at positions t-k+1 … t-1 `(B, k-1, D)` (zeros before position 0) ->
        outputs `(B, 1, D)` and the window for position t + 1."""
        window = ops.concatenate([window, inputs], axis=1)  # (B, k, D)
        x = self._convolution.last_position(window)  # (B, 1, D)
        x = self._attention(
            x, target_embedding, encoder_keys, encoder_values, padding_mask=encoder_padding_mask
        )
        return (x + inputs) * ops.cast(SQRT_HALF, inputs.dtype), window[:, 1:, :]

    def compute_output_spec(self, inputs, target_embedding, encoder_keys, encoder_values,
                            encoder_padding_mask=None, training=None,
                            return_attention_scores=False):
        return _attention_output_spec(inputs, encoder_keys, self.compute_dtype,
                                      return_attention_scores)

    def get_config(self):
        config = super().get_config()
        config.update({"hidden_dim": self.hidden_dim, "embedding_dim": self.embedding_dim,
                       "kernel_size": self.kernel_size, "dropout": self.dropout,
                       "seed": self.seed})
        return config


@keras.saving.register_keras_serializable(package="zoo")
class SourceKeysAndValues(keras.layers.Layer):
    """The encoder's output for attention: keys `z` and values `(z + e)·√½` (section 3.3).

    Padding positions of `z` are zeroed. The gradient reaching the encoder
    through `z` is scaled by `1 / (2·num_attention_layers)` (section 3.4: every
    decoder layer attends, so the encoder would otherwise receive the sum of
    `num_attention_layers` gradients); the forward values are unchanged and the
    source embedding `e` is not scaled.

    Args:
        num_attention_layers: the number of decoder layers that attend.

    Call arguments:
        encoder_output: `z` `(B, S, F)`.
        source_embedding: `e` `(B, S, F)`.
        padding_mask: optional bool `(B, S)`.

    Returns:
        `(keys, values)`, each `(B, S, F)`.
    """

    def __init__(self, num_attention_layers, **kwargs):
        super().__init__(**kwargs)
        check_positive_int("num_attention_layers", num_attention_layers)
        self.num_attention_layers = num_attention_layers

    def call(self, encoder_output, source_embedding, padding_mask=None):
        z = _zero_padding(encoder_output, padding_mask)
        scale = ops.cast(1.0 / (2.0 * self.num_attention_layers), z.dtype)
        frozen = ops.stop_gradient(z)
        z = frozen + scale * (z - frozen)  # forward z, backward scale·∂z
        return z, (z + source_embedding) * ops.cast(SQRT_HALF, z.dtype)

    def compute_output_spec(self, encoder_output, source_embedding, padding_mask=None):
        spec = keras.KerasTensor(encoder_output.shape, dtype=self.compute_dtype)
        return spec, keras.KerasTensor(encoder_output.shape, dtype=self.compute_dtype)

    def get_config(self):
        return {**super().get_config(), "num_attention_layers": self.num_attention_layers}
