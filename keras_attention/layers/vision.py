"""Vision Transformer input layers (docs/math.md#vision-transformer)."""

import keras
from keras import ops

from keras_attention import ops as attention_ops
from keras_attention.checks import check_positive_int


@keras.saving.register_keras_serializable(package="keras_attention")
class PatchEmbedding(keras.layers.Layer):
    """Cuts an image into P×P patches and projects each linearly: `z_i = x_i E`.

    The weights are those of a convolution with kernel = stride = P (a
    `Conv2D` sublayer named `projection`, kernel `(P, P, C, D)`), which is
    exactly the linear map of the flattened `(P·P·C)` patch. With a static
    image size the patches are cut with reshapes and projected with one
    matrix product (the same numbers; TensorFlow's convolution returns its
    input unchanged on an empty batch, e.g. on an idle replica under
    `tf.distribute`).

    Args:
        patch_size: P; the image height and width must be multiples of it.
        embedding_dim: D.

    Call arguments:
        inputs: images `(B, H, W, C)`, float.

    Returns:
        `(B, N, D)` with `N = (H/P)·(W/P)` patches in row-major order.
    """

    def __init__(
        self,
        patch_size,
        embedding_dim,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("patch_size", patch_size)
        check_positive_int("embedding_dim", embedding_dim)
        self.patch_size = patch_size
        self.embedding_dim = embedding_dim
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)

    def build(self, input_shape):
        if len(input_shape) != 4:
            raise ValueError(
                f"PatchEmbedding expects images of shape (B, H, W, C); received "
                f"inputs.shape={tuple(input_shape)}."
            )
        height, width = input_shape[1], input_shape[2]
        for name, size in (("height", height), ("width", width)):
            if size is not None and size % self.patch_size != 0:
                raise ValueError(
                    f"The image {name} must be a multiple of patch_size; received image "
                    f"{name}={size}, patch_size={self.patch_size}."
                )
        self.projection = keras.layers.Conv2D(
            self.embedding_dim,
            kernel_size=self.patch_size,
            strides=self.patch_size,
            padding="valid",
            kernel_initializer=self.kernel_initializer,
            bias_initializer=self.bias_initializer,
            dtype=self.dtype_policy,
            name="projection",
        )
        self.projection.build(input_shape)
        self.built = True

    def call(self, inputs):
        height, width, channels = inputs.shape[1], inputs.shape[2], inputs.shape[3]
        batch = ops.shape(inputs)[0]
        if height is None or width is None or channels is None:
            patches = self.projection(inputs)  # (B, H/P, W/P, D)
            return ops.reshape(patches, (batch, -1, self.embedding_dim))  # (B, N, D)
        p = self.patch_size
        rows, columns = height // p, width // p
        x = ops.reshape(inputs, (batch, rows, p, columns, p, channels))
        x = ops.transpose(x, (0, 1, 3, 2, 4, 5))  # (B, H/P, W/P, P, P, C)
        x = ops.reshape(x, (batch, rows * columns, p * p * channels))  # (B, N, P·P·C)
        # The conv kernel (P, P, C, D) flattened in the same (row, column, channel) order.
        kernel = ops.reshape(self.projection.kernel, (p * p * channels, self.embedding_dim))
        outputs = ops.matmul(x, ops.cast(kernel, x.dtype))
        return outputs + ops.cast(self.projection.bias, x.dtype)  # (B, N, D)

    def compute_output_shape(self, input_shape):
        _, height, width, _ = input_shape
        if height is None or width is None:
            return (input_shape[0], None, self.embedding_dim)
        n = (height // self.patch_size) * (width // self.patch_size)
        return (input_shape[0], n, self.embedding_dim)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "patch_size": self.patch_size,
                "embedding_dim": self.embedding_dim,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config


@keras.saving.register_keras_serializable(package="keras_attention")
class ClassToken(keras.layers.Layer):
    """Prepends a learnable class token `z_0` to a sequence of patch embeddings.

    Call arguments:
        inputs: `(B, N, D)`.

    Returns:
        `(B, N + 1, D)`, the class token at index 0.
    """

    def __init__(self, initializer="zeros", **kwargs):
        super().__init__(**kwargs)
        self.initializer = keras.initializers.get(initializer)

    def build(self, input_shape):
        if len(input_shape) != 3 or input_shape[-1] is None:
            raise ValueError(
                "ClassToken expects inputs of shape (B, N, D) with D known; received "
                f"inputs.shape={tuple(input_shape)}."
            )
        self.token = self.add_weight(
            name="token", shape=(1, 1, input_shape[-1]), initializer=self.initializer
        )
        self.built = True

    def call(self, inputs):
        batch = ops.shape(inputs)[0]
        token = ops.broadcast_to(ops.cast(self.token, inputs.dtype), (batch, 1, inputs.shape[-1]))
        return ops.concatenate([token, inputs], axis=1)

    def compute_output_shape(self, input_shape):
        n = None if input_shape[1] is None else input_shape[1] + 1
        return (input_shape[0], n, input_shape[2])

    def get_config(self):
        config = super().get_config()
        config.update({"initializer": keras.initializers.serialize(self.initializer)})
        return config


@keras.saving.register_keras_serializable(package="keras_attention")
class SequencePooling(keras.layers.Layer):
    """Attention pooling of a token sequence with a learned scoring vector.

    SeqPool of Hassani et al., 2021 ("Escaping the Big Data Paradigm with
    Compact Transformers"): each token gets a score `s_t = x_t w`, the
    scores are normalised over the sequence, `α = softmax(s)`, and the output
    is the weighted average `z = Σ_t α_t x_t`. It replaces the class token
    (the model learns which tokens matter) and costs one `(D, 1)` projection.
    The paper scores with a linear layer `x_t w + b`; its bias adds the same
    number to every score, which the softmax cancels (its gradient is exactly
    0), so it is left out.

    Args:
        kernel_initializer: initializer of `w` `(D, 1)`.

    Call arguments:
        inputs: `(B, T, D)`.
        mask: optional `(B, T)` bool padding mask (True = a real token; Keras
            fills it from the inputs' mask); masked tokens get weight 0.
        return_attention_scores: also return `α`, `(B, T)`.

    Returns:
        `(B, D)`, and `α` `(B, T)` when `return_attention_scores=True`.
    """

    def __init__(self, kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True

    def build(self, input_shape):
        if len(input_shape) != 3 or input_shape[-1] is None:
            raise ValueError(
                "SequencePooling expects inputs of shape (B, T, D) with D known; received "
                f"inputs.shape={tuple(input_shape)}."
            )
        self.kernel = self.add_weight(
            name="kernel", shape=(input_shape[-1], 1), initializer=self.kernel_initializer
        )
        self.built = True

    def call(self, inputs, mask=None, return_attention_scores=False):
        scores = ops.matmul(inputs, ops.cast(self.kernel, inputs.dtype))[..., 0]  # (B, T)
        weights = attention_ops.masked_softmax(ops.cast(scores, "float32"), mask)  # in float32
        weights = ops.cast(weights, inputs.dtype)
        outputs = ops.einsum("bt,btd->bd", weights, inputs)
        if return_attention_scores:
            return outputs, weights
        return outputs

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_shape(self, input_shape):
        return (input_shape[0], input_shape[-1])

    def compute_output_spec(self, inputs, mask=None, return_attention_scores=False):
        outputs = keras.KerasTensor((inputs.shape[0], inputs.shape[-1]), dtype=inputs.dtype)
        if return_attention_scores:
            return outputs, keras.KerasTensor(inputs.shape[:2], dtype=inputs.dtype)
        return outputs

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config
