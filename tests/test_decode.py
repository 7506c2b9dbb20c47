"""Tests of decoding (`zoo/decode.py`) and the key/value cache of the attention layers.

References: the full model run on the whole prefix (uncached decoding and
teacher-forced logits), a numpy re-computation of the beam scores, a brute-force
search over every hypothesis of a tiny vocabulary, each row decoded alone.
Models are tiny with random weights (drawn wider than the default initialisers,
so that the greedy tokens vary): argmax tokens are still deterministic.
"""

import itertools
import weakref

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_attention as ka
import zoo
from zoo import decode

START, END, PAD = decode.START_ID, decode.END_ID, decode.PAD_ID
V = 16
TRANSFORMER = dict(
    num_encoder_layers=1, num_decoder_layers=2, d_model=32, num_heads=4, intermediate_dim=64,
    vocabulary_size=V, max_length=64,
)
TRANSFORMERS = {
    "post_norm_tied": TRANSFORMER,
    "pre_norm_untied_learned": dict(
        TRANSFORMER, norm_first=True, source_vocabulary_size=20, target_vocabulary_size=V,
        tie_embeddings=False, positional="learned",
    ),
}
RNNSEARCH = dict(
    vocabulary_size=V, embedding_dim=16, encoder_units=16, decoder_units=16, attention_units=16,
    maxout_units=8,
)


def randomize(model, seed, scale=2.0):
    """Redraw every matrix with a wider normal (std scale/√fan-in) so the outputs vary."""
    rng = np.random.default_rng(seed)
    for weight in model.weights:
        shape = tuple(weight.shape)
        if len(shape) >= 2:
            fan_in = shape[-1] if "embedding" in weight.path else shape[0]
            weight.assign(rng.normal(0.0, scale / np.sqrt(fan_in), shape).astype("float32"))
    return model


def transformer(kind="post_norm_tied", **overrides):
    config = dict(TRANSFORMERS[kind], **overrides)
    return randomize(zoo.get("transformer-tiny", compile=False, **config), seed=1)


def rnnsearch(cell="gru", **overrides):
    config = dict(RNNSEARCH, cell=cell, **overrides)
    return randomize(zoo.get("seq2seq-bahdanau-small", compile=False, **config), 2)


@pytest.fixture(scope="module")
def models():
    """Built once for the module: decoding traces are cached per model."""
    keras.utils.set_random_seed(0)
    return {
        "post_norm_tied": transformer("post_norm_tied"),
        "pre_norm_untied_learned": transformer("pre_norm_untied_learned"),
        "gru": rnnsearch("gru"),
        "lstm": rnnsearch("lstm"),
        # Location-aware attention: the decoding state also carries α_{t-1}.
        "location": rnnsearch("gru", attention="location", location_filters=4,
                              location_kernel_size=5),
    }


def padded_source(rng, lengths, width=None, vocabulary=V):
    """Rows of random ids 4..V-1 (no [START]/[END]) padded with 0 to `width`."""
    width = width or max(lengths)
    source = np.zeros((len(lengths), width), "int32")
    for row, length in enumerate(lengths):
        source[row, :length] = rng.integers(4, vocabulary, size=length)
    return source


SOURCE_LENGTHS = [7, 4, 1, 6, 7]


def full_log_probs(model, source, tokens):
    """log p(y_t | y_<t, x) `(B, L, V)` from the full model, teacher-forced on `tokens`."""
    target = np.concatenate([np.full((len(tokens), 1), START), tokens[:, :-1]], axis=1)
    logits = model({"source": source, "target": target.astype("int32")}, training=False)
    logits = np.asarray(logits, "float64")
    logits -= logits.max(-1, keepdims=True)
    return logits - np.log(np.exp(logits).sum(-1, keepdims=True))


def output_length(row, end_id=END):
    """Tokens generated in a decoded row, [END] included."""
    ends = np.flatnonzero(row == end_id)
    return int(ends[0]) + 1 if len(ends) else int(np.count_nonzero(row))


def numpy_scores(model, source, tokens, alpha, end_id=END):
    """Σ_t log p(y_t | y_<t, x) / ((5 + |y|) / 6)^α for each decoded row (numpy)."""
    log_probs = full_log_probs(model, source, tokens)
    scores = []
    for row, lp in zip(tokens, log_probs):
        n = output_length(row, end_id)
        total = sum(lp[t, row[t]] for t in range(n))
        scores.append(total / ((5.0 + n) / 6.0) ** alpha)
    return np.array(scores)


def check_layout(tokens, end_id=END):
    """[END] kept, zeros after it, no padding id before it."""
    for row in tokens:
        n = output_length(row, end_id)
        assert np.all(row[:n] != 0), row
        assert np.all(row[n:] == 0), row


def pick_end_id(tokens):
    """The id that, used as [END], makes the rows of `tokens` end at the most varied
    places (some mid-sequence, some never): random models have no [END] of their own."""

    def stops(candidate):
        return {
            int(np.flatnonzero(row == candidate)[0]) if candidate in row else -1
            for row in tokens
        }

    candidates = sorted(set(tokens.ravel().tolist()) - {0, START})
    best = max(candidates, key=lambda c: (-1 in stops(c), len(stops(c)), max(stops(c))))
    assert len(stops(best)) > 1, f"the random model is too degenerate for this test:\n{tokens}"
    return best


# === The cache in the layers ===


@pytest.mark.parametrize("scoring", ["scaled_dot", "additive"])
def test_attention_cache_matches_causal_self_attention(scoring, rng):
    layer = ka.MultiHeadAttention(2, 4, scoring=scoring)
    x = rng.normal(size=(3, 5, 8)).astype("float32")
    full = layer(x, x, use_causal_mask=True)
    keys, values = layer.empty_cache(3, 7)
    outputs = []
    for start, stop in [(0, 2), (2, 3), (3, 5)]:  # a prefill of 2, then one by one
        out, keys, values = layer.call_with_cache(x[:, start:stop], keys, values, cache_index=start)
        outputs.append(out)
    np.testing.assert_allclose(np.concatenate(outputs, 1), full, atol=1e-5)
    # Positions 5 and 6 of the buffers were never written.
    np.testing.assert_array_equal(np.asarray(values)[:, :, 5:], 0.0)


def test_attention_cache_for_cross_attention(rng):
    layer = ka.MultiHeadAttention(2, 4)
    query = rng.normal(size=(2, 3, 8)).astype("float32")
    memory = rng.normal(size=(2, 6, 8)).astype("float32")
    mask = np.array([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]], bool)
    full = layer(query, memory, value_mask=mask)
    keys, values = layer.compute_key_value(memory)
    out, keys_after, _ = layer.call_with_cache(query, keys, values, value_mask=mask)
    np.testing.assert_allclose(out, full, atol=1e-5)
    np.testing.assert_array_equal(keys_after, keys)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_norm", "pre_norm"])
def test_decoder_block_cache_matches_call(norm_first, rng):
    block = ka.TransformerDecoderBlock(2, 16, norm_first=norm_first)
    y = rng.normal(size=(3, 5, 8)).astype("float32")
    x = rng.normal(size=(3, 4, 8)).astype("float32")
    encoder_mask = np.array([[1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0]], bool)
    full = block(y, x, encoder_padding_mask=encoder_mask)
    cache = block.empty_self_attention_cache(3, 5)
    cross = block.compute_cross_attention_cache(x)
    steps = []
    for t in range(5):
        out, cache = block.call_with_cache(y[:, t : t + 1], cache, t, cross, encoder_mask)
        steps.append(out)
    np.testing.assert_allclose(np.concatenate(steps, 1), full, atol=1e-5)
    with pytest.raises(ValueError, match="cross_attention_cache"):
        block.call_with_cache(y[:, :1], cache, 0)


# === Greedy decoding ===


@pytest.mark.parametrize(
    "kind", ["post_norm_tied", "pre_norm_untied_learned", "gru", "lstm", "location"]
)
def test_cached_step_logits_match_full_model(kind, models, rng):
    """One cached step at a time along a fixed target gives the full model's logits."""
    model = models[kind]
    source = padded_source(rng, SOURCE_LENGTHS)
    target = np.concatenate(
        [np.full((5, 1), START), rng.integers(1, V, size=(5, 7))], axis=1
    ).astype("int32")
    expected = np.asarray(model({"source": source, "target": target}, training=False))
    stepper = decode._stepper(model, use_cache=True)
    assert not isinstance(stepper, decode._FullModelStep)
    state = stepper.prepare(tf.constant(source), 1, target.shape[1])
    for t in range(target.shape[1]):
        logits, state = stepper.step(tf.constant(target[:, t]), tf.constant(t), state)
        np.testing.assert_allclose(logits, expected[:, t], atol=2e-4, rtol=1e-4)


# One Transformer and two RNNs: every model's cached step is checked against the full
# model in test_cached_step_logits_match_full_model.
@pytest.mark.parametrize("kind", ["pre_norm_untied_learned", "lstm", "location"])
def test_cached_greedy_equals_uncached(kind, models, rng):
    model = models[kind]
    source = padded_source(rng, SOURCE_LENGTHS)
    first = decode.greedy_decode(model, source, max_length=9).numpy()
    end_id = pick_end_id(first)
    cached = decode.greedy_decode(model, source, end_id=end_id).numpy()
    uncached = decode.greedy_decode(model, source, end_id=end_id, use_cache=False).numpy()
    np.testing.assert_array_equal(cached, uncached)
    assert cached.shape == (5, 7 + 50)
    check_layout(cached, end_id)
    lengths = [output_length(row, end_id) for row in cached]
    assert min(lengths) < 50 and max(lengths) > 2, lengths  # some end early, some go on
    # Without [END] each row stops at its own source length + 50.
    for row, source_length in zip(cached, SOURCE_LENGTHS):
        if end_id not in row:
            assert output_length(row, end_id) == source_length + 50


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_rnnsearch_greedy_reproduces_teacher_forced_argmax(cell, models, rng):
    """Fed back as the target, the greedy output is the full model's argmax everywhere."""
    model = models[cell]
    source = padded_source(rng, SOURCE_LENGTHS)
    tokens = decode.greedy_decode(model, source, max_length=12).numpy()
    log_probs = full_log_probs(model, source, tokens)
    log_probs[..., 0] = -np.inf  # padding is never generated
    for row, lp in zip(tokens, log_probs):
        n = output_length(row)
        np.testing.assert_array_equal(row[:n], lp[:n].argmax(-1))


# === Beam search ===


@pytest.mark.parametrize("kind", ["post_norm_tied", "gru"])
def test_beam_size_one_is_greedy_and_scores_match_numpy(kind, models, rng):
    model = models[kind]
    source = padded_source(rng, SOURCE_LENGTHS)
    greedy = decode.greedy_decode(model, source, max_length=10)
    tokens, scores = decode.beam_search(model, source, beam_size=1, alpha=0.6, max_length=10)
    np.testing.assert_array_equal(tokens, greedy)
    np.testing.assert_allclose(scores, numpy_scores(model, source, greedy.numpy(), 0.6), atol=1e-4)


# Each model once, graph or XLA: the scoring lines are the same for every model.
@pytest.mark.large
@pytest.mark.parametrize(
    "kind, jit_compile",
    [("pre_norm_untied_learned", False), ("gru", True), ("location", False)],
    ids=["pre_norm_untied_learned-graph", "gru-xla", "location-graph"],
)
def test_greedy_score_is_the_sum_of_the_chosen_log_probs(kind, jit_compile, models, rng):
    model = models[kind]
    source = padded_source(rng, SOURCE_LENGTHS)
    end = pick_end_id(decode.greedy_decode(model, source, max_length=10).numpy())
    tokens, scores = decode.greedy_decode(model, source, max_length=10, end_id=end,
                                          return_score=True, jit_compile=jit_compile)
    np.testing.assert_array_equal(tokens, decode.greedy_decode(model, source, max_length=10,
                                                               end_id=end))
    check_layout(tokens.numpy(), end)
    np.testing.assert_allclose(scores, numpy_scores(model, source, tokens.numpy(), 0.0, end),
                               atol=1e-4)
    # With the last step forced to [END], its log-probability counts like any other.
    forced, forced_scores = decode.greedy_decode(model, source, max_length=3, end_id=end,
                                                 force_end=True, return_score=True)
    np.testing.assert_allclose(
        forced_scores, numpy_scores(model, source, forced.numpy(), 0.0, end), atol=1e-4)


# Each model once, with and without the length penalty between them.
@pytest.mark.parametrize(
    "kind, alpha", [("pre_norm_untied_learned", 0.6), ("lstm", 0.0), ("location", 0.6)]
)
def test_beam_scores_match_numpy_and_beat_greedy(kind, alpha, models, rng):
    model = models[kind]
    source = padded_source(rng, SOURCE_LENGTHS)
    end_id = pick_end_id(decode.greedy_decode(model, source, max_length=9).numpy())
    tokens, scores = decode.beam_search(
        model, source, beam_size=4, alpha=alpha, max_length=12, end_id=end_id
    )
    tokens = tokens.numpy()
    check_layout(tokens, end_id)
    np.testing.assert_allclose(
        scores, numpy_scores(model, source, tokens, alpha, end_id), atol=1e-4
    )
    # Not a theorem (a beam can prune the greedy path), but it holds here, and with
    # a wide enough beam it must (test_wide_beam_finds_the_best_hypothesis).
    greedy = decode.greedy_decode(model, source, max_length=12, end_id=end_id).numpy()
    greedy_scores = numpy_scores(model, source, greedy, alpha, end_id)
    assert np.all(scores.numpy() >= greedy_scores - 1e-5), (scores, greedy_scores)


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_wide_beam_finds_the_best_hypothesis(alpha, rng):
    """With a beam wider than the number of hypotheses, beam search is exhaustive:
    it must return the best-scoring of all sequences over the 5 usable ids of a
    6-id vocabulary of length <= 3 (ending at [END] or cut at the limit)."""
    model = randomize(zoo.get("transformer-tiny", compile=False, **dict(
        TRANSFORMER, vocabulary_size=6)), seed=3, scale=3.0)
    source = padded_source(rng, [5, 3], vocabulary=6)
    max_length = 3
    tokens, scores = decode.beam_search(
        model, source, beam_size=100, alpha=alpha, max_length=max_length
    )
    hypotheses = []
    for length in range(1, max_length + 1):
        for sequence in itertools.product(range(1, 6), repeat=length):
            if END in sequence[:-1] or (length < max_length and sequence[-1] != END):
                continue
            hypotheses.append(list(sequence) + [0] * (max_length - length))
    hypotheses = np.array(hypotheses, "int32")
    assert len(hypotheses) == 1 + 4 + 16 * 5  # [END]; y [END]; y y y (any last)
    for row in range(len(source)):
        repeated = np.repeat(source[row : row + 1], len(hypotheses), axis=0)
        all_scores = numpy_scores(model, repeated, hypotheses, alpha)
        best = int(np.argmax(all_scores))
        np.testing.assert_array_equal(tokens[row], hypotheses[best])
        np.testing.assert_allclose(scores[row], all_scores[best], atol=1e-4)


# === Padding, batches, graphs, XLA, saved models ===


# A Transformer and an RNN whose state carries more than its cell (α_{t-1}); the other
# models share these lines (their cached steps are checked in test_cached_step_logits_...).
@pytest.mark.large
@pytest.mark.parametrize("kind", ["post_norm_tied", "location"])
def test_padded_batch_decodes_each_row_as_alone(kind, models, rng):
    """Rows of different lengths in one padded batch (encoder outputs repeated per
    beam) decode exactly as each row alone, unpadded, with the default max length."""
    model = models[kind]
    source = padded_source(rng, SOURCE_LENGTHS, width=9)
    greedy = decode.greedy_decode(model, source).numpy()
    beam, scores = decode.beam_search(model, source, beam_size=3)
    for row, length in enumerate(SOURCE_LENGTHS):
        alone = source[row : row + 1, :length]
        width = length + 50
        np.testing.assert_array_equal(greedy[row, :width], decode.greedy_decode(model, alone)[0])
        assert not greedy[row, width:].any()
        alone_beam, alone_score = decode.beam_search(model, alone, beam_size=3)
        np.testing.assert_array_equal(beam[row, :width], alone_beam[0])
        np.testing.assert_allclose(scores[row], alone_score[0], atol=1e-5)


@pytest.mark.large
def test_decoding_inside_tf_function_with_symbolic_source(models, rng):
    model = models["post_norm_tied"]
    source = padded_source(rng, SOURCE_LENGTHS)
    spec = tf.TensorSpec((None, None), tf.int32)

    @tf.function(input_signature=[spec, tf.TensorSpec((), tf.int32)])
    def decode_graph(source, max_length):
        greedy = decode.greedy_decode(model, source)  # default length, dynamic shape
        beam, scores = decode.beam_search(model, source, beam_size=2, max_length=max_length)
        return greedy, beam, scores

    # max_length 10: the eager reference reuses test_loaded_model_decodes_the_same's trace.
    greedy, beam, scores = decode_graph(tf.constant(source), tf.constant(10))
    np.testing.assert_array_equal(greedy, decode.greedy_decode(model, source))
    expected_beam, expected_scores = decode.beam_search(model, source, beam_size=2, max_length=10)
    np.testing.assert_array_equal(beam, expected_beam)
    np.testing.assert_allclose(scores, expected_scores, atol=1e-5)


@pytest.mark.large
def test_transformer_decoding_under_xla(models, rng):
    model = models["pre_norm_untied_learned"]
    source = tf.constant(padded_source(rng, SOURCE_LENGTHS))
    # max_length 9: the plain greedy reference reuses the trace of the tests above.
    greedy = decode.greedy_decode(model, source, max_length=9)
    beam, scores = decode.beam_search(model, source, beam_size=2, max_length=9)

    @tf.function(jit_compile=True)
    def compiled(source):
        return (
            decode.greedy_decode(model, source, max_length=9),
            *decode.beam_search(model, source, beam_size=2, max_length=9),
        )

    xla_greedy, xla_beam, xla_scores = compiled(source)
    np.testing.assert_array_equal(xla_greedy, greedy)
    np.testing.assert_array_equal(xla_beam, beam)
    np.testing.assert_allclose(xla_scores, scores, atol=1e-5)
    # The same through the keyword (its own XLA function, default max length).
    np.testing.assert_array_equal(
        decode.greedy_decode(model, source, jit_compile=True),
        decode.greedy_decode(model, source),
    )


@pytest.mark.large
@pytest.mark.parametrize("kind", ["post_norm_tied", "lstm"])
def test_loaded_model_decodes_the_same(kind, models, rng, tmp_path):
    model = models[kind]
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    source = padded_source(rng, SOURCE_LENGTHS)
    np.testing.assert_array_equal(
        decode.greedy_decode(loaded, source, max_length=10),
        decode.greedy_decode(model, source, max_length=10),
    )
    tokens, scores = decode.beam_search(loaded, source, beam_size=2, max_length=10)
    expected_tokens, expected_scores = decode.beam_search(model, source, beam_size=2, max_length=10)
    np.testing.assert_array_equal(tokens, expected_tokens)
    np.testing.assert_allclose(scores, expected_scores, atol=1e-5)


def test_bad_arguments(models):
    model = models["post_norm_tied"]
    source = np.array([[5, 6, 7]], "int32")
    for beam_size in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="beam_size"):
            decode.beam_search(model, source, beam_size=beam_size)
    for alpha in (-0.1, float("nan"), "0.6"):
        with pytest.raises(ValueError, match="alpha"):
            decode.beam_search(model, source, alpha=alpha)
    for search in (decode.greedy_decode, decode.beam_search):
        with pytest.raises(ValueError, match="source"):
            search(model, np.array([5, 6, 7], "int32"))
        with pytest.raises(ValueError, match="source"):
            search(model, np.array([[5.0, 6.0]]))
        with pytest.raises(ValueError, match="max_length"):
            search(model, source, max_length=0)
        with pytest.raises(ValueError, match="max_length"):
            search(model, source, max_length=tf.constant([3, 4]))
        with pytest.raises(ValueError, match="max_length"):
            search(model, source, max_length=tf.constant(4), jit_compile=True)
        with pytest.raises(ValueError, match="end_id"):
            search(model, source, end_id=0)
    learned = models["pre_norm_untied_learned"]  # 64 learned target positions
    with pytest.raises(ValueError, match="learned target positions"):
        decode.greedy_decode(learned, source, max_length=65)
    image_model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    with pytest.raises(ValueError, match="'source' and 'target'"):
        decode.greedy_decode(image_model, source)


def test_strip_special_takes_the_models_ids():
    # The zoo's ids (zoo.text.special): [PAD] = 0, [END] = 3.
    assert (PAD, END) == (0, 3)
    ids = np.array([[5, 6, END, 0], [7, 0, 8, 9], [0, 4, 0, 0]])
    assert decode.strip_special(ids) == [[5, 6], [7, 8, 9], [4]]
    assert decode.strip_special(ids, end_id=END, pad_id=PAD) == [[5, 6], [7, 8, 9], [4]]
    # Marian's (OPUS-MT): </s> = 0, padding = V - 1; 3 is an ordinary token there.
    pad, end = V - 1, 0
    ids = np.array([[5, 3, end, pad], [7, pad, 8, 3], [pad, pad, pad, pad]])
    assert decode.strip_special(ids, end_id=end, pad_id=pad) == [[5, 3], [7, 8, 3], []]
    with pytest.raises(ValueError, match="end_id"):
        decode.strip_special(ids, end_id=pad, pad_id=pad)


def test_learned_positions_hold_with_dynamic_shapes(models, rng):
    """A width known only when the graph runs is checked then (64 learned positions)."""
    model = models["pre_norm_untied_learned"]
    source = padded_source(rng, SOURCE_LENGTHS)

    specs = [tf.TensorSpec((None, None), tf.int32), tf.TensorSpec((), tf.int32)]

    @tf.function(input_signature=specs, autograph=False)
    def greedy(source, max_length):
        return decode.greedy_decode(model, source, max_length=max_length)

    np.testing.assert_array_equal(greedy(source, tf.constant(64)),
                                  decode.greedy_decode(model, source, max_length=64))
    with pytest.raises(tf.errors.InvalidArgumentError, match="64 learned target positions"):
        greedy(source, tf.constant(65))


@pytest.mark.large
def test_decoding_graphs_use_no_xla_only_ops(models):
    """TF Serving disables the XLA JIT on CPU, and ops such as XlaDynamicUpdateSlice
    (what `keras.ops.slice_update` becomes) need it even outside `jit_compile`."""
    spec = tf.TensorSpec((None, None), tf.int32)
    for kind in ("post_norm_tied", "gru"):
        model = models[kind]

        @tf.function(input_signature=[spec])
        def run(source, model=model):
            return decode.greedy_decode(model, source), decode.beam_search(model, source)[0]

        graph = run.get_concrete_function().graph.as_graph_def()
        op_types = {node.op for node in graph.node} | {
            node.op for function in graph.library.function for node in function.node_def
        }
        assert "While" in op_types or "StatelessWhile" in op_types  # the check sees the loops
        assert not {op for op in op_types if op.startswith("Xla")}, (kind, sorted(op_types))


# === Caches that grow (`zoo.decode.search_steps.growing_loop`) ===


def test_cache_widths_double_from_16_to_the_output():
    from zoo.decode import search_steps

    class Grows:
        def grow(self, state, width):
            return state

    assert search_steps.cache_widths(Grows(), 57) == [16, 32, 57]
    assert search_steps.cache_widths(Grows(), 64) == [16, 32, 64]
    assert search_steps.cache_widths(Grows(), 9) == [9]
    assert search_steps.cache_widths(object(), 57) == [57]  # a stepper without `grow`
    assert search_steps.cache_widths(Grows(), tf.constant(57)) is not None  # a tensor: one loop
    assert len(search_steps.cache_widths(Grows(), tf.constant(57))) == 1


@pytest.mark.parametrize("kind", ["post_norm_tied", "pre_norm_untied_learned"])
def test_growing_caches_decode_as_caches_of_the_whole_output(kind, models, rng, monkeypatch):
    """Greedy, GNMT beam and Hugging Face's beam over caches of 16, 32 and 57 positions give
    the ids (and scores) of caches of all 57 (the one loop before caches grew), eagerly
    traced and under XLA (whose bridge needs the loops nested: `growing_loop`)."""
    from zoo.decode import search_steps
    from zoo.decode import steps as decode_steps

    model = models[kind]
    source = tf.constant(padded_source(rng, SOURCE_LENGTHS))  # S 7: 57 output columns

    def decodings(jit_compile):
        return (decode.greedy_decode(model, source, jit_compile=jit_compile),
                *decode.beam_search(model, source, beam_size=3, jit_compile=jit_compile),
                *decode.beam_search(model, source, beam_size=2, length_penalty="hf",
                                    jit_compile=jit_compile))

    widths = []
    real_grow = decode_steps.TransformerStep.grow
    monkeypatch.setattr(decode_steps.TransformerStep, "grow",
                        lambda self, caches, width: widths.append(width) or real_grow(
                            self, caches, width))
    monkeypatch.setattr(decode, "_FUNCTIONS", weakref.WeakKeyDictionary())  # traced anew
    grown = decodings(False)
    xla = decodings(True)
    # Hugging Face's beam search has a loop per width (its 2 traces grew their caches
    # twice); greedy and GNMT beam search, XLA-compiled or not, grow them in their loop over
    # segments (`zoo.decode.segments`), traced once (4 traces), to a width it computes.
    assert [width for width in widths if isinstance(width, int)] == [32, 57] * 2, widths
    assert sum(tf.is_tensor(width) for width in widths) == 4, widths
    monkeypatch.setattr(search_steps, "FIRST_CACHE_WIDTH", 1000)  # one loop of 57
    monkeypatch.setattr(decode, "_FUNCTIONS", weakref.WeakKeyDictionary())
    widths.clear()
    whole = decodings(False)
    assert [width for width in widths if isinstance(width, int)] == []  # no cache grew
    for a, b, c in zip(grown, whole, xla):
        if a.dtype.is_floating:
            np.testing.assert_allclose(a, b, atol=1e-5)
            np.testing.assert_allclose(c, b, atol=1e-4)
        else:
            np.testing.assert_array_equal(a, b)
            np.testing.assert_array_equal(c, b)
    assert grown[0].shape[1] == 57 and (np.asarray(grown[0]) != 0).sum(axis=1).max() > 16
