"""Auto-regressive decoding for the zoo's seq2seq models (MATH.md, "Transformer", inference).

Greedy decoding here re-runs the whole model on a fixed-size target buffer at
each step (no key/value cache): a step costs O(t) model positions, which is
correct for every seq2seq family (Transformer and RNNsearch) since position t
only sees positions <= t. Cached decoding and beam search are not written yet.
"""

import tensorflow as tf

START_ID = 2
END_ID = 3


def greedy_decode(model, source, max_length=None, start_id=START_ID, end_id=END_ID):
    """Greedy decoding of a batch, inside one `tf.function` loop.

    Args:
        model: a zoo seq2seq model (`{"source", "target"}` -> logits `(B, T, V)`).
        source: int ids `(B, S)`, 0 = padding.
        max_length: the most tokens to generate; defaults to `S + 50` (the paper's
            maximum output length).
        start_id, end_id: the `[START]` and `[END]` ids.

    Returns:
        int32 `(B, max_length)`: generated ids without `[START]`; the `[END]`
        token is kept and everything after it is 0.
    """
    source = tf.convert_to_tensor(source, tf.int32)
    if source.shape.rank != 2:
        raise ValueError(f"`source` must have shape (B, S); received {source.shape}.")
    if max_length is None:
        max_length = int(source.shape[1]) + 50
    return _greedy_loop(model, source, tf.constant(max_length), start_id, end_id)


@tf.function(reduce_retracing=True)
def _greedy_loop(model, source, max_length, start_id, end_id):
    batch = tf.shape(source)[0]
    # buffer[:, 0] is [START]; step t writes the token predicted at position t into t + 1.
    buffer = tf.concat(
        [tf.fill([batch, 1], start_id), tf.zeros([batch, max_length], tf.int32)], axis=1
    )
    done = tf.zeros([batch], tf.bool)
    t = tf.constant(0)

    def keep_going(t, buffer, done):
        return tf.logical_and(t < max_length, tf.logical_not(tf.reduce_all(done)))

    def step(t, buffer, done):
        logits = model({"source": source, "target": buffer[:, :-1]}, training=False)
        token = tf.argmax(logits[:, t, :], axis=-1, output_type=tf.int32)  # (B,)
        token = tf.where(done, tf.zeros_like(token), token)
        column = tf.one_hot(t + 1, max_length + 1, dtype=tf.int32)  # (L + 1,)
        buffer = buffer + token[:, None] * column[None, :]
        return t + 1, buffer, tf.logical_or(done, tf.equal(token, end_id))

    _, buffer, _ = tf.while_loop(
        keep_going, step, (t, buffer, done),
        shape_invariants=(t.shape, tf.TensorShape([None, None]), done.shape),
    )
    return buffer[:, 1:]


def strip_special(ids, end_id=END_ID):
    """Cut each row of decoded ids at `[END]` and drop padding: a list of int lists."""
    rows = []
    for row in tf.convert_to_tensor(ids).numpy().tolist():
        out = []
        for token in row:
            if token == end_id:
                break
            if token != 0:
                out.append(token)
        rows.append(out)
    return rows
