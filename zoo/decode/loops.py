"""The decoding loops of `zoo.decode`: greedy search and the GNMT beam search.

Both run `tf.while_loop`s over output buffers of `width` columns and call a stepper
(`zoo.decode.steps`) for the logits of each step, in segments (`zoo.decode.segments`): the
caches start at 16 positions and double as the decoding goes, and finished sentences leave
the batch. Hugging Face's beam
search is `zoo.decode.hf_beam`; the pieces the loops share are in `zoo.decode.search_steps`.
"""

import tensorflow as tf

from keras_attention.ops import repeat_rows
from keras_attention.xla import in_xla_context
from zoo.decode import segments
from zoo.decode import steps as decode_steps
from zoo.decode.search_steps import blocked_top_k, forced_end, pad_column, write_column

NEG = -1e9  # log-probability of impossible hypotheses (finite: no inf - inf or 0 * inf)


def length_penalty(length, alpha):
    """GNMT's length penalty `lp(Y) = ((5 + |Y|) / (5 + 1))^α` (Wu et al., 2016, eq. 14).

    `|Y|` counts the generated tokens including `[END]` (as in tensor2tensor's
    beam search); α = 0 gives lp = 1, i.e. plain log-probabilities; the Transformer
    paper uses α = 0.6 (docs/math.md#beam-search-with-the-gnmt-length-penalty).

    Args:
        length: int or int tensor, any shape.
        alpha: float >= 0.

    Returns:
        float32, shaped like `length`.
    """
    return tf.pow((5.0 + tf.cast(length, tf.float32)) / 6.0, alpha)


def greedy(stepper, source, width, limit, ids, with_score=False, choose=None, jit=False):
    """The arg-max token at every step: int32 `(B, width)`, `ids.pad` after `[END]`.

    `choose(masked, t)`, when given, picks the token of step t instead of the arg-max
    (`zoo.decode.sampling` draws it): `masked` is `(B, V)` logits in which the padding
    id, and at the length limit every id but `[END]` (with `force_end`), are NEG. Its rows
    keep their places (the draws depend on them); otherwise finished rows leave the batch
    (`zoo.decode.segments`, whose segments XLA compiles with `jit`).

    With `with_score`, also float32 `(B,)`: the sum of the chosen tokens'
    log-probabilities `log softmax(logits)[token]` up to and including `[END]` (the
    score of beam search of width 1 with α = 0), added up in the loop.
    """
    batch = tf.shape(source)[0]
    state = stepper.prepare(source, 1, segments.first_width(stepper, width))
    tokens = tf.fill([batch], ids.start)  # the decoder input at step t
    output = tf.fill([batch, width], ids.pad)
    done = tf.less_equal(limit, 0)
    score = tf.zeros([batch], tf.float32)

    def keep_going(t, tokens, output, done, score, limit):
        return tf.logical_and(t < width, tf.logical_not(tf.reduce_all(done)))

    def step(stepper, t, tokens, output, done, score, limit, state):
        logits, state = stepper.step(tokens, t, state)  # (B, V)
        masked = tf.where(pad_column(logits, ids.pad), tf.constant(NEG, logits.dtype), logits)
        masked = forced_end(masked, ids, t + 1 >= limit, NEG)
        if choose is None:
            token = tf.argmax(masked, axis=-1, output_type=tf.int32)  # (B,)
        else:
            token = choose(masked, t)
        if with_score:  # log p(token) = logit - logsumexp(logits), in float32
            logits = tf.cast(logits, tf.float32)
            chosen = tf.gather(logits, token, batch_dims=1) - tf.reduce_logsumexp(logits, axis=-1)
            score += tf.where(done, 0.0, chosen)
        token = tf.where(done, tf.fill(tf.shape(token), ids.pad), token)
        output = write_column(output, t, token)
        done = done | tf.equal(token, ids.end) | (t + 1 >= limit)
        return t + 1, token, output, done, score, limit, state

    search = segments.Search(step, keep_going, (tokens, output, done, score, limit), done=2,
                             per_hypothesis=(), results=(1, 3), copies=1,
                             drop_finished=choose is None)
    output, score = segments.run(search, stepper, state, width, jit)
    return (output, score) if with_score else output


def _extend(log_probs, alive_log_probs, ended, done, k):
    """The K best extensions of the live hypotheses, of which the K - d best are kept.

    Returns `(parent, token, log_prob, kept)`, each `(B, K)`.
    """
    batch = tf.shape(alive_log_probs)[0]
    vocabulary = log_probs.shape[-1] or tf.shape(log_probs)[-1]  # static where it can be
    candidates = alive_log_probs[:, :, None] + tf.reshape(log_probs, [batch, k, vocabulary])
    top_log_probs, top = blocked_top_k(tf.reshape(candidates, [batch, k * vocabulary]), k)
    # Keep the K - d best extensions; ignore impossible ones and finished rows.
    kept = (
        (tf.range(k)[None, :] < (k - ended)[:, None])
        & (top_log_probs > NEG / 2)
        & tf.logical_not(done)[:, None]
    )
    return top // vocabulary, top % vocabulary, top_log_probs, kept


def _best_ended(hypotheses, log_probs, finishing, t, alpha, best, best_score):
    """The best of the previous best and the hypotheses `finishing` at step t,
    scored `log p / lp(t + 1)`: `(best (B, L), best_score (B,))`."""
    scores = tf.where(finishing, log_probs / length_penalty(t + 1, alpha), NEG)
    candidate_score = tf.reduce_max(scores, axis=1)  # (B,)
    candidate = tf.gather(
        hypotheses, tf.argmax(scores, axis=1, output_type=tf.int32), batch_dims=1
    )  # (B, L)
    better = candidate_score > best_score  # ties keep the earlier (shorter) hypothesis
    return tf.where(better[:, None], candidate, best), tf.where(better, candidate_score, best_score)


def beam(stepper, source, width, limit, ids, beam_size, alpha, jit=False):
    """GNMT beam search (see `zoo.decode.beam_search`): `(tokens (B, width), scores (B,))`.

    Finished sentences leave the batch (`zoo.decode.segments`, whose segments XLA
    compiles with `jit`). The first step computes one row per sentence (`_first_step`)."""
    batch, k = tf.shape(source)[0], beam_size
    # Every per-hypothesis tensor has B·K rows: b·K + k.
    last = tf.fill([batch * k], ids.start)  # (B·K,) the decoder input at step t
    alive = tf.fill([batch, k, width], ids.pad)  # live hypotheses
    # Only beam 0 is live at first, so the first step does not pick K copies of one token.
    alive_log_probs = tf.tile(
        tf.concat([[0.0], tf.fill([k - 1], NEG)], axis=0)[None, :], [batch, 1]
    )  # (B, K)
    ended = tf.zeros([batch], tf.int32)  # d: hypotheses that ended so far
    best, best_score = tf.fill([batch, width], ids.pad), tf.fill([batch], NEG)
    variables = (last, alive, alive_log_probs, ended, best, best_score, tf.less_equal(limit, 0),
                 limit, length_penalty(limit, alpha))
    stepper, state, variables, t = _first_step(
        stepper, source, segments.first_width(stepper, width), ids, k, alpha, variables, jit)
    if (jit or in_xla_context()) and hasattr(stepper, "with_transposed_table"):
        stepper = stepper.with_transposed_table()  # the steps after the first: B·K rows

    def keep_going(t, *variables):
        return tf.logical_and(t < width, tf.logical_not(tf.reduce_all(variables[6])))

    def step(stepper, t, *variables):
        logits, state = stepper.step(variables[0], t, variables[-1])  # (B·K, V)
        variables, rows = _advance(ids, k, alpha, t, logits, *variables[:-1])
        state = tf.nest.map_structure(lambda x: tf.gather(x, rows), state)
        return (t + 1, *variables, state)

    search = segments.Search(step, keep_going, variables, done=6, per_hypothesis=(0,),
                             results=(4, 5), copies=k)
    return segments.run(search, stepper, state, width, jit, t=t)


def _first_step(stepper, source, cache_width, ids, k, alpha, variables, jit):
    """The search's first step at one row per sentence, where only beam 0 is live: the K rows
    of a sentence would compute the same logits and state K times (at batch 32, beam 4, a
    step of 128 rows where 32 give the same). Its logits, its state and the stepper's per-row
    context (`steps.context`) are then copied K times; every kept hypothesis has beam 0 for
    parent, so the copies need no reorder. Compiled by XLA with `jit`, as the segments are.
    A stepper without `CONTEXT` starts at B·K rows (t = 0). Returns `(stepper, state,
    variables, t)`: where the loop starts."""
    if not decode_steps.has_context(stepper):
        return stepper, stepper.prepare(source, k, cache_width), variables, 0
    state = stepper.prepare(source, 1, cache_width)

    def first(state, variables):
        logits, state = stepper.step(tf.fill([tf.shape(source)[0]], ids.start), 0, state)
        variables, _ = _advance(ids, k, alpha, 0, repeat_rows(logits, k), *variables)
        return variables, state

    if jit and not in_xla_context():
        first = tf.function(first, jit_compile=True, autograph=False)
    variables, state = first(state, variables)

    def copied(tensor):
        return repeat_rows(tensor, k)

    stepper = decode_steps.with_context(
        stepper, tf.nest.map_structure(copied, decode_steps.context(stepper)))
    return stepper, tf.nest.map_structure(copied, state), variables, 1


def _advance(ids, k, alpha, t, logits, last, alive, alive_log_probs, ended, best, best_score,
             done, limit, max_penalty):
    """One step of the search on its logits `(B·K, V)`: the variables after step t, and the
    rows `(B·K,)` of the hypotheses' parents, by which the stepper's state is reordered."""
    log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
    log_probs = tf.where(pad_column(log_probs, ids.pad), NEG, log_probs)
    log_probs = forced_end(log_probs, ids, tf.repeat(t + 1 >= limit, k), NEG)
    parent, token, top_log_probs, kept = _extend(log_probs, alive_log_probs, ended, done, k)
    token = tf.where(kept, token, ids.pad)
    hypotheses = write_column(tf.gather(alive, parent, batch_dims=1), t, token)  # (B, K, L)
    has_ended = kept & tf.equal(token, ids.end)
    finishing = has_ended | (kept & (t + 1 >= limit)[:, None])  # [END] or the length limit
    best, best_score = _best_ended(hypotheses, top_log_probs, finishing, t, alpha, best,
                                   best_score)
    ended += tf.reduce_sum(tf.cast(has_ended, tf.int32), axis=1)
    alive_log_probs = tf.where(kept & tf.logical_not(finishing), top_log_probs, NEG)
    best_alive = tf.reduce_max(alive_log_probs, axis=1)  # (B,)
    done = (
        done | (ended >= k) | (t + 1 >= limit) | (best_alive <= NEG / 2)
        | (best_alive / max_penalty < best_score)  # no live hypothesis can win any more
    )
    alive_log_probs = tf.where(done[:, None], NEG, alive_log_probs)
    rows = tf.reshape(tf.range(tf.shape(done)[0])[:, None] * k + parent, [-1])  # (B·K,)
    variables = (tf.reshape(token, [-1]), hypotheses, alive_log_probs, ended, best, best_score,
                 done, limit, max_penalty)
    return variables, rows
