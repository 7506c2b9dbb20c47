"""Additive (Bahdanau) attention (docs/math.md#additive-bahdanau-attention)."""

import keras
from keras import ops

from keras_attention import ops as attention_ops
from keras_attention.checks import check_step_attention_shapes
from keras_attention.layers.additive import AdditiveAttentionBase


@keras.saving.register_keras_serializable(package="keras_attention")
class BahdanauAttention(AdditiveAttentionBase):
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

    def build(self, query_shape, value_shape, key_shape=None):
        key_shape = check_step_attention_shapes(query_shape, value_shape, key_shape)
        self.add_energy_weights(query_shape[-1], key_shape[-1])  # W_a, U_a, v_a
        self.built = True

    def call(self, query, value, key=None, value_mask=None, return_attention_scores=False,
             projected_key=None):
        key = value if key is None else key
        single_step, projected_key = self.step_inputs(query, value, key, projected_key)
        if key.shape[1] is not None and value.shape[1] is not None and key.shape[1] != value.shape[1]:
            raise ValueError(
                "`key` and `value` must have the same length S; received "
                f"key.shape={tuple(key.shape)}, value.shape={tuple(value.shape)}."
            )
        (query,) = self.expand_step(single_step, query)  # (B, T, Dq)
        scores = attention_ops.additive_scores(
            ops.matmul(query, self.query_kernel), projected_key, self.score_kernel
        )  # (B, T, S)
        return self.attend(scores, value, value_mask, single_step, return_attention_scores)
