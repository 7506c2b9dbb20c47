"""Hugging Face's beam search, step for step, so imported models reproduce their upstream outputs.

`zoo.decode.beam_search(..., length_penalty="hf")` runs this loop: the
algorithm of transformers' `GenerationMixin._beam_search` (v4.50 on) with
its defaults (`early_stopping=False`, one `</s>` id), as
`model.generate(num_beams=K, length_penalty=alpha)` runs it. At step t
(t + 1 tokens generated), with running scores `s_k` (only beam 0 live at
first):

1. candidates `s_k + log p(v | y_k, x)` over all K·V extensions; the pad id is
   impossible (Marian's `bad_words_ids`); with `force_end`, the step that
   reaches the limit may only pick `</s>` (`forced_eos_token_id`);
2. the best 2K candidates; those ending in `</s>` or at the length limit are
   "finished", the best K unfinished ones run on;
3. finished candidates among the best K of the 2K enter a K-slot pool of ended
   hypotheses with score `log p(y | x) / (t + 1) ** alpha`;
4. a row stops improving once its pool is full and the best running score
   divided by `(t + 1) ** alpha` cannot beat the pool's worst score (HF's
   heuristic for `early_stopping=False`); the loop ends when no row can
   improve or every candidate hit the limit.

The result is the best hypothesis of the pool. Shapes: B rows, K beams, V
vocabulary, L = `width` columns.
"""

import tensorflow as tf

from zoo.decode.search_steps import (
    blocked_top_k,
    cache_widths,
    forced_end,
    growing_loop,
    pad_column,
    write_column,
)

_NEG = -1e9  # HF's score for impossible or excluded candidates


def beam(stepper, source, width, limit, ids, beam_size, alpha):
    """`(tokens (B, L), scores (B,))` of HF beam search; see the module docstring.

    Args:
        stepper: `zoo.decode`'s per-family step (`prepare`, `step`).
        source: int32 `(B, S)`.
        width: L, the columns of the output (a Python int or a scalar tensor).
        limit: int32 `(B,)`, the most tokens per row (HF's `max_new_tokens`).
        ids: `zoo.decode.Ids` (start, end, pad, force_end).
        beam_size: K.
        alpha: HF's `length_penalty`.
    """
    batch, k, widths = tf.shape(source)[0], beam_size, cache_widths(stepper, width)
    state = stepper.prepare(source, k, widths[0])  # B·K rows: b·K + k
    running = tf.fill([batch, k, width], ids.pad)  # (B, K, L)
    running_scores = tf.tile(tf.concat([[0.0], tf.fill([k - 1], _NEG)], 0)[None], [batch, 1])
    pool = tf.fill([batch, k, width], ids.pad)  # ended hypotheses
    pool_scores = tf.fill([batch, k], _NEG)
    pool_ended = tf.zeros([batch, k], tf.bool)
    improving = tf.ones([batch], tf.bool)
    last = tf.fill([batch * k], ids.start)
    top_k_mask = tf.range(2 * k) < k  # (2K,) only the best K candidates may end
    loop_vars = (tf.constant(0), tf.constant(False), last, running, running_scores,
                 pool, pool_scores, pool_ended, improving, state)

    def keep_going(t, stop, *_):
        return tf.logical_and(t < width, tf.logical_not(stop))

    def step(t, stop, last, running, running_scores, pool, pool_scores, pool_ended, improving,
             state):
        logits, state = stepper.step(last, t, state)  # (B·K, V)
        log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
        log_probs = tf.where(pad_column(log_probs, ids.pad), -float("inf"), log_probs)
        at_limit = t + 1 >= limit  # (B,)
        log_probs = forced_end(log_probs, ids, tf.repeat(at_limit, k), -float("inf"))
        vocabulary = log_probs.shape[-1] or tf.shape(log_probs)[-1]
        candidates = tf.reshape(log_probs, [batch, k, vocabulary]) + running_scores[:, :, None]
        top_scores, top = blocked_top_k(tf.reshape(candidates, [batch, k * vocabulary]), 2 * k)
        parent, token = top // vocabulary, top % vocabulary
        sequences = write_column(tf.gather(running, parent, batch_dims=1), t, token)
        finished = tf.equal(token, ids.end) | at_limit[:, None]  # (B, 2K)

        # The best K unfinished candidates run on.
        run_scores = top_scores + tf.cast(finished, tf.float32) * _NEG
        run_scores, chosen = tf.math.top_k(run_scores, k=k)  # (B, K)
        running = tf.gather(sequences, chosen, batch_dims=1)
        rows = tf.reshape(tf.range(batch)[:, None] * k + tf.gather(parent, chosen, batch_dims=1), [-1])

        # Finished candidates among the best K enter the pool, length-penalised.
        new_ended = finished & top_k_mask[None, :]
        scores = top_scores / tf.pow(tf.cast(t + 1, tf.float32), alpha)
        scores += tf.cast(tf.logical_not(improving), tf.float32)[:, None] * _NEG
        scores += tf.cast(tf.logical_not(new_ended), tf.float32) * _NEG
        merged_scores = tf.concat([pool_scores, scores], axis=1)  # (B, 3K)
        pool_scores, best = tf.math.top_k(merged_scores, k=k)
        pool = tf.gather(tf.concat([pool, sequences], axis=1), best, batch_dims=1)
        pool_ended = tf.gather(tf.concat([pool_ended, new_ended], axis=1), best, batch_dims=1)

        # HF's early-stopping heuristic (early_stopping=False): length t + 1.
        best_possible = run_scores[:, 0] / tf.pow(tf.cast(t + 1, tf.float32), alpha)  # (B,)
        worst = tf.where(pool_ended, tf.reduce_min(pool_scores, axis=1, keepdims=True), _NEG)
        improving &= tf.reduce_any(best_possible[:, None] > worst, axis=1)
        stop = tf.logical_not(tf.reduce_any(improving)) | tf.reduce_all(finished)
        state = tf.nest.map_structure(lambda x: tf.gather(x, rows), state)
        last = tf.reshape(tf.gather(token, chosen, batch_dims=1), [-1])
        return (t + 1, stop, last, running, run_scores, pool, pool_scores, pool_ended,
                improving, state)

    loop = growing_loop(keep_going, step, loop_vars, stepper, widths)
    pool, pool_scores = loop[5], loop[6]
    return pool[:, 0], pool_scores[:, 0]
