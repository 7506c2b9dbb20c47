"""`zoo.decode.segments`: finished sentences leave the batch, caches grow, the ids stay.

A toy stepper whose sentence i ends at its own step `lengths[i]` records the rows and the
cache width of every step it computes; the searches must compute only the slots the
segments keep, and give the ids of the whole batch decoded as one (stepper without
`CONTEXT`). The real models' ids, with sentences of different lengths in one batch, are
checked against NumPy and transformers' `generate` in tests/test_decode.py.
"""

import re

import numpy as np
import pytest
import tensorflow as tf

from zoo.decode import loops, search_steps, segments
from zoo.decode import steps as decode_steps
from zoo.decode.search_steps import Ids

END, START, TOKEN, VOCABULARY = 3, 2, 4, 6
IDS = Ids(START, END, 0, False)


class EndsAtItsLength:
    """Sentence b emits `TOKEN` until step `lengths[b] - 1`, which emits `END`. The state is
    a `(rows, width)` buffer, so the recorded widths are the caches'."""

    CONTEXT = ("lengths",)

    def __init__(self, record):
        self.record = record

    def prepare(self, source, copies, width):
        self.lengths = tf.repeat(source[:, 0], copies)  # (B·copies,)
        return (tf.zeros([tf.shape(source)[0] * copies, width]),)

    def grow(self, state, width):
        (buffer,) = state
        return (tf.pad(buffer, [[0, 0], [0, width - tf.shape(buffer)[1]]]),)

    def step(self, tokens, t, state):
        (buffer,) = state
        seen = tf.py_function(lambda rows, width: self.record.append((int(rows), int(width))) or 0,
                              [tf.shape(tokens)[0], tf.shape(buffer)[1]], tf.int32)
        ends = t + 1 >= self.lengths
        with tf.control_dependencies([seen]):
            logits = 10.0 * tf.one_hot(tf.where(ends, END, TOKEN), VOCABULARY)
        return logits, state


class WholeBatch(EndsAtItsLength):
    """The same steps, but the loops cannot gather its rows: the batch stays whole."""

    CONTEXT = None


def decoded(stepper_class, lengths, width, search, jit=False):
    record = []
    stepper = stepper_class(record)
    source = tf.constant(np.asarray(lengths, np.int32)[:, None])
    limit = tf.fill([len(lengths)], width)

    @tf.function(autograph=False)
    def run():
        if search == "greedy":
            return loops.greedy(stepper, source, width, limit, IDS, with_score=True, jit=jit)
        return loops.beam(stepper, source, width, limit, IDS, beam_size=2, alpha=0.6, jit=jit)

    tokens, score = run()
    return tokens.numpy(), score.numpy(), record


def test_a_segment_ends_where_half_the_slots_have_finished_and_the_batch_shrinks():
    lengths = [3] * 7 + [40]  # 7 sentences end after 3 steps, one after 40
    tokens, _, record = decoded(EndsAtItsLength, lengths, 50, "greedy")
    rows = [r for r, _ in record]
    widths = [w for _, w in record]
    assert rows == [8] * 3 + [1] * 37, rows  # 3 steps of 8 rows, then the last sentence alone
    assert widths == [16] * 16 + [32] * 16 + [50] * 8, widths  # 16, 32, then the output's 50
    expected = np.zeros((8, 50), np.int32)
    for row, length in enumerate(lengths):
        expected[row, : length - 1], expected[row, length - 1] = TOKEN, END
    np.testing.assert_array_equal(tokens, expected)


def test_slots_shrink_to_powers_of_two_with_the_live_sentences_first():
    lengths = [5, 30, 5, 5, 20, 5, 5, 5, 5, 25]  # B = 10
    _, _, record = decoded(EndsAtItsLength, lengths, 32, "greedy")
    rows = [r for r, _ in record]
    # 5 steps of all 10; 3 live of 10 -> 4 slots (one finished); at 20 steps 2 live of 4 ->
    # 2 slots; at 25, 1 live of 2 -> 1 slot.
    assert rows == [10] * 5 + [4] * 15 + [2] * 5 + [1] * 5, rows


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_the_ids_and_scores_are_those_of_the_whole_batch(search):
    lengths = [2, 17, 9, 33, 1, 4, 4, 40, 12]
    tokens, score, record = decoded(EndsAtItsLength, lengths, 48, search)
    whole_tokens, whole_score, whole_record = decoded(WholeBatch, lengths, 48, search)
    np.testing.assert_array_equal(tokens, whole_tokens)
    np.testing.assert_allclose(score, whole_score, rtol=1e-6)
    copies = 1 if search == "greedy" else 2
    assert {r for r, _ in whole_record} == {9 * copies}  # the whole batch at every step
    assert sum(r for r, _ in record) < 0.6 * sum(r for r, _ in whole_record)
    assert record[-1][0] == copies  # the longest sentence ends alone


def test_the_first_beam_step_computes_one_row_per_sentence():
    """Only beam 0 is live at the first step: it runs at B rows, then B·K, with the ids and
    scores of a stepper without `CONTEXT`, which computes B·K rows from the first step."""
    lengths = [2, 17, 9, 1, 5]
    tokens, score, record = decoded(EndsAtItsLength, lengths, 24, "beam")
    whole_tokens, whole_score, whole_record = decoded(WholeBatch, lengths, 24, "beam")
    assert [r for r, _ in record[:2]] == [5, 10], record  # B, then B·K (K = 2)
    assert whole_record[0][0] == 10
    np.testing.assert_array_equal(tokens, whole_tokens)
    np.testing.assert_allclose(score, whole_score, rtol=1e-6)


def reordering_loop(two_steps):
    """`(the cache after 10 steps, the loop's optimized HLO under XLA)`: a cache written at
    one row and reordered (a gather by "parent") at every step, as a beam search's are."""

    def keep_going(t, variables, state):
        return t < 10

    def step(t, variables, state):
        (cache,) = state
        cache = tf.tensor_scatter_nd_update(cache, [[0]], cache[:1] + tf.cast(t, tf.float32))
        return t + 1, variables, (tf.gather(cache, tf.reverse(tf.range(8), [0])),)

    body = search_steps.keep_shapes(step)
    if two_steps:
        body = segments._two_steps(body, keep_going)

    def loop(cache):
        start = (tf.constant(0), (tf.constant(0.0),), (cache,))
        return tf.while_loop(keep_going, body, start)[2][0]

    compiled = tf.function(loop, jit_compile=True, autograph=False)
    cache = tf.zeros([8, 4, 16, 32])
    return compiled(cache).numpy(), compiled.experimental_get_compiler_ir(cache)(
        stage="optimized_hlo")


def test_two_steps_an_iteration_leave_no_copy_of_a_reordered_cache():
    """One step per iteration: XLA gathers the loop variable into a new buffer and copies it
    back into the loop's; two steps (`segments._two_steps`): the same values, no such copy."""
    one, one_hlo = reordering_loop(two_steps=False)
    two, two_hlo = reordering_loop(two_steps=True)
    np.testing.assert_array_equal(one, two)
    assert one[7, 0, 0, 0] == sum(range(1, 10, 2)) and one[0, 0, 0, 0] == sum(range(0, 10, 2))
    # A copy of the cache's size whose operand is the step's computation (a fusion), not
    # the function's argument or a branch's pass-through.
    computed_copy = re.compile(r"f32\[8,4,16,32\]\{[0-9,]+\} copy\(%[\w.-]*fusion")
    assert computed_copy.search(one_hlo), one_hlo
    assert not computed_copy.search(two_hlo), two_hlo


def test_sampling_keeps_every_row_in_its_place():
    record = []
    stepper = EndsAtItsLength(record)
    source = tf.constant([[3], [3], [3], [20]])

    @tf.function(autograph=False)
    def run():
        return loops.greedy(stepper, source, 24, tf.fill([4], 24), IDS,
                            choose=lambda masked, t: tf.argmax(masked, -1, output_type=tf.int32))

    run()
    assert {r for r, _ in record} == {4}, record


def test_kept_slots_are_the_live_ones_first_padded_to_a_power_of_two():
    done = tf.constant([True, False, True, True, False, True, False, True, True, True])
    np.testing.assert_array_equal(segments._kept_slots(done), [1, 4, 6, 0])
    np.testing.assert_array_equal(segments._kept_slots(tf.constant([True, False])), [1])
    # More than half live: every slot, in its place.
    np.testing.assert_array_equal(segments._kept_slots(tf.constant([False, True, False])),
                                  [0, 1, 2])


def test_has_context_names_the_steppers_that_shed_rows():
    assert decode_steps.has_context(EndsAtItsLength([]))
    for stepper_class in (decode_steps.TransformerStep, decode_steps.RNNSearchStep,
                          decode_steps.IncrementalDecoder, decode_steps.FullModelStep):
        assert all(isinstance(name, str) for name in stepper_class.CONTEXT)


def _candidates(kind, rng, shape):
    """Beam candidates `(B, K·V)`: distinct values, many ties, or rows of NEG and -inf with
    a few live ones (a beam with ended hypotheses; the padding id's column)."""
    if kind == "normal":
        return rng.normal(size=shape).astype(np.float32)
    if kind == "ties":
        return rng.integers(0, 3, size=shape).astype(np.float32)
    values = np.where(rng.random(shape) < 0.5, -1e9, -np.inf).astype(np.float32)
    values[:, rng.integers(0, shape[1], 3)] = rng.integers(-2, 0, 3)
    return values


@pytest.mark.parametrize("jit", [False, True], ids=["graph", "xla"])
@pytest.mark.parametrize("kind", ["normal", "ties", "dead"])
@pytest.mark.parametrize("size,k", [(4 * 8000, 4), (3 * 1001, 6), (257, 1)])
def test_blocked_top_k_is_top_k(jit, kind, size, k):
    """The same values and indices as `tf.math.top_k`, ties in its order (the lower index
    first), with the last block padded, in a graph and under XLA."""
    candidates = tf.constant(_candidates(kind, np.random.default_rng(size + k), (5, size)))
    blocked = tf.function(lambda x: search_steps.blocked_top_k(x, k, block=32),
                          jit_compile=jit)(candidates)
    values, indices = tf.math.top_k(candidates, k=k)
    np.testing.assert_array_equal(blocked[0].numpy(), values.numpy())
    np.testing.assert_array_equal(blocked[1].numpy(), indices.numpy())
