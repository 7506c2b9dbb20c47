"""Positional encodings (docs/math.md#positional-encodings) and the token embedding."""

import math

import keras
import numpy as np
from keras import ops

from keras_attention import quantization
from keras_attention.checks import check_positive_int, check_rate


def _check_length(layer_name, length, sequence_length, start_index=0):
    """Positions `start_index .. start_index + length - 1` must be below `sequence_length`
    (checked when both are Python ints; in a graph loop the caller keeps the bound)."""
    if not (isinstance(length, int) and isinstance(start_index, int)):
        return
    if start_index < 0 or start_index + length > sequence_length:
        raise ValueError(
            f"{layer_name} has sequence_length={sequence_length} positions; received a "
            f"sequence of length {length} starting at start_index={start_index}."
        )


LAYOUTS = ("interleaved", "halves")


def sinusoidal_table(positions, depth, max_wavelength, dtype, layout="interleaved"):
    """`P[i, c]` for the given (float) positions `(L,)`, computed in-graph: `(L, depth)`.

    `layout="interleaved"` (the paper): columns 2j, 2j+1 hold sin, cos of `i·ω_j`;
    `"halves"` (Marian, fairseq): the first ⌈D/2⌉ columns hold the sines, the
    rest the cosines, `[sin(i·ω_0) … | cos(i·ω_0) …]`; `ω_j = max_wavelength^(-2j/D)`.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"`layout` must be one of {LAYOUTS}; received layout={layout!r}.")
    columns = np.arange(depth)
    sines = (depth + 1) // 2
    if layout == "interleaved":
        pair, is_sine = columns // 2, columns % 2 == 0  # j for column c = 2j or 2j+1
    else:
        pair = np.where(columns < sines, columns, columns - sines)
        is_sine = columns < sines
    frequencies = np.power(float(max_wavelength), -2.0 * pair / depth).astype("float32")  # ω_j
    angles = ops.expand_dims(positions, -1) * frequencies  # (L, depth)
    table = ops.where(is_sine, ops.sin(angles), ops.cos(angles))
    return ops.cast(table, dtype)


@keras.saving.register_keras_serializable(package="keras_attention")
class SinusoidalPositionalEncoding(keras.layers.Layer):
    """Adds the fixed sinusoidal encodings of "Attention Is All You Need": `X + P`.

    `P[i, 2j] = sin(i / max_wavelength^(2j/D))`, `P[i, 2j+1] = cos(i / max_wavelength^(2j/D))`.
    Works for any sequence length and any (also odd) D; it has no weights.

    Args:
        max_wavelength: the base, 10000 in the paper.
        layout: `"interleaved"` (above) or `"halves"`: all sines, then all
            cosines, as Marian lays them out (`sinusoidal_table`).

    Call arguments:
        inputs: `(B, L, D)`.
        start_index: position of the first element (for incremental decoding).

    Returns:
        `(B, L, D)`; the input's Keras mask is kept.
    """

    def __init__(self, max_wavelength=10000, layout="interleaved", **kwargs):
        super().__init__(**kwargs)
        if not max_wavelength > 0:
            raise ValueError(f"`max_wavelength` must be positive; received {max_wavelength!r}.")
        if layout not in LAYOUTS:
            raise ValueError(f"`layout` must be one of {LAYOUTS}; received layout={layout!r}.")
        self.max_wavelength = max_wavelength
        self.layout = layout
        self.supports_masking = True

    def call(self, inputs, start_index=0):
        if len(inputs.shape) != 3:
            raise ValueError(
                "SinusoidalPositionalEncoding expects inputs of shape (B, L, D); received "
                f"inputs.shape={tuple(inputs.shape)}."
            )
        length = ops.shape(inputs)[1]
        positions = ops.cast(ops.arange(length) + start_index, "float32")
        table = sinusoidal_table(
            positions, inputs.shape[-1], self.max_wavelength, self.compute_dtype, self.layout
        )
        return inputs + table

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({"max_wavelength": self.max_wavelength, "layout": self.layout})
        return config


@keras.saving.register_keras_serializable(package="keras_attention")
class PositionEmbedding(keras.layers.Layer):
    """Adds learned position embeddings (a trainable `(sequence_length, D)` table): `X + E_pos`.

    ViT's 1-D position embeddings; an alternative to the sinusoidal ones.

    Args:
        sequence_length: the largest number of positions.
        initializer: initializer of the table (ViT: normal with stddev 0.02).

    Call arguments:
        inputs: `(B, L, D)` with `L <= sequence_length`.
        start_index: position of the first element.

    Returns:
        `(B, L, D)`; the input's Keras mask is kept.
    """

    def __init__(self, sequence_length, initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        check_positive_int("sequence_length", sequence_length)
        self.sequence_length = sequence_length
        self.initializer = keras.initializers.get(initializer)
        self.supports_masking = True

    def build(self, input_shape):
        if len(input_shape) != 3 or input_shape[-1] is None:
            raise ValueError(
                "PositionEmbedding expects inputs of shape (B, L, D) with D known; received "
                f"inputs.shape={tuple(input_shape)}."
            )
        self.position_embeddings = self.add_weight(
            name="position_embeddings",
            shape=(self.sequence_length, input_shape[-1]),
            initializer=self.initializer,
        )
        self.built = True

    def call(self, inputs, start_index=0):
        _check_length("PositionEmbedding", inputs.shape[1], self.sequence_length, start_index)
        length = ops.shape(inputs)[1]
        table = ops.slice(
            ops.convert_to_tensor(self.position_embeddings), (start_index, 0),
            (length, self.position_embeddings.shape[-1]),
        )
        return inputs + ops.cast(table, inputs.dtype)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "sequence_length": self.sequence_length,
                "initializer": keras.initializers.serialize(self.initializer),
            }
        )
        return config


@keras.saving.register_keras_serializable(package="keras_attention")
class TokenAndPositionEmbedding(keras.layers.Layer):
    """Token embedding scaled by √D plus positions, then dropout (the Transformer's input).

    `Dropout(E[x] · √D + P)`, with P sinusoidal (the paper) or learned. The
    token matrix `embeddings` `(V, D)` can be reused as the pre-softmax linear
    (weight tying): call the layer with `reverse=True` on decoder outputs
    `(B, T, D)` to get logits `(B, T, V) = X Eᵀ`.

    Args:
        vocabulary_size: V.
        sequence_length: the largest number of positions (learned table size;
            also the limit checked for sinusoidal encodings).
        embedding_dim: D.
        positional: `"sinusoidal"` or `"learned"`.
        mask_zero: id 0 is padding: a Keras mask `(B, L)` is attached to the output.
        scale_embeddings: multiply token embeddings by √D (the paper).
        layout: sinusoidal layout, `"interleaved"` or `"halves"` (see `sinusoidal_table`).
        dropout: dropout rate on the sum.
        embeddings_initializer: initializer of the token matrix (default
            normal with stddev D^-0.5, so that the scaled embeddings have unit scale).

    Call arguments:
        inputs: int ids `(B, L)`, or with `reverse=True` features `(B, L, D)`.
        start_index: position of the first id (incremental decoding).
        reverse: compute logits `inputs @ Eᵀ` instead.
        training: whether dropout is active.

    Returns:
        `(B, L, D)`, or logits `(B, L, V)` with `reverse=True`.
    """

    def __init__(
        self,
        vocabulary_size,
        sequence_length,
        embedding_dim,
        positional="sinusoidal",
        mask_zero=False,
        scale_embeddings=True,
        dropout=0.0,
        embeddings_initializer=None,
        max_wavelength=10000,
        layout="interleaved",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("vocabulary_size", vocabulary_size)
        check_positive_int("sequence_length", sequence_length)
        check_positive_int("embedding_dim", embedding_dim)
        check_rate("dropout", dropout)
        if positional not in ("sinusoidal", "learned"):
            raise ValueError(
                f"`positional` must be 'sinusoidal' or 'learned'; received {positional!r}."
            )
        self.vocabulary_size = vocabulary_size
        self.sequence_length = sequence_length
        self.embedding_dim = embedding_dim
        self.positional = positional
        self.mask_zero = mask_zero
        self.scale_embeddings = scale_embeddings
        self.dropout = dropout
        self.max_wavelength = max_wavelength
        self.layout = layout
        if embeddings_initializer is None:
            embeddings_initializer = keras.initializers.RandomNormal(stddev=embedding_dim**-0.5)
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)
        self.token_embedding = keras.layers.Embedding(
            vocabulary_size,
            embedding_dim,
            embeddings_initializer=self.embeddings_initializer,
            dtype=self.dtype_policy,
            name="token_embedding",
        )
        if positional == "learned":
            self.position_embedding = PositionEmbedding(
                sequence_length, dtype=self.dtype_policy, name="position_embedding"
            )
        else:
            self.position_embedding = SinusoidalPositionalEncoding(
                max_wavelength, layout, dtype=self.dtype_policy, name="position_embedding"
            )
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy)
        self.supports_masking = mask_zero

    def build(self, inputs_shape=None):
        self.token_embedding.build((None, None))
        self.position_embedding.build((None, None, self.embedding_dim))
        self.built = True

    @property
    def embeddings(self):
        """The token matrix `(V, D)`, shared with the output projection when tied."""
        return self.token_embedding.embeddings

    def call(self, inputs, start_index=0, reverse=False, training=None):
        if reverse:
            if inputs.shape[-1] is not None and inputs.shape[-1] != self.embedding_dim:
                raise ValueError(
                    f"reverse=True expects features of size {self.embedding_dim}; "
                    f"received inputs.shape={tuple(inputs.shape)}."
                )
            if self.token_embedding.quantization_mode == "int8":
                return self.int8_logits(inputs)
            kernel = ops.cast(ops.transpose(self.token_embedding.embeddings), self.compute_dtype)
            return ops.matmul(inputs, kernel)  # (B, L, V)
        if len(inputs.shape) != 2:
            raise ValueError(
                f"TokenAndPositionEmbedding expects ids of shape (B, L); received "
                f"inputs.shape={tuple(inputs.shape)}."
            )
        _check_length(
            "TokenAndPositionEmbedding", inputs.shape[1], self.sequence_length, start_index
        )
        x = self.token_embedding(inputs)  # (B, L, D)
        if self.scale_embeddings:
            x = x * ops.cast(math.sqrt(self.embedding_dim), x.dtype)
        x = self.position_embedding(x, start_index=start_index)
        return self.dropout_layer(x, training=training)

    def int8_logits(self, inputs, table_major=False):
        """`X Eᵀ` from the int8 table of `keras.Model.quantize("int8")` (one scale per token)."""
        rows = ops.reshape(inputs, (-1, self.embedding_dim))
        logits = quantization.int8_tied_logits(
            rows, self.token_embedding.embeddings, self.token_embedding.embeddings_scale,
            self.compute_dtype, table_major=table_major,
        )
        shape = tuple(ops.shape(inputs)[:-1]) + (self.vocabulary_size,)
        return ops.reshape(logits, shape)  # (B, L, V)

    def compute_mask(self, inputs, mask=None, start_index=0, reverse=False, training=None):
        if reverse or not self.mask_zero:
            return None
        return ops.not_equal(inputs, 0)

    def compute_output_spec(self, inputs, start_index=0, reverse=False, training=None):
        if reverse:
            shape = tuple(inputs.shape[:-1]) + (self.vocabulary_size,)
        else:
            shape = tuple(inputs.shape) + (self.embedding_dim,)
        return keras.KerasTensor(shape, dtype=self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "sequence_length": self.sequence_length,
                "embedding_dim": self.embedding_dim,
                "positional": self.positional,
                "mask_zero": self.mask_zero,
                "scale_embeddings": self.scale_embeddings,
                "dropout": self.dropout,
                "embeddings_initializer": keras.initializers.serialize(
                    self.embeddings_initializer
                ),
                "max_wavelength": self.max_wavelength,
                "layout": self.layout,
            }
        )
        return config
