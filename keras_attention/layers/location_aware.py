"""Location-aware attention (Chorowski et al., 2015): additive scoring that also sees
the previous step's alignment through a convolution."""

import keras
from keras import ops

from keras_attention.checks import check_positive_int, check_step_attention_shapes
from keras_attention.layers.additive import AdditiveAttentionBase


@keras.saving.register_keras_serializable(package="keras_attention")
class LocationAwareAttention(AdditiveAttentionBase):
    """Additive attention with location features: `e_{t,s} = wᵀ tanh(W s_{t-1} + V h_s + U f_{t,s} + b)`.

    The location features `f_t = F * α_{t-1}` are `filters` convolutions of width
    `kernel_size` over the previous step's alignment `α_{t-1}` along the source
    axis ('same' zero padding, so position s sees `α_{t-1}` around s). Then
    `α_t = softmax(e_t)` over the real source positions and the context is
    `c_t = Σ_s α_{t,s} h_s`. The layer thus knows where it attended last and can
    learn to move forward from there (monotonic, local alignments), which plain
    content-based scoring (`BahdanauAttention`) cannot express. Like the
    Keras/TensorFlow convolutions, `*` is a cross-correlation (the kernel is not
    flipped); for an even `kernel_size` the extra tap sits on the right.

    The alignment of one step is the input of the next: a decoder calls the
    layer once per step with `previous_alignment` from the step before
    (`initial_alignment` for the first step). Given a whole sequence of
    previous alignments, `(B, T, S)`, it scores T queries at once (each against
    its own previous alignment, e.g. for teacher-forced inspection).

    Args:
        units: U, the alignment model's hidden size.
        filters: F, the number of location filters (10 in the paper).
        kernel_size: k, the width of each location filter over the source axis
            (201 in the paper, for speech frames; a few tokens suffice for text).
        kernel_initializer: initializer of `W`, `V`, `U`, `F` and `w`.

    Call arguments:
        query: the decoder state `s_{t-1}`, `(B, Dq)`, or T of them `(B, T, Dq)`.
        value: the annotations `h`, `(B, S, Dv)`.
        previous_alignment: `α_{t-1}`, `(B, S)` (or `(B, T, S)` for T queries).
        key: `(B, S, Dk)`; defaults to `value`.
        value_mask: `(B, S)` padding mask, True = may attend; filled from the
            value's Keras mask.
        return_attention_scores: also return the alignment `α_t`.
        projected_key: `V h` `(B, S, U)` from `project_key`, to reuse across the
            steps of a decoder.

    Returns:
        The context `(B, Dv)` (or `(B, T, Dv)`), and with
        `return_attention_scores=True` the alignment `α_t` `(B, S)` (or `(B, T, S)`).

    Example:
        >>> attention = LocationAwareAttention(16, filters=4, kernel_size=5)
        >>> h = keras.random.normal((2, 7, 8))
        >>> alignment = attention.initial_alignment(h)  # (2, 7), uniform
        >>> context, alignment = attention(
        ...     keras.random.normal((2, 6)), h, alignment, return_attention_scores=True)

    References:
        Chorowski, Bahdanau, Serdyuk, Cho, Bengio, "Attention-Based Models for
        Speech Recognition", NeurIPS 2015, section 2.2, eqs. 5-9.
    """

    config_names = ("units", "filters", "kernel_size", "kernel_initializer")

    def __init__(self, units, filters=10, kernel_size=31, kernel_initializer="glorot_uniform",
                 **kwargs):
        super().__init__(units, kernel_initializer, **kwargs)
        check_positive_int("filters", filters)
        check_positive_int("kernel_size", kernel_size)
        self.filters = filters
        self.kernel_size = kernel_size

    def build(self, query_shape, value_shape, previous_alignment_shape=None, key_shape=None):
        key_shape = check_step_attention_shapes(query_shape, value_shape, key_shape)
        # W, V, then F, U, then b, w
        self.add_energy_weights(query_shape[-1], key_shape[-1], use_bias=True, extra=(
            ("location_filters", (self.kernel_size, 1, self.filters)),
            ("location_kernel", (self.filters, self.units)),
        ))
        self.built = True

    def initial_alignment(self, value, value_mask=None):
        """`α_0`: uniform over the real source positions, `(B, S)` in the compute dtype.

        (The paper does not fix `α_0`; a uniform start, as in ESPnet's location-aware
        attention, favours no position.)
        """
        if value_mask is None:
            value_mask = ops.ones(ops.shape(value)[:2], "bool")
        real = ops.cast(value_mask, "float32")  # (B, S)
        count = ops.maximum(ops.sum(real, axis=-1, keepdims=True), 1.0)
        return ops.cast(real / count, self.compute_dtype)

    def location_features(self, previous_alignment):
        """`U (F * α_{t-1})`: `(B, S)` or `(B, T, S)` -> `(B, [T,] S, U)`."""
        shape = ops.shape(previous_alignment)
        flat = ops.reshape(previous_alignment, (-1, shape[-1], 1))  # (B·T, S, 1)
        flat = ops.cast(flat, self.compute_dtype)
        features = ops.conv(flat, self.location_filters, padding="same")  # (B·T, S, F)
        features = ops.matmul(features, self.location_kernel)  # (B·T, S, U)
        return ops.reshape(features, tuple(shape) + (self.units,))

    def call(self, query, value, previous_alignment, key=None, value_mask=None,
             return_attention_scores=False, projected_key=None):
        single_step, projected_key = self.step_inputs(
            query, value, key, projected_key, previous_alignment)  # V h (B, S, U)
        query, previous_alignment = self.expand_step(
            single_step, query, previous_alignment)  # (B, T, Dq), (B, T, S)
        features = (
            ops.expand_dims(ops.matmul(query, self.query_kernel), 2)  # (B, T, 1, U)
            + ops.expand_dims(projected_key, 1)  # (B, 1, S, U)
            + self.location_features(previous_alignment)  # (B, T, S, U)
            + self.bias
        )
        scores = ops.sum(ops.tanh(features) * self.score_kernel, axis=-1)  # (B, T, S)
        return self.attend(scores, value, value_mask, single_step, return_attention_scores)
