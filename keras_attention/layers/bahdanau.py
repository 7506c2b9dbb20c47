"""Additive (Bahdanau) attention (docs/math.md#additive-bahdanau-attention)."""

import keras
from keras import ops

from keras_attention import ops as attention_ops
from keras_attention.checks import (
    check_positive_int,
    check_query_features,
    check_step_attention_shapes,
)


def add_additive_weights(layer, query_dim, key_dim, prefix="", use_bias=False):
    """Add the weights of an additive energy `vᵀ tanh(W q + U k [+ b])` to `layer` (a layer
    with `units` and `kernel_initializer`), in this order, the order of a saved file's
    variables: `{prefix}query_kernel` W `(Dq, U)`, `{prefix}key_kernel` U `(Dk, U)`, with
    `use_bias` `{prefix}bias` b `(U,)` (zeros), and `{prefix}score_kernel` v `(U,)`.

    Returns:
        `(W, U, b, v)`, b None without `use_bias`.
    """

    def weight(name, shape, initializer=layer.kernel_initializer):
        return layer.add_weight(name=prefix + name, shape=shape, initializer=initializer)

    query_kernel = weight("query_kernel", (query_dim, layer.units))
    key_kernel = weight("key_kernel", (key_dim, layer.units))
    bias = weight("bias", (layer.units,), "zeros") if use_bias else None
    return query_kernel, key_kernel, bias, weight("score_kernel", (layer.units,))


@keras.saving.register_keras_serializable(package="keras_attention")
class BahdanauAttention(keras.layers.Layer):
    """Additive attention: `e_j = v_aᵀ tanh(W_a s + U_a h_j)`, `α = softmax(e)`, `c = Σ α_j h_j`.

    The alignment model of Bahdanau et al. (2015): the query is a decoder state
    `s_{t-1}`, the keys and values are the encoder annotations `h_j`. Queries
    and keys may have different sizes.

    Args:
        units: U, the alignment model's hidden size (1000 in RNNsearch).
        kernel_initializer: initializer of `W_a`, `U_a` and `v_a`.

    Call arguments:
        query: one decoder state `(B, Dq)` or a sequence of them `(B, T, Dq)`.
        value: annotations `(B, S, Dv)`.
        key: `(B, S, Dk)`; defaults to `value`.
        value_mask: `(B, S)`, True for real source positions; filled from the
            value's Keras mask.
        return_attention_scores: also return the alignment weights.
        projected_key: `U_a h` `(B, S, U)` from `project_key`, to reuse across the
            steps of a decoder (then `key` is not projected again).

    Returns:
        The context `(B, Dv)` (or `(B, T, Dv)`), and with
        `return_attention_scores=True` the weights `α` `(B, S)` (or `(B, T, S)`).

    References:
        Bahdanau, Cho, Bengio, "Neural Machine Translation by Jointly Learning
        to Align and Translate", ICLR 2015, appendix A.1.2.
    """

    def __init__(self, units, kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        check_positive_int("units", units)
        self.units = units
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def build(self, query_shape, value_shape, key_shape=None):
        key_shape = check_step_attention_shapes(query_shape, value_shape, key_shape)
        # W_a, U_a, v_a
        self.query_kernel, self.key_kernel, _, self.score_kernel = add_additive_weights(
            self, query_shape[-1], key_shape[-1])
        self.built = True

    def project_key(self, key):
        """`U_a h_j` for every source position: `(B, S, Dk)` -> `(B, S, U)`."""
        return ops.matmul(key, self.key_kernel)

    def call(
        self,
        query,
        value,
        key=None,
        value_mask=None,
        return_attention_scores=False,
        projected_key=None,
    ):
        key = value if key is None else key
        check_query_features(query, self.query_kernel)
        if key.shape[1] is not None and value.shape[1] is not None and key.shape[1] != value.shape[1]:
            raise ValueError(
                "`key` and `value` must have the same length S; received "
                f"key.shape={tuple(key.shape)}, value.shape={tuple(value.shape)}."
            )
        single_step = len(query.shape) == 2
        if single_step:
            query = ops.expand_dims(query, 1)  # (B, 1, Dq)
        if projected_key is None:
            projected_key = self.project_key(key)  # (B, S, U)
        scores = attention_ops.additive_scores(
            ops.matmul(query, self.query_kernel), projected_key, self.score_kernel
        )  # (B, T, S)
        context, weights = attention_ops.attend(
            scores, value, value_mask, single_step, self.compute_dtype
        )  # (B, [T,] Dv), (B, [T,] S)
        if return_attention_scores:
            return context, weights
        return context

    def compute_mask(self, inputs, previous_mask=None):
        # The context has no padding of its own: it is one vector per query.
        return None

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "units": self.units,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config
