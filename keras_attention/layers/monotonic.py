"""Monotonic attention (Raffel et al., 2017) and monotonic chunkwise attention, MoChA (Chiu &
Raffel, 2018) (docs/math.md#monotonic-attention): the layer `MonotonicAttention`.

Its energies are the additive ones of `BahdanauAttention` (`ops.additive_scores`, weights
from `AdditiveAttentionBase.add_energy_weights`), weight-normalised. The functions of its alignments,
`safe_cumprod`, `monotonic_alignment` and `chunkwise_weights`, live in
`keras_attention.monotonic_alignment` and are re-exported here.
"""

import keras
import numpy as np
from keras import ops

from keras_attention import ops as attention_ops
from keras_attention.checks import (
    check_choice,
    check_number,
    check_positive_int,
    check_step_attention_shapes,
)
from keras_attention.layers.additive import AdditiveAttentionBase
from keras_attention.monotonic_alignment import (
    CLIP_DIVISOR,
    chunkwise_weights,
    monotonic_alignment,
    safe_cumprod,
)
from keras_attention.monotonic_alignment import MODES as ALIGNMENT_MODES

__all__ = ["CLIP_DIVISOR", "MODES", "MonotonicAttention", "chunkwise_weights",
           "monotonic_alignment", "safe_cumprod"]

MODES = ALIGNMENT_MODES + ("online",)  # of the layer: and one online step


def _flat(tensor):
    """`(B, S, ...)` -> `(B·S, ...)` (the trailing sizes must be known)."""
    return ops.reshape(tensor, (-1,) + tuple(tensor.shape[2:]))


def _gather(tensor, positions):
    """`tensor[b, positions[b, k]]`: `(B, S, ...)` at int positions `(B, K)` (in [0, S)) ->
    `(B, K, ...)`, one gather of K rows per example (keras's `take_along_axis` would move
    the whole tensor for it)."""
    first_rows = ops.arange(ops.shape(tensor)[0], dtype="int32") * ops.shape(tensor)[1]
    return ops.take(_flat(tensor), first_rows[:, None] + positions, axis=0)


@keras.saving.register_keras_serializable(package="keras_attention")
class MonotonicAttention(AdditiveAttentionBase):
    """Monotonic attention: a head that only moves forward over the source.

    At step i the head starts at the position where it stopped at step i-1 and
    inspects the positions from there on; at position j it stops with probability
    `p_{i,j} = σ(e_{i,j})` (Raffel et al., 2017), where the energy is additive,
    weight-normalised, with a learned scalar bias r:

        e_{i,j} = g vᵀ/‖v‖ tanh(W s_{i-1} + U h_j + b) + r

    (g starts at `1/√units`, r at `score_bias_init`: a negative r makes the head
    stop rarely at first, so it does not stick at the first position.) If it
    stops at j, the context is `c_i = h_j`; if it runs past the end, `c_i = 0`.

    - Training (`training=True`): the expected alignment `α_i`
      (`monotonic_alignment(mode="prefix")`, exact; the paper's closed form,
      `mode="parallel"`, fails once products of `1 − p` underflow), with Gaussian noise
      of standard deviation `sigmoid_noise` added to the energies before the sigmoid,
      which pushes the model towards energies far from 0, so that `p` is near 0 or 1
      and the hard decision at test time matches what was trained.
    - Inference: hard. `p_{i,j} = 1` where `e_{i,j} > 0`; the head never moves back.
      One query at a time (a decoder) is computed online (`mode="online"`): the
      energies are computed from the previous position on, only until the head stops,
      so a whole decode computes O(S + T) energies instead of O(S·T). A sequence of
      queries uses `mode="hard"`, the same result with every energy computed.

    With `chunk_size=w` it is MoChA (Chiu & Raffel, 2018): a second additive energy
    `u_{i,j} = v_cᵀ tanh(W_c s_{i-1} + U_c h_j + b_c)` and the context is a softmax
    of `u` over the w positions that end where the head stopped; in training, the
    expected weights `β_i` (`chunkwise_weights`).

    Args:
        units: U, the hidden size of the energies.
        chunk_size: None (monotonic attention) or w >= 1, the MoChA chunk width.
        sigmoid_noise: standard deviation of the pre-sigmoid noise in training (1.0,
            as in the paper; 0 for none). Never added at inference.
        score_bias_init: the initial value of r (TensorFlow Addons: 0, and "a negative
            value when the memory is long").
        kernel_initializer: initializer of `W`, `U`, `v` (and `W_c`, `U_c`, `v_c`).
        seed: seed of the noise.

    Call arguments:
        query: the decoder state `s_{i-1}`, `(B, Dq)`, or T of them `(B, T, Dq)`.
        value: the annotations `h`, `(B, S, Dv)`.
        previous_alignment: `α_{i-1}`, `(B, S)` (or `(B, T, S)`); `initial_alignment`
            gives the first, `[1, 0, …, 0]`. Online and hard modes expect it one-hot or
            zero (as they return it).
        key: `(B, S, Dk)`; defaults to `value`.
        value_mask: `(B, S)`, True for real positions (the head never stops on padding);
            filled from the value's Keras mask.
        return_attention_scores: also return the weights of the context: `α_i`, or
            MoChA's `β_i`, `(B, [T,] S)`.
        return_alignment: also return `α_i`, the next step's `previous_alignment`.
        projected_key: `project_key(key)`, to reuse across the steps of a decoder.
        training: training (expected alignment, with noise) or inference (hard).
        mode: override the computation: `"prefix"`, `"parallel"`, `"recursive"`
            (expected, see `monotonic_alignment`), `"hard"` or `"online"` (one query only).
        noise: standard normal noise shaped like the energies, `(B, S)` or `(B, T, S)`,
            scaled by `sigmoid_noise` in training; drawn from the layer's seed generator
            when None. A recurrence under `ops.scan` draws it for all its steps before the
            loop (`draw_noise`): a seed generator drawn inside the loop's body changes its
            state there, which JAX's traced training step refuses.

    Returns:
        The context `(B, Dv)` (or `(B, T, Dv)`), then the weights and `α_i` as asked.

    Example:
        >>> attention = MonotonicAttention(16, chunk_size=3)
        >>> h = keras.random.normal((2, 7, 8))
        >>> alignment = attention.initial_alignment(h)  # (2, 7), one-hot at 0
        >>> context, weights, alignment = attention(
        ...     keras.random.normal((2, 6)), h, alignment, return_attention_scores=True,
        ...     return_alignment=True)

    References:
        Raffel, Luong, Liu, Weiss, Eck, "Online and Linear-Time Attention by Enforcing
        Monotonic Alignments", ICML 2017, sections 2.2-2.5.
        Chiu, Raffel, "Monotonic Chunkwise Attention", ICLR 2018, section 2.
    """

    config_names = ("units", "chunk_size", "sigmoid_noise", "score_bias_init",
                    "kernel_initializer", "seed")

    def __init__(self, units, chunk_size=None, sigmoid_noise=1.0, score_bias_init=-1.0,
                 kernel_initializer="glorot_uniform", seed=None, **kwargs):
        super().__init__(units, kernel_initializer, **kwargs)
        check_positive_int("chunk_size", chunk_size, allow_none=True)
        check_number("sigmoid_noise", sigmoid_noise, 0)
        check_number("score_bias_init", score_bias_init)
        self.chunk_size = chunk_size
        self.sigmoid_noise = float(sigmoid_noise)
        self.score_bias_init = float(score_bias_init)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)

    def build(self, query_shape, value_shape, previous_alignment_shape=None, key_shape=None):
        key_shape = check_step_attention_shapes(query_shape, value_shape, key_shape)
        # W, U, b, v; then g, r; then MoChA's W_c, U_c, b_c, v_c (the order of saved files).
        self.add_energy_weights(query_shape[-1], key_shape[-1], use_bias=True)
        self.score_scale = self.add_weight(
            name="score_scale", shape=(),
            initializer=keras.initializers.Constant(1.0 / np.sqrt(self.units)))  # g
        self.score_bias = self.add_weight(
            name="score_bias", shape=(),
            initializer=keras.initializers.Constant(self.score_bias_init))  # r
        if self.chunk_size is not None:
            self.add_energy_weights(query_shape[-1], key_shape[-1], prefix="chunk_",
                                    use_bias=True)
        self.built = True

    def project_key(self, key):
        """`U h_j` for every position, `(B, S, Dk)` -> `(B, S, U)`; with MoChA also
        `U_c h_j`, concatenated: `(B, S, 2U)`."""
        projected = super().project_key(key)
        if self.chunk_size is None:
            return projected
        return ops.concatenate([projected, ops.matmul(key, self.chunk_key_kernel)], axis=-1)

    def initial_alignment(self, value, value_mask=None):
        """`α_0 = [1, 0, …, 0]`: the head starts at the first position, `(B, S)`."""
        length = ops.shape(value)[1]
        first = ops.zeros(ops.shape(value)[:1], "int32")
        return ops.cast(ops.one_hot(first, length), self.compute_dtype)

    def energies(self, query, key):
        """`e = g vᵀ/‖v‖ tanh(q + k) + r`: `ops.additive_scores` with the weight-normalised
        v, for projected queries `q = W s + b` `(..., T, U)` and keys `k = U h` `(..., S, U)`:
        `(..., T, S)`."""
        direction = self.score_kernel / ops.sqrt(ops.sum(ops.square(self.score_kernel)))
        return self.score_scale * attention_ops.additive_scores(query, key, direction) + \
            self.score_bias

    def chunk_energies(self, query, key):
        """MoChA's `u = v_cᵀ tanh(q + k)`, `q = W_c s + b_c` `(..., T, U)`, `k = U_c h`
        `(..., S, U)`: `(..., T, S)`."""
        return attention_ops.additive_scores(query, key, self.chunk_score_kernel)

    def _queries(self, query):
        """`(W s + b, W_c s + b_c)` (the second None without MoChA)."""
        monotonic = ops.matmul(query, self.query_kernel) + self.bias
        if self.chunk_size is None:
            return monotonic, None
        return monotonic, ops.matmul(query, self.chunk_query_kernel) + self.chunk_bias

    def _split_key(self, projected_key):
        if self.chunk_size is None:
            return projected_key, None
        return projected_key[..., : self.units], projected_key[..., self.units:]

    def _mode(self, mode, training, single_step):
        if mode is None:
            if training:
                return "prefix"
            return "online" if single_step else "hard"
        check_choice("mode", mode, MODES)
        if mode == "online" and not single_step:
            raise ValueError(
                "mode='online' computes one step: `query` must be (B, Dq), not (B, T, Dq)."
            )
        return mode

    def call(self, query, value, previous_alignment, key=None, value_mask=None,
             return_attention_scores=False, return_alignment=False, projected_key=None,
             training=None, mode=None, noise=None):
        single_step, projected_key = self.step_inputs(
            query, value, key, projected_key, previous_alignment)
        mode = self._mode(mode, training, single_step)
        if value_mask is None:
            value_mask = ops.ones(ops.shape(value)[:2], "bool")
        value_mask = ops.cast(value_mask, "bool")
        if mode == "online":
            context, weights, alignment = self._online(
                query, value, previous_alignment, projected_key, value_mask)
        else:
            context, weights, alignment = self._whole_rows(
                query, value, previous_alignment, projected_key, value_mask, mode, training,
                single_step, noise)
        outputs = (context,) + ((weights,) if return_attention_scores else ()) + (
            (alignment,) if return_alignment else ())
        return outputs if len(outputs) > 1 else context

    def draw_noise(self, shape):
        """Standard normal noise of `shape` from the layer's seed generator (see `noise`)."""
        return keras.random.normal(shape, seed=self.seed_generator)

    def _whole_rows(self, query, value, previous, projected_key, mask, mode, training,
                    single_step, noise):
        """Every energy of every row: the expected alignment (training) or `"hard"`."""
        query, previous = self.expand_step(single_step, query, previous)  # (B, T, Dq), (B, T, S)
        if noise is not None:
            (noise,) = self.expand_step(single_step, noise)
        monotonic_key, chunk_key = self._split_key(projected_key)
        monotonic_query, chunk_query = self._queries(query)
        energies = ops.cast(self.energies(monotonic_query, monotonic_key), "float32")  # (B, T, S)
        if mode == "hard":
            p_choose = ops.cast(energies > 0, "float32")
        else:
            if training and self.sigmoid_noise > 0:
                noise = self.draw_noise(ops.shape(energies)) if noise is None else noise
                energies = energies + self.sigmoid_noise * ops.cast(noise, "float32")
            p_choose = ops.sigmoid(energies)
        mask = ops.expand_dims(mask, 1)  # (B, 1, S)
        p_choose = ops.where(mask, p_choose, 0.0)  # the head never stops on padding
        alignment = monotonic_alignment(p_choose, previous, mode)
        weights = alignment
        if self.chunk_size is not None:
            chunk = self.chunk_energies(chunk_query, chunk_key)
            weights = chunkwise_weights(alignment, chunk, self.chunk_size, mask)
        weights = ops.cast(weights, self.compute_dtype)
        alignment = ops.cast(alignment, self.compute_dtype)
        context = ops.matmul(weights, value)  # (B, T, Dv)
        if single_step:
            context, weights, alignment = (
                ops.squeeze(x, 1) for x in (context, weights, alignment))
        return context, weights, alignment

    def stop_positions(self, monotonic_query, projected_key, mask, start):
        """The online search of one step: from `start` `(B,)` on, the first position where
        the energy is positive, or S (none); computes the energies only up to there, one
        position per row and round, each round O(B·U) whatever S.

        Args:
            monotonic_query: `W s + b`, `(B, U)`.
            projected_key: `project_key(key)`, `(B, S, U)` (MoChA: `(B, S, 2U)`).
            mask: bool `(B, S)`.
            start: int32 `(B,)`, the previous step's position (S: the head has left).

        Returns:
            int32 `(B,)`.
        """
        length = ops.shape(projected_key)[1]
        keys, real = _flat(projected_key), _flat(mask)  # (B·S, U), (B·S,): rows to gather
        first_rows = ops.arange(ops.shape(mask)[0], dtype="int32") * length  # row of (b, 0)

        def cond(position, stop, done):
            return ops.logical_not(ops.all(done))

        def body(position, stop, done):
            rows = first_rows + ops.minimum(position, length - 1)
            key = self._split_key(ops.take(keys, rows, axis=0))[0]  # U h_j (B, U)
            energy = self.energies(monotonic_query[:, None], key[:, None])[:, 0, 0]  # (B,)
            here = (energy > 0) & ops.take(real, rows, axis=0) & ops.logical_not(done)
            stop = ops.where(here, position, stop)
            done = done | here | (position + 1 >= length)
            return ops.where(done, position, position + 1), stop, done

        start = ops.cast(start, "int32")
        none = ops.full_like(start, length)
        _, stop, _ = ops.while_loop(cond, body, (start, none, start >= length))
        return stop

    def _online(self, query, value, previous, projected_key, mask):
        """One hard step, computed online (see `stop_positions`)."""
        length = ops.shape(value)[1]
        monotonic_query, chunk_query = self._queries(query)
        previous = ops.cast(previous, "float32")
        start = ops.where(ops.max(previous, axis=-1) > 0,
                          ops.cast(ops.argmax(previous, axis=-1), "int32"), length)
        stop = self.stop_positions(monotonic_query, projected_key, mask, start)
        stopped = stop < length
        index = ops.minimum(stop, length - 1)
        alignment = ops.one_hot(index, length) * ops.cast(stopped, "float32")[:, None]
        if self.chunk_size in (None, 1):  # a chunk of one: β = α
            positions, chunk_weights = index[:, None], ops.cast(stopped, "float32")[:, None]
        else:
            positions, chunk_weights = self._online_chunk(
                chunk_query, projected_key, mask, index, stopped)
        # (B, w): the chunk's positions and weights (w = 1 without MoChA).
        clipped = ops.clip(positions, 0, length - 1)
        values = _gather(value, clipped)  # (B, w, Dv)
        chunk_weights = ops.cast(chunk_weights, self.compute_dtype)
        context = ops.sum(values * chunk_weights[..., None], axis=1)
        weights = ops.sum(
            ops.one_hot(clipped, length, dtype=self.compute_dtype) * chunk_weights[..., None],
            axis=1)
        return context, weights, ops.cast(alignment, self.compute_dtype)

    def _online_chunk(self, chunk_query, projected_key, mask, index, stopped):
        """The w positions that end where the head stopped, and the softmax of `u` over the
        real ones: `(B, w)` int32 and `(B, w)` float32 (zeros where the head left)."""
        length = ops.shape(projected_key)[1]
        positions = index[:, None] + ops.arange(1 - self.chunk_size, 1, dtype="int32")
        clipped = ops.clip(positions, 0, length - 1)
        keys = self._split_key(_gather(projected_key, clipped))[1]  # U_c h (B, w, U)
        energies = ops.cast(
            self.chunk_energies(ops.expand_dims(chunk_query, 1), keys)[:, 0], "float32")
        valid = (positions >= 0) & _gather(mask, clipped) & stopped[:, None]
        return positions, attention_ops.masked_softmax(energies, valid)
