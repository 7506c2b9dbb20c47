"""The pieces both beam searches share (`zoo.decode`'s GNMT beam and `zoo.decode.hf_beam`).

The special ids of a decoding, writing one column of the output buffer,
forcing `[END]` at the length limit, never generating the padding id, and
keeping a `tf.while_loop` body's static shapes.
"""

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
