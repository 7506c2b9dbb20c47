"""The pieces the decoding loops share (`zoo.decode`'s greedy and GNMT beam searches and
`zoo.decode.hf_beam`).

The special ids of a decoding, writing one column of the output buffer,
forcing `[END]` at the length limit, never generating the padding id,
the top-k over a beam's K × V candidates (`blocked_top_k`), keeping a
`tf.while_loop` body's static shapes, and the loop itself over caches that
grow (`growing_loop`).
"""

import numpy as np
import tensorflow as tf

from zoo.text.special import PAD_ID


class Ids(tuple):
    """The special ids of one decoding: `start`, `end`, `pad`, and whether to force `end`."""

    def __new__(cls, start, end, pad, force_end):
        return super().__new__(cls, (start, end, pad, force_end))

    start = property(lambda self: self[0])
    end = property(lambda self: self[1])
    pad = property(lambda self: self[2])
    force_end = property(lambda self: self[3])


def write_column(buffer, t, values):
    """`buffer` `(..., L)` with column t set to `values` `(...)`."""
    at_t = tf.equal(tf.range(tf.shape(buffer)[-1]), t)
    return tf.where(at_t, values[..., None], buffer)


def forced_end(scores, ids, at_limit, impossible):
    """Scores `(N, V)` where rows `at_limit` `(N,)` may only pick `ids.end` (with force_end)."""
    if not ids.force_end:
        return scores
    is_end = tf.equal(tf.range(tf.shape(scores)[-1]), ids.end)[None, :]
    forced = tf.where(is_end, tf.zeros_like(scores), tf.fill(tf.shape(scores), impossible))
    return tf.where(at_limit[:, None], forced, scores)


# The candidates' blocks of `blocked_top_k`.
TOP_K_BLOCK = 128


def blocked_top_k(candidates, k, block=TOP_K_BLOCK):
    """`tf.math.top_k(candidates, k)`, the same values and indices, in two small top-ks.

    candidates `(B, M)` (a beam's K × V extensions per sentence) is cut into blocks of
    `block`; the k blocks with the largest maxima hold the top k (an element outside
    them has k larger blocks' maxima ranked before it), so one top-k runs over the
    `M / block` maxima and one over the k chosen blocks, taken in their order, so that
    ties keep `top_k`'s order (the lower index first). One full top-k over M sorts more:
    on K × V = 4 × 8,000 at B = 32, 2.8 against 0.75 ms under XLA, 5.7 against 1.0 ms
    without (`benchmarks/profile_beam_step.py`). M must be static (else the plain top-k).
    """
    size = candidates.shape[-1]
    if size is None or size <= 2 * k * block:
        return tf.math.top_k(candidates, k=k)
    batch, blocks = tf.shape(candidates)[0], -(-size // block)
    padded = tf.pad(candidates, [[0, 0], [0, blocks * block - size]],
                    constant_values=-np.inf)
    cut = tf.reshape(padded, [batch, blocks, block])
    _, chosen = tf.math.top_k(tf.reduce_max(cut, axis=-1), k=k)
    chosen = tf.sort(chosen, axis=-1)  # (B, k), the blocks in their order
    values, position = tf.math.top_k(
        tf.reshape(tf.gather(cut, chosen, batch_dims=1), [batch, k * block]), k=k)
    index = chosen[:, :, None] * block + tf.range(block)[None, None, :]  # (B, k, block)
    return values, tf.gather(tf.reshape(index, [batch, k * block]), position, batch_dims=1)


def keep_shapes(step):
    """The loop body, with every output given its input's static shape (ops such as
    reshapes by a dynamic batch size lose static sizes that the loop needs unchanged)."""

    def body(*loop_vars):
        outputs = step(*loop_vars)
        for before, after in zip(tf.nest.flatten(loop_vars), tf.nest.flatten(outputs)):
            after.set_shape(before.shape)
        return outputs

    return body


def pad_column(logits, pad_id=PAD_ID):
    """True at the padding id's column of `(…, V)` logits: it is never generated."""
    return tf.equal(tf.range(tf.shape(logits)[-1]), pad_id)


# The first width of a stepper's caches when they grow (`cache_widths`).
FIRST_CACHE_WIDTH = 16


def cache_widths(stepper, width):
    """The widths a decoding's caches take, one loop each (`growing_loop`): 16, 32, 64, …
    up to `width` where the stepper can grow its state (`grow`) and `width` is a Python int
    (static shapes: an export, XLA); else `[width]`, one loop over caches of `width`.

    A step attends to, writes into and (beam search) reorders whole cache buffers. With
    buffers as wide as the output (an export's `max_length`, 256 for `transformer-small`)
    every step pays for 256 positions where a sentence fills 20 or 30; buffers that double
    as the decoding goes pay for at most twice the positions filled, and for 16 at first.
    """
    if not hasattr(stepper, "grow") or not isinstance(width, int):
        return [width]
    widths = [min(FIRST_CACHE_WIDTH, width)]
    while widths[-1] < width:
        widths.append(min(2 * widths[-1], width))
    return widths


def growing_loop(keep_going, step, start, stepper, widths):
    """`tf.while_loop(keep_going, step, start)`, whose first loop variable is the step t and
    last the stepper's state, over caches that grow through `widths` (`cache_widths`): a
    loop per width stops where t reaches it; if the decoding goes on (`keep_going`), the
    state grows to the next width (`stepper.grow`) and the next loop takes over. Returns
    the loop variables at the end but the state.

    Each next loop sits in a `tf.cond` branch of the one before: TensorFlow 2.21's XLA
    bridge fails on three `While` nodes in a row in one function ("Cannot find body
    function ..._const_0", tensorflow/tensorflow#122886), and a decoding that is over
    skips the rest, the growing included.
    """
    bound = widths[0]
    variables = tf.while_loop(keep_going, keep_shapes(step), start,
                              maximum_iterations=bound - start[0])
    if len(widths) == 1:
        return variables[:-1]

    def go_on():
        grown = (*variables[:-1], stepper.grow(variables[-1], widths[1]))
        return growing_loop(keep_going, step, grown, stepper, widths[1:])

    return tf.cond(keep_going(*variables), go_on, lambda: variables[:-1])
