"""The alignments of monotonic attention (Raffel et al., 2017) and of monotonic chunkwise
attention, MoChA (Chiu & Raffel, 2018), as functions of tensors
(docs/math.md#monotonic-attention); the layer is `keras_attention.layers.MonotonicAttention`.

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
from keras_attention.checks import check_choice, check_positive_int

MODES = ("prefix", "parallel", "recursive", "hard")  # of `monotonic_alignment`
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
    check_choice("mode", mode, MODES)
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
