"""Multi-resolution attention: location-aware heads with a different filter width each."""

import keras
from keras import ops

from keras_attention.checks import check_positive_int
from keras_attention.layers.additive import AdditiveAttentionBase
from keras_attention.layers.location_aware import LocationAwareAttention


@keras.saving.register_keras_serializable(package="keras_attention")
class MultiResolutionAttention(AdditiveAttentionBase):
    """Multi-head location-aware attention, "a different filter size for each head".

    Head n is a `LocationAwareAttention` with its own `W_n, V_n, U_n, F_n, b_n, w_n`
    and location filters of width `kernel_sizes[n]`, convolved over that head's
    own previous alignment `α^n_{t-1}`: narrow heads track the last position
    closely, wide heads see the alignment's coarse shape. Each head gives a
    context `c^n_t = Σ_s α^n_{t,s} h_s`; the output is `W_o [c^1_t; …; c^N_t] + b_o`.
    (Per-head value projections followed by an output projection, as in
    `MultiHeadAttention`, would compose into this one linear map, so there is
    only `W_o`.)

    Args:
        units: U, each head's alignment hidden size.
        filters: F, location filters per head.
        kernel_sizes: one filter width per head, e.g. `(3, 7, 15, 31)`: N heads.
        output_dim: D of the output; defaults to the value size Dv.
        kernel_initializer: initializer of every kernel.

    Call arguments:
        query: `s_{t-1}`, `(B, Dq)`, or T of them `(B, T, Dq)`.
        value: annotations `(B, S, Dv)`.
        previous_alignment: the heads' `α_{t-1}`, `(B, N, S)` (or `(B, N, T, S)`).
        value_mask: `(B, S)` padding mask, True = may attend.
        return_attention_scores: also return the heads' alignments.

    Returns:
        The output `(B, D)` (or `(B, T, D)`), and with `return_attention_scores=True`
        the alignments `(B, N, S)` (or `(B, N, T, S)`).

    References:
        Chorowski et al., "Attention-Based Models for Speech Recognition", NeurIPS
        2015 (location-aware heads); multi-head multi-resolution location-aware
        attention as in Hayashi et al., "Multi-Head Decoder for End-to-End Speech
        Recognition", Interspeech 2018 (ESPnet's `AttMultiHeadMultiResLoc`).
    """

    config_names = ("units", "filters", "kernel_sizes", "output_dim", "kernel_initializer")

    def __init__(self, units, filters=10, kernel_sizes=(3, 7, 15, 31), output_dim=None,
                 kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(units, kernel_initializer, **kwargs)
        check_positive_int("filters", filters)
        check_positive_int("output_dim", output_dim, allow_none=True)
        kernel_sizes = tuple(kernel_sizes) if isinstance(kernel_sizes, (list, tuple)) else None
        if not kernel_sizes:
            raise ValueError(
                "`kernel_sizes` must be a non-empty list of filter widths, one per head; "
                f"received kernel_sizes={kernel_sizes!r}."
            )
        for size in kernel_sizes:
            check_positive_int("kernel_sizes[i]", size)
        self.filters = filters
        self.kernel_sizes = kernel_sizes
        self.output_dim = output_dim
        self.heads = [
            LocationAwareAttention(
                units, filters, size, kernel_initializer=kernel_initializer,
                dtype=self.dtype_policy, name=f"head_{n}",
            )
            for n, size in enumerate(kernel_sizes)
        ]

    @property
    def num_heads(self):
        return len(self.kernel_sizes)

    def build(self, query_shape, value_shape, previous_alignment_shape=None):
        step_alignment = None if previous_alignment_shape is None else (
            tuple(previous_alignment_shape[:1]) + tuple(previous_alignment_shape[2:])
        )
        for head in self.heads:
            head.build(query_shape, value_shape, step_alignment)
        output_dim = self.output_dim or value_shape[-1]
        self.output_kernel = self.add_weight(
            name="output_kernel", shape=(self.num_heads * value_shape[-1], output_dim),
            initializer=self.kernel_initializer,
        )  # W_o
        self.output_bias = self.add_weight(
            name="output_bias", shape=(output_dim,), initializer="zeros"
        )  # b_o
        self.built = True

    def initial_alignment(self, value, value_mask=None):
        """`α_0` of every head: uniform over the real source positions, `(B, N, S)`."""
        alignment = self.heads[0].initial_alignment(value, value_mask)  # (B, S)
        return ops.stack([alignment] * self.num_heads, axis=1)

    def call(self, query, value, previous_alignment, value_mask=None,
             return_attention_scores=False):
        if len(previous_alignment.shape) != len(query.shape) + 1 or (
            previous_alignment.shape[1] not in (None, self.num_heads)
        ):
            raise ValueError(
                f"`previous_alignment` must be (B, N={self.num_heads}, S) for a query (B, Dq) "
                "and (B, N, T, S) for queries (B, T, Dq); received "
                f"query.shape={tuple(query.shape)}, "
                f"previous_alignment.shape={tuple(previous_alignment.shape)}."
            )
        contexts, alignments = [], []
        for n, head in enumerate(self.heads):
            context, alignment = head(
                query, value, previous_alignment[:, n], value_mask=value_mask,
                return_attention_scores=True,
            )  # (B, [T,] Dv), (B, [T,] S)
            contexts.append(context)
            alignments.append(alignment)
        output = ops.matmul(ops.concatenate(contexts, axis=-1), self.output_kernel)
        output = output + self.output_bias  # (B, [T,] D)
        if return_attention_scores:
            return output, ops.stack(alignments, axis=1)  # (B, N, [T,] S)
        return output
