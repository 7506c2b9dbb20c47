"""Monotonic attention (Raffel et al., 2017) and monotonic chunkwise attention, MoChA (Chiu &
Raffel, 2018) (docs/math.md#monotonic-attention).

The layer `MonotonicAttention` and the functions behind it:

- `safe_cumprod`: a cumulative product computed as `exp(cumsum(log x))`;
- `monotonic_alignment`: the alignment `α_i` from the choosing probabilities
  `p_i` and the previous alignment `α_{i-1}` (expected: by a parallel prefix
  scan of the recurrence, in closed form, or position by position; or hard);
- `chunkwise_weights`: MoChA's weights `β_i` from `α_i` and the chunk energies.
"""

import keras
import numpy as np
from keras import ops

from keras_attention import ops as attention_ops
from keras_attention.checks import check_choice, check_number, check_positive_int

MODES = ("prefix", "parallel", "recursive", "hard", "online")
CLIP_DIVISOR = 1e-10  # the smallest divisor `monotonic_alignment` divides by (as TFA clips)


def _exclusive(x, fill):
    """`[fill, x_1, …, x_{S-1}]` along the last axis: shift right by one."""
    first = ops.full_like(x[..., :1], fill)
    return ops.concatenate([first, x[..., :-1]], axis=-1)


def safe_cumprod(x, exclusive=False):
    """`Π_{k≤j} x_k` (or `Π_{k<j}` with `exclusive`) along the last axis, as
    `exp(Σ log clip(x, tiny, 1))`.

    A product of many factors in [0, 1] underflows, and the gradient of
    `ops.cumprod` divides by its factors; summing logarithms does neither. The
    clip keeps `log` finite for factors 0 (the product is then `tiny`, not 0).
    """
    x = ops.convert_to_tensor(x)
    tiny = float(np.finfo(keras.backend.standardize_dtype(x.dtype)).tiny)
    logs = ops.log(ops.clip(x, tiny, 1.0))
    if exclusive:
        logs = _exclusive(logs, 0.0)
    return ops.exp(ops.cumsum(logs, axis=-1))


def _recursive_alignment(p_choose, previous):
    """`q_j = (1 − p_{j-1}) q_{j-1} + α_{i-1,j}`, `α_{i,j} = p_j q_j`, one position at a time."""
    shape = ops.shape(p_choose)
    p_flat = ops.reshape(p_choose, (-1, shape[-1]))  # (N, S)
    previous_flat = ops.reshape(previous, (-1, shape[-1]))
    # (S, N, 2): 1 − p_{j-1} and α_{i-1,j}, one tensor (Keras's scan needs a static length
    # to check several).
    inputs = ops.transpose(ops.stack([_exclusive(1.0 - p_flat, 1.0), previous_flat], -1),
                           (1, 0, 2))

    def step(q, x):
        q = x[:, 0] * q + x[:, 1]
        return q, q

    _, q = ops.scan(step, ops.zeros_like(inputs[0, :, 0]), inputs)  # (S, N)
    return ops.reshape(p_flat * ops.transpose(q), shape)


def _shift(x, offset, fill):
    """`[fill] * offset + x[..., :S - offset]` along the last axis, by a gather (the same shape
    whatever the offset, so that XLA compiles it inside a loop)."""
    positions = ops.arange(ops.shape(x)[-1]) - offset
    return ops.where(positions >= 0, ops.take(x, ops.maximum(positions, 0), axis=-1), fill)


def _prefix_alignment(p_choose, previous):
    """The recurrence `q_j = a_j q_{j-1} + b_j` (`a_j = 1 − p_{j-1}`, `b_j = α_{i-1,j}`) by a
    prefix scan (Hillis & Steele): `(a, b) ∘ (a', b') = (a a', a' b + b')` composes two steps,
    and after the round with offset d each position holds the composition of the 2d steps
    that end there; ⌈log₂ S⌉ rounds."""

    def compose(offset, a, b):
        return offset * 2, _shift(a, offset, 1.0) * a, a * _shift(b, offset, 0.0) + b

    loop_vars = (1, _exclusive(1.0 - p_choose, 0.0), previous)
    length = p_choose.shape[-1]
    if length is not None:  # a static length: unrolled rounds
        while loop_vars[0] < length:
            loop_vars = compose(*loop_vars)
    else:  # at most 2^32 positions: a bound on the rounds, so XLA can differentiate it
        loop_vars = ops.while_loop(lambda offset, a, b: offset < ops.shape(a)[-1], compose,
                                   loop_vars, maximum_iterations=32)
    return p_choose * loop_vars[2]


def monotonic_alignment(p_choose, previous_alignment, mode="prefix"):
    """The monotonic alignment `α_i` over the last axis.

    The head starts where it stopped at step i-1 (distributed as `α_{i-1}`) and
    moves right, stopping at position j with probability `p_{i,j}`; `α_{i,j}` is
    the probability that it stops at j, Raffel et al. (2017), eq. 9:
    `α_{i,j} = p_{i,j} Σ_{k≤j} α_{i-1,k} Π_{l=k}^{j-1} (1 − p_{i,l})`. What mass runs
    past the end stops nowhere: `Σ_j α_{i,j} ≤ 1`.

    Args:
        p_choose: choosing probabilities `p_i`, `(..., S)` in [0, 1].
        previous_alignment: `α_{i-1}`, `(..., S)` (`[1, 0, …, 0]` before the first step).
        mode: how to compute it (TensorFlow Addons' `monotonic_attention` has the last three):
            - `"prefix"`: the recurrence of eqs. 13-14, `q_j = (1 − p_{j-1}) q_{j-1} + α_{i-1,j}`,
              `α_{i,j} = p_{i,j} q_j`, as a parallel prefix scan: ⌈log₂ S⌉ rounds, no
              division, exact;
            - `"parallel"`: the closed form of appendix C.1,
              `α_i = p_i · cumprod(1 − p_i) · cumsum(α_{i-1} / cumprod(1 − p_i))` with exclusive
              cumulative products (`safe_cumprod`) and the divisor clipped to
              `CLIP_DIVISOR`. Wrong where `Π_{l<k} (1 − p_l)` falls below the clip before
              the mass `α_{i-1,k}`: a head at k = 3 after a `p = 1` at position 1 gets
              α = 0 instead of 1, and with p uniform in [0.05, 0.95] the error reaches 0.9
              from S = 64 (tests/test_monotonic.py);
            - `"recursive"`: the same recurrence position by position (exact, S steps);
            - `"hard"`: for `p` in {0, 1} and a one-hot (or zero) `α_{i-1}`: the first
              position at or after the previous one where `p = 1`.

    Returns:
        `α_i`, shaped like `p_choose`, float32.
    """
    check_choice("mode", mode, MODES[:4])
    p_choose = ops.cast(p_choose, "float32")
    previous = ops.cast(previous_alignment, "float32")
    if mode == "prefix":
        return _prefix_alignment(p_choose, previous)
    if mode == "recursive":
        return _recursive_alignment(p_choose, previous)
    if mode == "hard":
        # Only positions at or after the previous one, then only the first of those.
        p_choose = p_choose * ops.cumsum(previous, axis=-1)
        return p_choose * ops.cumprod(_exclusive(1.0 - p_choose, 1.0), axis=-1)
    stay = safe_cumprod(1.0 - p_choose, exclusive=True)  # Π_{l<j} (1 − p_l)
    return p_choose * stay * ops.cumsum(
        previous / ops.clip(stay, CLIP_DIVISOR, 1.0), axis=-1
    )


def _moving_sum(x, back, forward):
    """`Σ_{k=j-back}^{j+forward} x_k` along the last axis (zeros outside), one shifted copy
    per offset: exact for the few offsets of a chunk."""
    length = ops.shape(x)[-1]
    padded = ops.pad(x, [(0, 0)] * (len(x.shape) - 1) + [(back, forward)])
    total = padded[..., 0:length]
    for offset in range(1, back + forward + 1):
        total = total + padded[..., offset:offset + length]
    return total


def chunkwise_weights(alignment, chunk_energies, chunk_size, mask=None):
    """MoChA's expected attention `β_i` over the last axis, Chiu & Raffel (2018), eq. 20:

        β_{i,j} = Σ_{k=j}^{j+w-1} α_{i,k} exp(u_{i,j}) / Σ_{l=k-w+1}^{k} exp(u_{i,l})

    for each position k where the monotonic head may stop (`α_{i,k}`), a softmax of the
    chunk energies `u` over the w positions that end at k. With a one-hot `α_i` this is
    the hard chunk: the softmax of `u` over the chunk that ends at the attended position.

    Args:
        alignment: `α_i` `(..., S)`.
        chunk_energies: `u_i` `(..., S)`.
        chunk_size: w >= 1 (w = 1 gives `β = α`).
        mask: bool `(..., S)` (broadcastable), True for real positions: the others are
            left out of every chunk.

    Returns:
        `β_i`, float32, shaped like `alignment`.
    """
    check_positive_int("chunk_size", chunk_size)
    alignment = ops.cast(alignment, "float32")
    energies = ops.cast(chunk_energies, "float32")
    if mask is not None:
        mask = ops.cast(mask, "bool")
        energies = ops.where(mask, energies, attention_ops.large_negative_number("float32"))
    # exp(u − max u): the ratio is the same for any shift of a row, and nothing overflows.
    exp_energies = ops.exp(energies - ops.max(energies, axis=-1, keepdims=True))
    if mask is not None:
        exp_energies = ops.where(mask, exp_energies, 0.0)
    denominators = _moving_sum(exp_energies, chunk_size - 1, 0)  # over the chunk ending at k
    ratios = alignment / ops.maximum(denominators, CLIP_DIVISOR)
    return exp_energies * _moving_sum(ratios, 0, chunk_size - 1)  # over chunks holding j


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
class MonotonicAttention(keras.layers.Layer):
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

    def __init__(self, units, chunk_size=None, sigmoid_noise=1.0, score_bias_init=-1.0,
                 kernel_initializer="glorot_uniform", seed=None, **kwargs):
        super().__init__(**kwargs)
        check_positive_int("units", units)
        check_positive_int("chunk_size", chunk_size, allow_none=True)
        check_number("sigmoid_noise", sigmoid_noise, 0)
        check_number("score_bias_init", score_bias_init)
        self.units = units
        self.chunk_size = chunk_size
        self.sigmoid_noise = float(sigmoid_noise)
        self.score_bias_init = float(score_bias_init)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)

    def build(self, query_shape, value_shape, previous_alignment_shape=None, key_shape=None):
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

        def weight(name, shape, initializer=self.kernel_initializer):
            return self.add_weight(name=name, shape=shape, initializer=initializer)

        units = self.units
        self.query_kernel = weight("query_kernel", (query_shape[-1], units))  # W
        self.key_kernel = weight("key_kernel", (key_shape[-1], units))  # U
        self.bias = weight("bias", (units,), "zeros")  # b
        self.score_kernel = weight("score_kernel", (units,))  # v
        self.score_scale = weight(
            "score_scale", (), keras.initializers.Constant(1.0 / np.sqrt(units)))  # g
        self.score_bias = weight(
            "score_bias", (), keras.initializers.Constant(self.score_bias_init))  # r
        if self.chunk_size is not None:
            self.chunk_query_kernel = weight("chunk_query_kernel", (query_shape[-1], units))
            self.chunk_key_kernel = weight("chunk_key_kernel", (key_shape[-1], units))
            self.chunk_bias = weight("chunk_bias", (units,), "zeros")
            self.chunk_score_kernel = weight("chunk_score_kernel", (units,))
        self.built = True

    def project_key(self, key):
        """`U h_j` for every position, `(B, S, Dk)` -> `(B, S, U)`; with MoChA also
        `U_c h_j`, concatenated: `(B, S, 2U)`."""
        projected = ops.matmul(key, self.key_kernel)
        if self.chunk_size is None:
            return projected
        return ops.concatenate([projected, ops.matmul(key, self.chunk_key_kernel)], axis=-1)

    def initial_alignment(self, value, value_mask=None):
        """`α_0 = [1, 0, …, 0]`: the head starts at the first position, `(B, S)`."""
        length = ops.shape(value)[1]
        first = ops.zeros(ops.shape(value)[:1], "int32")
        return ops.cast(ops.one_hot(first, length), self.compute_dtype)

    def energies(self, features):
        """`g vᵀ/‖v‖ tanh(features) + r` over the last axis, features `W s + b + U h`."""
        direction = self.score_kernel / ops.sqrt(ops.sum(ops.square(self.score_kernel)))
        return self.score_scale * ops.sum(ops.tanh(features) * direction, axis=-1) + \
            self.score_bias

    def chunk_energies(self, features):
        """`v_cᵀ tanh(features)`, features `W_c s + b_c + U_c h`."""
        return ops.sum(ops.tanh(features) * self.chunk_score_kernel, axis=-1)

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

    def call(
        self,
        query,
        value,
        previous_alignment,
        key=None,
        value_mask=None,
        return_attention_scores=False,
        return_alignment=False,
        projected_key=None,
        training=None,
        mode=None,
    ):
        key = value if key is None else key
        self._check_inputs(query, previous_alignment)
        single_step = len(query.shape) == 2
        mode = self._mode(mode, training, single_step)
        if projected_key is None:
            projected_key = self.project_key(key)
        if value_mask is None:
            value_mask = ops.ones(ops.shape(value)[:2], "bool")
        value_mask = ops.cast(value_mask, "bool")
        if mode == "online":
            context, weights, alignment = self._online(
                query, value, previous_alignment, projected_key, value_mask)
        else:
            context, weights, alignment = self._whole_rows(
                query, value, previous_alignment, projected_key, value_mask, mode, training,
                single_step)
        outputs = (context,) + ((weights,) if return_attention_scores else ()) + (
            (alignment,) if return_alignment else ())
        return outputs if len(outputs) > 1 else context

    def _check_inputs(self, query, previous_alignment):
        if query.shape[-1] is not None and query.shape[-1] != self.query_kernel.shape[0]:
            raise ValueError(
                f"`query` has {query.shape[-1]} features but the layer was built for "
                f"{self.query_kernel.shape[0]}; received query.shape={tuple(query.shape)}."
            )
        if len(previous_alignment.shape) != len(query.shape):
            raise ValueError(
                "`previous_alignment` must be (B, S) for a query (B, Dq) and (B, T, S) for "
                f"queries (B, T, Dq); received query.shape={tuple(query.shape)}, "
                f"previous_alignment.shape={tuple(previous_alignment.shape)}."
            )

    def _whole_rows(self, query, value, previous, projected_key, mask, mode, training,
                    single_step):
        """Every energy of every row: the expected alignment (training) or `"hard"`."""
        if single_step:
            query = ops.expand_dims(query, 1)  # (B, 1, Dq)
            previous = ops.expand_dims(previous, 1)  # (B, 1, S)
        monotonic_key, chunk_key = self._split_key(projected_key)
        monotonic_query, chunk_query = self._queries(query)
        energies = self.energies(
            ops.expand_dims(monotonic_query, 2) + ops.expand_dims(monotonic_key, 1)
        )  # (B, T, S)
        energies = ops.cast(energies, "float32")
        if mode == "hard":
            p_choose = ops.cast(energies > 0, "float32")
        else:
            if training and self.sigmoid_noise > 0:
                energies = energies + self.sigmoid_noise * keras.random.normal(
                    ops.shape(energies), seed=self.seed_generator)
            p_choose = ops.sigmoid(energies)
        mask = ops.expand_dims(mask, 1)  # (B, 1, S)
        p_choose = ops.where(mask, p_choose, 0.0)  # the head never stops on padding
        alignment = monotonic_alignment(p_choose, previous, mode)
        weights = alignment
        if self.chunk_size is not None:
            chunk = self.chunk_energies(
                ops.expand_dims(chunk_query, 2) + ops.expand_dims(chunk_key, 1))
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
            energy = self.energies(monotonic_query + key)  # (B,)
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
            self.chunk_energies(ops.expand_dims(chunk_query, 1) + keys), "float32")
        valid = (positions >= 0) & _gather(mask, clipped) & stopped[:, None]
        return positions, attention_ops.masked_softmax(energies, valid)

    def compute_mask(self, inputs, previous_mask=None):
        # The context has no padding of its own: it is one vector per query.
        return None

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "units": self.units,
                "chunk_size": self.chunk_size,
                "sigmoid_noise": self.sigmoid_noise,
                "score_bias_init": self.score_bias_init,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "seed": self.seed,
            }
        )
        return config
