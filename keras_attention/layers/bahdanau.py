"""Additive (Bahdanau) attention (docs/math.md#additive-bahdanau-attention)."""

import keras
from keras import ops

from keras_attention import ops as attention_ops
from keras_attention.checks import check_positive_int


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
        key_shape = value_shape if key_shape is None else key_shape
        if len(query_shape) not in (2, 3):
            raise ValueError(
                "`query` must have shape (B, Dq) or (B, T, Dq); received "
                f"query.shape={tuple(query_shape)}."
            )
        for name, shape in (("value", value_shape), ("key", key_shape)):
            if len(shape) != 3:
                raise ValueError(
                    f"`{name}` must have shape (B, S, D); received {name}.shape={tuple(shape)}."
                )
        self.query_kernel = self.add_weight(
            name="query_kernel", shape=(query_shape[-1], self.units),
            initializer=self.kernel_initializer,
        )  # W_a
        self.key_kernel = self.add_weight(
            name="key_kernel", shape=(key_shape[-1], self.units),
            initializer=self.kernel_initializer,
        )  # U_a
        self.score_kernel = self.add_weight(
            name="score_kernel", shape=(self.units,), initializer=self.kernel_initializer
        )  # v_a
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
        if query.shape[-1] is not None and query.shape[-1] != self.query_kernel.shape[0]:
            raise ValueError(
                f"`query` has {query.shape[-1]} features but the layer was built for "
                f"{self.query_kernel.shape[0]}; received query.shape={tuple(query.shape)}."
            )
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
