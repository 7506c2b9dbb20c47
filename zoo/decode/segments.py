"""The outer loop of `zoo.decode`'s greedy and GNMT beam searches: segments of steps over
caches that grow, and finished sentences that leave the batch.

A batch decodes until its last sentence ends. Run as one loop over the whole batch, every
step computes every row: on a trained model whose sentences end after 10 to 40 tokens, a
batch of 32 with one sentence that runs to the length limit computes 32 rows for all of its
steps, seven times the rows that are still live (issue #65's profile, in
`benchmarks/README.md`). The engines drop finished sentences from the batch (CTranslate2's
`decoding.cc`, fairseq's `sequence_generator.py`); so does this loop, at the end of each
segment.

A segment is a `tf.while_loop` of search steps over `C` sentence slots and caches of `W`
positions, static shapes within. It ends where the caches are full (t = W), or where half
the slots or more hold finished sentences, or where the search is over. Between segments,
outside the inner loop:

- each slot's results are written to the sentence's row of the batch's results;
- the slots shrink to the next power of two at or above the live sentences, live ones
  first (the rest of the kept slots are finished sentences, which stay finished and cost
  only their share of the products), with every per-sentence and per-hypothesis tensor,
  the stepper's state and its per-row context (`steps.with_context`) gathered;
- the caches double (`stepper.grow`), from 16 positions up to the output's width.

Powers of two keep the shapes a batch can take to about log2(B) × log2(width / 16), so
that XLA (`jit=True`: each segment is compiled by XLA, per shape, and the outer loop runs
in the graph around it) compiles a few programs, not one per count of live sentences.
A row's computation does not depend on which other rows share its batch, so the ids are
those of the whole-batch loop.
"""

import tensorflow as tf

from keras_attention.xla import in_xla_context
from zoo.decode import search_steps
from zoo.decode import steps as decode_steps
from zoo.decode.search_steps import cache_widths, growing_loop, keep_shapes


class Search:
    """What a search loop gives `run`.

    Args:
        step: `step(stepper, t, *variables, state)` -> `(t + 1, *variables, state)`.
        keep_going: `keep_going(t, *variables)`: a scalar bool, false once the search is over.
        variables: the loop's tensors; each has the slots (`C`) or the hypotheses
            (`C·copies`, row `c·copies + k`) as its first axis.
        done: the index in `variables` of the per-sentence bool `(C,)`, true once a sentence
            has finished (it stays finished).
        per_hypothesis: the indices in `variables` of the tensors with `C·copies` rows.
        results: the indices in `variables` of what the search returns, per sentence.
        copies: hypotheses per sentence (the beam size; 1 for greedy search).
        drop_finished: whether finished sentences may leave the batch (false where the
            rows' positions matter, as in sampling, whose draws depend on them).
    """

    def __init__(self, step, keep_going, variables, done, per_hypothesis, results, copies,
                 drop_finished=True):
        self.step, self.keep_going, self.variables = step, keep_going, tuple(variables)
        self.done, self.per_hypothesis, self.results = done, per_hypothesis, results
        self.copies, self.drop_finished = copies, drop_finished


def run(search, stepper, state, width, jit=False, t=0):
    """Run `search` to its end; returns its `results` for the whole batch, in its order.

    `state` is the stepper's state for caches of `first_width(stepper, width)` positions;
    `width` the output's (a Python int, or a scalar tensor outside XLA); `t` the first step
    (a search may take its first steps itself: the beam search's first is at one row per
    sentence).

    Inside one XLA program (a caller's `jit_compile` function), where shapes cannot change
    in a loop, the caches grow (`search_steps.growing_loop`) and the batch stays whole.
    """
    if in_xla_context():
        return _whole_batch(search, stepper, state, width, t)
    shrink = search.drop_finished and decode_steps.has_context(stepper)
    context = decode_steps.context(stepper) if shrink else ()
    variables = search.variables
    slots = tf.range(tf.shape(variables[search.done])[0])
    results = tuple(variables[i] for i in search.results)
    start = (tf.constant(t), tf.convert_to_tensor(first_width(stepper, width)), slots, results,
             variables, state, context)

    def keep_going(t, cache_width, slots, results, variables, state, context):
        return search.keep_going(t, *variables)

    def segment(t, cache_width, slots, results, variables, state, context):
        current = decode_steps.with_context(stepper, context) if shrink else stepper
        t, variables, state = _segment(search, current, t, cache_width, variables, state,
                                       shrink, jit)
        results = _collect(results, slots, tuple(variables[i] for i in search.results))
        if shrink:
            kept = _kept_slots(variables[search.done])
            slots, variables, state, context = _gather(search, kept, slots, variables, state,
                                                       context)
        if hasattr(stepper, "grow"):
            grown = tf.where(t >= cache_width, tf.minimum(2 * cache_width, width), cache_width)
            state, cache_width = stepper.grow(state, grown), grown
        return t, cache_width, slots, results, variables, state, context

    invariants = tf.nest.map_structure(_rows_relaxed, start)
    if hasattr(stepper, "grow"):  # the caches' width changes too
        invariants = (*invariants[:5], tf.nest.map_structure(_relaxed, state), invariants[6])
    end = tf.while_loop(keep_going, segment, start, shape_invariants=invariants)
    return end[3]


def _whole_batch(search, stepper, state, width, t):
    """`run` without dropping sentences: a `tf.while_loop` per cache width."""

    def keep_going(t, *variables):
        return search.keep_going(t, *variables[:-1])

    def step(t, *variables):
        return search.step(stepper, t, *variables)

    start = (tf.constant(t), *search.variables, state)
    end = growing_loop(keep_going, step, start, stepper, cache_widths(stepper, width))
    return tuple(end[1 + i] for i in search.results)


def first_width(stepper, width):
    """The caches' width at the start: 16 positions (at most `width`) where they can grow."""
    if not hasattr(stepper, "grow"):
        return width
    if isinstance(width, int) or in_xla_context():
        return cache_widths(stepper, width)[0]
    return tf.minimum(search_steps.FIRST_CACHE_WIDTH, width)


def _rows_relaxed(tensor):
    """A shape invariant of the loop over segments: the first axis (slots, or hypotheses) may
    change size; the others keep theirs (a layer may need them static)."""
    if tensor.shape.rank == 0:
        return tensor.shape
    return tf.TensorShape([None]).concatenate(tensor.shape[1:])


def _relaxed(tensor):
    """The shape invariant of a state that grows: every axis may change size."""
    return tf.TensorShape([None] * tensor.shape.rank)


def _segment(search, stepper, t, cache_width, variables, state, shrink, jit):
    """The inner loop: steps until the caches are full, half the slots have finished
    (`shrink`), or the search is over. Compiled by XLA with `jit`."""

    def keep_going(t, variables, state):
        going = search.keep_going(t, *variables) & (t < cache_width)
        if shrink:
            live = tf.reduce_sum(tf.cast(tf.logical_not(variables[search.done]), tf.int32))
            going &= 2 * live > tf.shape(variables[search.done])[0]
        return going

    def step(t, variables, state):
        outputs = search.step(stepper, t, *variables, state)
        return outputs[0], tuple(outputs[1:-1]), outputs[-1]

    body = keep_shapes(step)
    if jit and search.copies > 1:
        body = _two_steps(body, keep_going)

    def loop(t, variables, state):
        return tf.while_loop(keep_going, body, (t, variables, state))

    if jit:
        loop = tf.function(loop, jit_compile=True, autograph=False)
    return loop(t, tuple(variables), state)


def _two_steps(step, keep_going):
    """A loop body of two steps, the second where the loop would go on after the first: the
    same steps as one per iteration.

    A beam search reorders its caches by parent beam at every step, a gather. Under XLA a
    loop variable cannot be gathered into its own buffer, so XLA gathers each cache into a
    new buffer and copies it back into the loop's (a `copy` per cache in the optimized
    HLO): the reorder reads and writes every cache twice. Over two steps, the first gathers
    into a new buffer and the second from there into the loop's, and no copy is left. At
    batch 32, beam 4 (128 rows, caches of 32 positions, `transformer-small`) a step took
    12.1 ms instead of 14.3, and 10.9 without any reorder (docs in `benchmarks/README.md`).
    """

    def body(*variables):
        variables = step(*variables)
        return tf.cond(keep_going(*variables), lambda: step(*variables), lambda: variables)

    return body


def _collect(results, slots, values):
    """The batch's `results` with each slot's `values` written to its sentence's row."""
    rows = slots[:, None]
    return tuple(tf.tensor_scatter_nd_update(full, rows, value)
                 for full, value in zip(results, values))


def _kept_slots(done):
    """The slots to keep: all, while more than half are live; else the live ones first and
    as many finished ones after them as make a power of two (int32 `(C',)`)."""
    size = tf.shape(done)[0]
    live = tf.reduce_sum(tf.cast(tf.logical_not(done), tf.int32))
    powers = tf.bitwise.left_shift(1, tf.range(31))  # 1, 2, 4, …
    capacity = tf.reduce_min(tf.where(powers >= live, powers, powers[-1]))
    capacity = tf.where(2 * live > size, size, tf.minimum(capacity, size))
    order = tf.argsort(tf.cast(done, tf.int32), stable=True)  # the live slots first
    return tf.where(capacity < size, order, tf.range(size))[:capacity]


def _gather(search, kept, slots, variables, state, context):
    """Every per-slot tensor at the `kept` slots."""
    copies = search.copies
    hypotheses = tf.reshape(kept[:, None] * copies + tf.range(copies)[None, :], [-1])
    variables = tuple(
        tf.gather(value, hypotheses if i in search.per_hypothesis else kept)
        for i, value in enumerate(variables)
    )

    def take(tensor):
        return tf.gather(tensor, hypotheses)

    return (tf.gather(slots, kept), variables, tf.nest.map_structure(take, state),
            tf.nest.map_structure(take, context))
