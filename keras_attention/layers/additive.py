"""The base of the additive attentions (docs/math.md#additive-bahdanau-attention):
`BahdanauAttention`, `LocationAwareAttention`, `MonotonicAttention` and
`MultiResolutionAttention` score a decoder state against the encoder annotations with an
energy `vᵀ tanh(W s + U h [+ …] [+ b])`, and share here their hidden size, the energy's
weights, the key projection reused across a decoder's steps, the checks of one step's
inputs, the masked softmax and context, and `get_config`."""

import keras
from keras import ops

from keras_attention import ops as attention_ops
from keras_attention.checks import (
    check_positive_int,
    check_previous_alignment,
    check_query_features,
)


class AdditiveAttentionBase(keras.layers.Layer):
    """What the additive attentions share; not a layer to use on its own.

    A subclass adds its weights in `build` (`add_energy_weights` for `W`, `U`, `b`, `v`),
    names its constructor arguments in `config_names` (the order of its `get_config`) and
    calls, in `call`, `step_inputs` (the checks, the projected keys), `expand_step` and
    `attend` (the masked softmax over the source and the context). Those three and
    `project_key` read the single energy's `query_kernel` and `key_kernel`:
    `MultiResolutionAttention` shares only the constructor, `get_config` and the mask,
    its heads (`LocationAwareAttention`) the rest.

    Args:
        units: U, the hidden size of the energy.
        kernel_initializer: initializer of the energy's kernels.

    Call arguments (of the subclasses):
        query: one decoder state `(B, Dq)` or T of them `(B, T, Dq)`.
        value: the annotations `(B, S, Dv)`.
        key: `(B, S, Dk)`; defaults to `value`.
        value_mask: `(B, S)`, True for real source positions.
        projected_key: `project_key(key)` `(B, S, U)`, to reuse across the steps of a
            decoder.

    Returns:
        The context `(B, Dv)` (or `(B, T, Dv)`), with `return_attention_scores=True`
        also the weights `(B, S)` (or `(B, T, S)`).
    """

    # The constructor's arguments, in the order of `get_config`.
    config_names = ("units", "kernel_initializer")

    def __init__(self, units, kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        check_positive_int("units", units)
        self.units = units
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def add_energy_weights(self, query_dim, key_dim, prefix="", use_bias=False, extra=()):
        """Add the weights of an energy `vᵀ tanh(W q + U k [+ …] [+ b])`, each also the
        attribute of its name, in this order (the order of a saved file's variables):
        `{prefix}query_kernel` W `(Dq, U)`, `{prefix}key_kernel` U `(Dk, U)`, then the
        `(name, shape)` pairs of `extra`, then with `use_bias` `{prefix}bias` b `(U,)`
        (zeros), and `{prefix}score_kernel` v `(U,)`."""

        def weight(name, shape, initializer=self.kernel_initializer):
            variable = self.add_weight(name=prefix + name, shape=shape, initializer=initializer)
            setattr(self, prefix + name, variable)

        weight("query_kernel", (query_dim, self.units))
        weight("key_kernel", (key_dim, self.units))
        for name, shape in extra:
            weight(name, shape)
        if use_bias:
            weight("bias", (self.units,), "zeros")
        weight("score_kernel", (self.units,))

    def project_key(self, key):
        """`U h_j` for every source position: `(B, S, Dk)` -> `(B, S, U)`."""
        return ops.matmul(key, self.key_kernel)

    def step_inputs(self, query, value, key, projected_key, *previous_alignments):
        """Check a call's query (and each previous alignment) against the layer; return
        `(single_step, projected_key)`: whether the query is one state `(B, Dq)`, and
        `projected_key`, or `project_key(key)` (the value's when `key` is None)."""
        check_query_features(query, self.query_kernel)
        for previous_alignment in previous_alignments:
            check_previous_alignment(query, previous_alignment)
        if projected_key is None:
            projected_key = self.project_key(value if key is None else key)  # (B, S, U)
        return len(query.shape) == 2, projected_key

    @staticmethod
    def expand_step(single_step, *tensors):
        """A step's `(B, …)` tensors as sequences of one, `(B, 1, …)`, when `single_step`."""
        return tuple(ops.expand_dims(x, 1) if single_step else x for x in tensors)

    def attend(self, scores, value, value_mask, single_step, return_attention_scores):
        """The masked softmax of `scores` `(B, T, S)` over the real source positions and the
        context: `context` `(B, [T,] Dv)`, or `(context, weights)` with
        `return_attention_scores`."""
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
        for name in self.config_names:
            value = getattr(self, name)
            if name == "kernel_initializer":
                value = keras.initializers.serialize(value)
            config[name] = list(value) if isinstance(value, tuple) else value
        return config
