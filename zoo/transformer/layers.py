"""The two layers of the zoo's Transformer that `keras_attention` lacks: a padding mask
for any pad id, and Marian's fixed output bias."""

import keras

from keras_attention import xla


@keras.saving.register_keras_serializable(package="zoo")
class PaddingMask(keras.layers.Layer):
    """ids `(B, L)` -> bool `(B, L)`, True where `ids != pad_id` (for `pad_id != 0`)."""

    def __init__(self, pad_id, **kwargs):
        super().__init__(**kwargs)
        self.pad_id = pad_id

    def call(self, ids):
        return keras.ops.not_equal(ids, self.pad_id)

    def compute_output_spec(self, ids):
        return keras.KerasTensor(ids.shape, dtype="bool")

    def get_config(self):
        return {**super().get_config(), "pad_id": self.pad_id}


@keras.saving.register_keras_serializable(package="zoo")
class FinalLogitsBias(keras.layers.Layer):
    """Adds a fixed bias `(V,)` to logits `(B, T, V)` (Marian's `final_logits_bias`).

    The bias is a non-trainable weight: imported checkpoints set it; Marian
    keeps it as a buffer that training does not change.
    """

    def build(self, input_shape):
        self.bias = self.add_weight(
            name="bias", shape=(input_shape[-1],), initializer="zeros", trainable=False
        )
        self.built = True

    def call(self, logits):
        return xla.add_bias(logits, keras.ops.cast(self.bias, logits.dtype))

    def compute_output_shape(self, input_shape):
        return input_shape
