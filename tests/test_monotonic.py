"""Monotonic attention (Raffel et al., 2017) and MoChA (Chiu & Raffel, 2018): the functions of
`keras_attention.monotonic_alignment` and `ka.MonotonicAttention` against numpy loops of the
papers' recurrences with the layer's own weights, its hard decoding
(monotone, online, equal to the expected alignment once the probabilities saturate), and RNNsearch
with `attention="monotonic"` / `"mocha"` (training, cached and uncached decoding, beam search, the
export).

The shared layer check of the layer runs in tests/test_layers.py.
"""

import keras
import numpy as np
import pytest
from keras import ops

import keras_attention as ka
import zoo
from keras_attention import monotonic_alignment
from keras_attention.layers import monotonic
from zoo import decode, seq2seq

import backends
from backends import to_numpy
from rnnsearch_checks import (  # pytest puts tests/ (no __init__.py) on sys.path
    check_export_serves_decoding,
    check_keras_round_trip,
    wide_rnnsearch,
)

B, S, DQ, DV, U = 3, 8, 5, 6, 7
MASK = np.array([[1] * S, [1] * 5 + [0] * (S - 5), [1] * 3 + [0] * (S - 3)], bool)


def _x(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype("float32")


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def np_alignment_recurrence(p, previous):
    """`α_j = p_j ((1 − p_{j-1}) α_{j-1} / p_{j-1} + α_{i-1,j})` (Raffel et al., eq. 10), a loop
    over every row of `(..., S)` (every p must be > 0)."""
    alignment = np.zeros(p.shape)
    for row in np.ndindex(p.shape[:-1]):
        for j in range(p.shape[-1]):
            carried = 0.0 if j == 0 else (1 - p[row][j - 1]) * alignment[row][j - 1] / p[row][j - 1]
            alignment[row][j] = p[row][j] * (carried + previous[row][j])
    return alignment


def np_alignment_sum(p, previous):
    """Eq. 9, `α_j = p_j Σ_{k≤j} α_{i-1,k} Π_{l=k}^{j-1} (1 − p_l)`: one row, any p in [0, 1]."""
    return np.array([p[j] * sum(previous[k] * np.prod(1 - p[k:j]) for k in range(j + 1))
                     for j in range(len(p))])


def np_chunkwise(alignment, energies, w, mask):
    """MoChA's `β_j = Σ_{k=j}^{j+w-1} α_k exp(u_j) / Σ_{l=k-w+1}^{k} exp(u_l)`, one row, the sums
    over real positions only."""
    length = len(alignment)
    e = np.where(mask, np.exp(energies - energies[mask].max()), 0.0)
    beta = np.zeros(length)
    for j in range(length):
        for k in range(j, min(j + w, length)):
            beta[j] += alignment[k] * e[j] / e[max(0, k - w + 1): k + 1].sum() if alignment[k] else 0
    return beta


def _weights(layer):
    return {w.path.split("/")[-1]: to_numpy(w).astype("float64") for w in layer.weights}


def np_energies(layer, query, value, mask, chunk=False):
    """`g vᵀ/‖v‖ tanh(W s + U h + b) + r` (or `v_cᵀ tanh(W_c s + U_c h + b_c)`) `(B, S)`."""
    w = _weights(layer)
    prefix = "chunk_" if chunk else ""
    hidden = np.tanh((query @ w[prefix + "query_kernel"])[:, None] + w[prefix + "bias"]
                     + value @ w[prefix + "key_kernel"])  # (B, S, U)
    if chunk:
        return hidden @ w["chunk_score_kernel"]
    v = w["score_kernel"]
    return w["score_scale"] * hidden @ (v / np.linalg.norm(v)) + w["score_bias"]


def _layer(chunk_size=None, seed=3, score_scale=None, score_bias=0.0, **options):
    """A built layer with wide random weights (varied energies around 0)."""
    layer = ka.MonotonicAttention(U, chunk_size=chunk_size, **options)
    value = _x(B, S, DV, seed=1)
    layer(_x(B, DQ), value, layer.initial_alignment(value))
    rng = np.random.default_rng(seed)
    for weight in layer.weights:
        weight.assign(rng.normal(0, 0.8, tuple(weight.shape)).astype("float32"))
    layer.score_scale.assign(2.0 if score_scale is None else score_scale)
    layer.score_bias.assign(score_bias)
    return layer, value


# === The expected alignment ===


def test_safe_cumprod_is_the_cumulative_product():
    x = np.random.default_rng(0).uniform(0.05, 1.0, (3, 9)).astype("float32")
    np.testing.assert_allclose(to_numpy(monotonic_alignment.safe_cumprod(x)), np.cumprod(x, -1),
                               rtol=1e-5)
    exclusive = np.concatenate([np.ones((3, 1)), np.cumprod(x, -1)[:, :-1]], -1)
    np.testing.assert_allclose(to_numpy(monotonic_alignment.safe_cumprod(x, exclusive=True)),
                               exclusive, rtol=1e-5)
    zero = np.array([[0.5, 0.0, 0.5]], "float32")  # a factor 0 counts as `tiny`: log stays finite
    product = to_numpy(monotonic_alignment.safe_cumprod(zero))
    _, (gradient,) = backends.gradients(
        lambda zero: ops.sum(monotonic_alignment.safe_cumprod(zero)), [zero])
    assert product[0, 0] == 0.5 and 0 <= np.max(product[0, 1:]) <= np.finfo("float32").tiny
    assert gradient is not None and np.all(np.isfinite(gradient))


def _probabilities_and_recurrence():
    """Choosing probabilities `(2, 4, 11)` in [0.05, 0.95], a previous alignment, and the
    alignment by the recurrence."""
    rng = np.random.default_rng(0)
    p = rng.uniform(0.05, 0.95, (2, 4, 11))
    previous = rng.random((2, 4, 11))
    previous /= previous.sum(-1, keepdims=True)
    expected = np_alignment_recurrence(p, previous)
    return p, previous, expected


@pytest.mark.parametrize("mode", ["prefix", "parallel", "recursive"])
def test_expected_alignment_matches_the_recurrence(mode):
    p, previous, expected = _probabilities_and_recurrence()
    actual = monotonic_alignment.monotonic_alignment(p.astype("float32"), previous.astype("float32"), mode)
    np.testing.assert_allclose(to_numpy(actual), expected, atol=2e-6)

    # Differentiable (the prefix scan, the training default, also in XLA).
    def loss(p, previous):
        return ops.sum(monotonic_alignment.monotonic_alignment(p, previous, mode) ** 2)

    inputs = (p.astype("float32"), previous.astype("float32"))
    runs = [backends.gradients(loss, inputs)]
    if mode == "prefix" and backends.BACKEND != "torch":  # PyTorch: no XLA here
        runs.append(backends.compiled_gradients(loss, inputs))
    for value, (gradient, _) in runs:
        np.testing.assert_allclose(value, np.sum(expected ** 2), rtol=1e-5)
        assert np.all(np.isfinite(gradient)) and np.any(gradient != 0)
    first = np.eye(11)[0]  # α_0 = δ_1: the head stops at j with probability p_j Π_{l<j} (1 − p_l)
    start = to_numpy(monotonic_alignment.monotonic_alignment(p[0, :1], first[None], mode))[0]
    np.testing.assert_allclose(start, p[0, 0] * np.concatenate([[1], np.cumprod(1 - p[0, 0])[:-1]]),
                               atol=2e-6)


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("mode", ["prefix", "parallel", "recursive"])
def test_expected_alignment_with_unknown_lengths(mode):
    """A TensorFlow graph traced for any batch and length (`input_signature`)."""
    import tensorflow as tf

    p, previous, expected = _probabilities_and_recurrence()
    # Unknown lengths (a tf.data pipeline's batches): the same, and differentiable (the prefix
    # scan, the training default, also in XLA).
    spec = tf.TensorSpec([None, None, None], tf.float32)

    def alignment_and_gradient(p, previous):
        with tf.GradientTape() as tape:
            tape.watch(p)
            alignment = monotonic_alignment.monotonic_alignment(p, previous, mode)
            loss = tf.reduce_sum(alignment ** 2)
        return alignment, tape.gradient(loss, p)

    for jit_compile in (False, True) if mode == "prefix" else (False,):
        compiled = tf.function(alignment_and_gradient, input_signature=[spec, spec],
                               jit_compile=jit_compile)
        dynamic, gradient = compiled(p.astype("float32"), previous.astype("float32"))
        np.testing.assert_allclose(dynamic, expected, atol=2e-6)
        gradient = np.asarray(gradient)
        assert np.all(np.isfinite(gradient)) and np.any(gradient != 0)


def test_closed_form_fails_where_the_products_underflow():
    """The closed form divides by `Π_{l<k} (1 − p_l)`: once that falls below its clip, the
    mass that starts at k is lost; the prefix scan and the recurrence stay exact."""
    p = np.array([[1.0, 0.0, 0.0, 1.0, 0.5]], "float32")
    previous = np.eye(5, dtype="float32")[[3]]  # the head stopped at position 3 last time
    expected = [[0, 0, 0, 1, 0]]
    for mode in ("prefix", "recursive"):
        np.testing.assert_array_equal(
            to_numpy(monotonic_alignment.monotonic_alignment(p, previous, mode)), expected)
    # The mass is lost: 1 becomes float32's smallest normal number / CLIP_DIVISOR at most
    # (exactly 0 where subnormal numbers flush to zero, as in TensorFlow's kernels and XLA's;
    # PyTorch keeps exp(log(tiny)), just under tiny, and gets 1.2e-28).
    lost = to_numpy(monotonic_alignment.monotonic_alignment(p, previous, "parallel"))
    np.testing.assert_array_less(lost, np.finfo("float32").tiny / monotonic_alignment.CLIP_DIVISOR)
    np.testing.assert_array_equal(lost[0, [0, 1, 2, 4]], 0)
    rng = np.random.default_rng(0)
    p = rng.uniform(0.05, 0.95, (16, 64)).astype("float32")
    previous = np.eye(64, dtype="float32")[rng.integers(32, 64, 16)]
    reference = np_alignment_recurrence(p.astype("float64"), previous)
    np.testing.assert_allclose(to_numpy(monotonic_alignment.monotonic_alignment(p, previous)),
                               reference, atol=1e-6)
    parallel = to_numpy(monotonic_alignment.monotonic_alignment(p, previous, "parallel"))
    error = np.abs(parallel - reference).max()
    assert error > 0.5


def test_layer_trains_on_the_expected_alignment_step_after_step():
    """`training=True` without noise: each step's α and context are the numpy recurrence on the
    layer's own energies, fed the previous step's α; padding gets p = 0."""
    layer, value = _layer(sigmoid_noise=0.0, score_bias=-0.5)
    previous = to_numpy(layer.initial_alignment(value)).astype("float64")
    np.testing.assert_array_equal(previous, np.eye(S)[[0, 0, 0]])
    for step in range(4):
        query = _x(B, DQ, seed=10 + step)
        context, alignment = map(to_numpy, layer(query, value, previous.astype("float32"),
                                                 value_mask=MASK, training=True,
                                                 return_attention_scores=True))
        p = np.where(MASK, _sigmoid(np_energies(layer, query, value, MASK)), 0.0)
        expected = np.stack([np_alignment_sum(p[b], previous[b]) for b in range(B)])
        np.testing.assert_allclose(alignment, expected, atol=1e-5)
        np.testing.assert_allclose(context, np.einsum("bs,bsd->bd", expected, value), atol=1e-5)
        assert np.all(alignment[~MASK] == 0)
        previous = expected
    assert 0 < previous.sum(-1).min() and previous.sum(-1).max() < 0.99  # mass runs off the end


def test_sigmoid_noise_only_in_training():
    layer, value = _layer(sigmoid_noise=1.0, seed=5)
    query, previous = _x(B, DQ, seed=2), to_numpy(layer.initial_alignment(value))
    first = to_numpy(layer(query, value, previous, mode="prefix"))
    np.testing.assert_array_equal(first, to_numpy(layer(query, value, previous, mode="prefix")))
    noisy = [to_numpy(layer(query, value, previous, training=True)) for _ in range(2)]
    assert np.abs(noisy[0] - first).max() > 1e-3 and np.abs(noisy[0] - noisy[1]).max() > 1e-3


def test_given_noise_is_the_pre_sigmoid_noise():
    """`noise=` (what a recurrence under ops.scan draws before its loop) is added to the
    energies, scaled by `sigmoid_noise`: α from sigmoid(e + σ N), against numpy."""
    layer, value = _layer(sigmoid_noise=0.5, seed=5)
    query, previous = _x(B, DQ, seed=2), to_numpy(layer.initial_alignment(value))
    noise = np.random.default_rng(8).standard_normal((B, S)).astype("float32")
    _, alpha = map(to_numpy, layer(query, value, previous, value_mask=MASK, training=True,
                                   noise=noise, return_alignment=True))
    p = np.where(MASK, _sigmoid(np_energies(layer, query, value, MASK) + 0.5 * noise), 0.0)
    np.testing.assert_allclose(alpha, [np_alignment_sum(p[b], previous[b]) for b in range(B)],
                               atol=1e-5)


@pytest.mark.parametrize("chunk_size", [1, 3])
def test_mocha_expected_weights_match_the_paper(chunk_size):
    """MoChA's β (Chiu & Raffel, eq. 20) from the layer's α and chunk energies, against a numpy
    loop; w = 1 is monotonic attention itself."""
    layer, value = _layer(chunk_size=chunk_size, sigmoid_noise=0.0, seed=7)
    query = _x(B, DQ, seed=4)
    previous = np.abs(_x(B, S, seed=5)) * MASK
    previous /= previous.sum(-1, keepdims=True)
    context, beta, alpha = map(to_numpy, layer(query, value, previous, value_mask=MASK,
                                               training=True, return_attention_scores=True,
                                               return_alignment=True))
    p = np.where(MASK, _sigmoid(np_energies(layer, query, value, MASK)), 0.0)
    np.testing.assert_allclose(alpha, [np_alignment_sum(p[b], previous[b]) for b in range(B)],
                               atol=1e-5)
    u = np_energies(layer, query, value, MASK, chunk=True)
    expected = np.stack([np_chunkwise(alpha[b].astype("float64"), u[b], chunk_size, MASK[b])
                         for b in range(B)])
    np.testing.assert_allclose(beta, expected, atol=1e-5)
    np.testing.assert_allclose(context, np.einsum("bs,bsd->bd", expected, value), atol=1e-5)
    # β only moves α's mass within chunks: the totals agree.
    np.testing.assert_allclose(np.sum(beta, -1), np.sum(alpha, -1), atol=1e-5)
    if chunk_size == 1:
        np.testing.assert_allclose(beta, alpha, atol=1e-6)


# === Hard (inference) decoding ===


def _hard_steps(layer, value, steps, mask=MASK, seed=20, previous=None):
    """Online steps from `α_0`: the per-step (context, weights, α), checked against `mode="hard"`
    (every energy computed) at each step."""
    previous = layer.initial_alignment(value) if previous is None else previous
    outputs = []
    for step in range(steps):
        query = _x(B, DQ, seed=seed + step)
        online = layer(query, value, previous, value_mask=mask, return_attention_scores=True,
                       return_alignment=True)
        hard = layer(query, value, previous, value_mask=mask, return_attention_scores=True,
                     return_alignment=True, mode="hard")
        for a, h in zip(online, hard):
            np.testing.assert_allclose(to_numpy(a), to_numpy(h), atol=1e-6)
        outputs.append([to_numpy(x) for x in online])
        previous = online[2]
    return outputs


@pytest.mark.parametrize("chunk_size", [None, 2])
def test_hard_attention_never_moves_back(chunk_size):
    layer, value = _layer(chunk_size=chunk_size, score_bias=-1.0, seed=11)
    outputs = _hard_steps(layer, value, steps=10)
    alignments = np.stack([alignment for _, _, alignment in outputs], 1)  # (B, T, S)
    assert set(np.unique(alignments)) <= {0.0, 1.0} and alignments.sum(-1).max() <= 1
    stopped = alignments.sum(-1) == 1
    positions = np.where(stopped, alignments.argmax(-1), S)  # S: the head has left
    assert np.all(np.diff(positions, axis=1) >= 0), positions
    assert not alignments[~np.broadcast_to(MASK[:, None], alignments.shape)].any()
    assert len(np.unique(positions)) > 2, positions  # it moves, and not only to the end
    for context, weights, _ in outputs:
        np.testing.assert_allclose(context, np.einsum("bs,bsd->bd", weights, value), atol=1e-6)
    if chunk_size:  # the weights: a softmax over the chunk ending at the head, zero elsewhere
        for step, (_, weights, _) in enumerate(outputs):
            for b in range(B):
                if positions[b, step] < S:
                    t = positions[b, step]
                    np.testing.assert_allclose(weights[b].sum(), 1, atol=1e-6)
                    assert not weights[b, : max(0, t - 1)].any() and not weights[b, t + 1:].any()


def test_online_step_reads_only_from_the_previous_position_to_the_stop():
    """Changing the annotations before the previous position or after the stop position does
    not change an online step (plain monotonic attention: `c_i = h_{t_i}`)."""
    layer, value = _layer(score_bias=-1.0, seed=11)
    outputs = _hard_steps(layer, value, steps=4)
    previous, (context, _, alignment) = outputs[-2][2], outputs[-1]
    start = previous.argmax(-1)
    stop = np.where(alignment.sum(-1) == 1, alignment.argmax(-1), S)
    changed = value.copy()
    for b in range(B):
        changed[b, : start[b]] = 100.0
        changed[b, stop[b] + 1:] = -100.0
    query = _x(B, DQ, seed=20 + 3)
    again = [to_numpy(x) for x in layer(query, changed, previous, value_mask=MASK,
                                        return_alignment=True)]
    np.testing.assert_array_equal(again[1], alignment)
    np.testing.assert_allclose(again[0], context, atol=1e-6)


@pytest.mark.parametrize("chunk_size", [None, 3])
def test_saturated_probabilities_make_soft_and_hard_agree(chunk_size):
    """With every |e| large (a large g), σ(e) is 0 or 1 in float32: the expected alignment of
    training (no noise) and hard decoding give the same alignments and contexts, step by step."""
    layer, value = _layer(chunk_size=chunk_size, score_scale=1e4, score_bias=-3.0, seed=3,
                          sigmoid_noise=0.0)
    hard = _hard_steps(layer, value, steps=6)
    previous = layer.initial_alignment(value)
    for step in range(6):
        query = _x(B, DQ, seed=20 + step)
        energies = np_energies(layer, query, value, MASK)
        assert np.abs(energies[MASK]).min() > 20  # saturated: σ is 0 or 1 in float32
        soft = layer(query, value, previous, value_mask=MASK, training=True,
                     return_attention_scores=True, return_alignment=True)
        for s, h in zip(soft, hard[step]):
            np.testing.assert_allclose(to_numpy(s), h, atol=1e-5)
        previous = soft[2]
    alignments = np.stack([h[2] for h in hard], 1)  # (B, T, S)
    positions = np.where(alignments.sum(-1) > 0, alignments.argmax(-1), S)
    assert len(np.unique(positions)) > 2, positions  # the head moves, and leaves


def test_sequence_of_queries_is_hard_at_inference():
    """T queries at once (each with its own previous alignment) equal T single steps."""
    layer, value = _layer(chunk_size=2, score_bias=-1.0, seed=11)
    outputs = _hard_steps(layer, value, steps=5)
    queries = np.stack([_x(B, DQ, seed=20 + t) for t in range(5)], 1)
    previous = np.stack([to_numpy(layer.initial_alignment(value))]
                        + [alignment for _, _, alignment in outputs[:-1]], 1)
    context, weights = map(to_numpy, layer(queries, value, previous, value_mask=MASK,
                                           return_attention_scores=True))
    np.testing.assert_allclose(context, np.stack([c for c, _, _ in outputs], 1), atol=1e-6)
    np.testing.assert_allclose(weights, np.stack([w for _, w, _ in outputs], 1), atol=1e-6)
    with pytest.raises(ValueError, match="online"):
        layer(queries, value, previous, mode="online")


def test_weights_keep_the_order_of_saved_files():
    """A `.keras` file lists the variables by position: MonotonicAttention's have kept these
    names, shapes and this order since files were first saved (`bias` and `score_kernel`
    are both `(U,)`: swapped, an old file would load without error and compute wrongly)."""
    layer, _ = _layer(chunk_size=2)
    expected = [("query_kernel", (DQ, U)), ("key_kernel", (DV, U)), ("bias", (U,)),
                ("score_kernel", (U,)), ("score_scale", ()), ("score_bias", ())]
    expected += [("chunk_" + name, shape) for name, shape in expected[:4]]
    assert [(w.path.split("/")[-1], tuple(w.shape)) for w in layer.weights] == expected


def test_alignment_functions_are_still_importable_from_the_layer_module():
    for name in ("safe_cumprod", "monotonic_alignment", "chunkwise_weights", "CLIP_DIVISOR"):
        assert getattr(monotonic, name) is getattr(monotonic_alignment, name)
    assert monotonic.MODES == monotonic_alignment.MODES + ("online",)


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="chunk_size"):
        ka.MonotonicAttention(4, chunk_size=0)
    with pytest.raises(ValueError, match="sigmoid_noise"):
        ka.MonotonicAttention(4, sigmoid_noise=-1.0)
    layer, value = _layer()
    with pytest.raises(ValueError, match="mode"):
        layer(_x(B, DQ), value, layer.initial_alignment(value), mode="soft")
    with pytest.raises(ValueError, match="previous_alignment"):
        layer(_x(B, DQ), value, np.zeros((B, 2, S), "float32"))


# === RNNsearch with monotonic attention ===

V = 16
SIZES = dict(vocabulary_size=V, embedding_dim=8, encoder_units=8, decoder_units=8,
             attention_units=8, maxout_units=4)


def _rnnsearch(attention, **options):
    model = wide_rnnsearch(2, attention=attention, **SIZES, **options)
    model.get_layer("decoder").attention.score_bias.assign(0.0)
    return model


@pytest.fixture(scope="module")
def models():
    return {"monotonic": _rnnsearch("monotonic"), "mocha": _rnnsearch("mocha", mocha_chunk_size=2)}


def _source():
    return np.array([[5, 6, 7, 8, 9, 3], [4, 11, 3, 0, 0, 0], [12, 13, 14, 15, 3, 0]], "int32")


def test_parameter_counts_match_the_configs(models):
    additive = zoo.config("seq2seq-bahdanau-small", **SIZES).num_params()
    for attention, model in models.items():
        config = zoo.config("seq2seq-bahdanau-small", attention=attention, **SIZES,
                            **({"mocha_chunk_size": 2} if attention == "mocha" else {}))
        assert model.count_params() == config.num_params()
        assert isinstance(model.get_layer("decoder").attention, ka.MonotonicAttention)
    # b, g and r; then MoChA's chunk energy W_c (8×8), U_c (16×8), b_c and v_c.
    assert zoo.config("seq2seq-bahdanau-small", attention="monotonic", **SIZES).num_params() \
        - additive == 8 + 2
    assert zoo.config("seq2seq-bahdanau-small", attention="mocha", **SIZES).num_params() \
        - additive == 8 + 2 + 64 + 128 + 16


@pytest.mark.large
@pytest.mark.tensorflow_only
@pytest.mark.parametrize("attention", ["monotonic", "mocha"])
def test_cached_steps_and_greedy_match_the_full_model(attention, models):
    """The cached step (online hard attention, α in the state) gives the full model's logits at
    inference, and cached greedy decoding equals uncached, token for token (zoo.decode: a
    TensorFlow loop)."""
    import tensorflow as tf

    model = models[attention]
    source = _source()
    target = np.array([[2, 7, 8, 9, 4, 5], [2, 12, 13, 14, 6, 6], [2, 4, 4, 9, 9, 10]], "int32")
    expected = np.asarray(model({"source": source, "target": target}, training=False))
    stepper = decode._stepper(model, use_cache=True)
    assert isinstance(stepper, decode._RNNSearchStep)
    state = stepper.prepare(tf.constant(source), 1, target.shape[1])
    positions = []
    for t in range(target.shape[1]):
        logits, state = stepper.step(tf.constant(target[:, t]), tf.constant(t), state)
        np.testing.assert_allclose(logits, expected[:, t], atol=1e-4)
        alignment = np.asarray(state[-1])
        positions.append(np.where(alignment.sum(-1) > 0, alignment.argmax(-1), 99))
    assert np.all(np.diff(np.stack(positions, 1), axis=1) >= 0)
    cached = decode.greedy_decode(model, source, max_length=9).numpy()
    uncached = decode.greedy_decode(model, source, max_length=9, use_cache=False).numpy()
    np.testing.assert_array_equal(cached, uncached)
    assert len(np.unique(cached)) > 2
    beam, _ = decode.beam_search(model, source, beam_size=1, alpha=0.0, max_length=9)
    np.testing.assert_array_equal(beam, cached)


@pytest.fixture(scope="module")
def trained_mocha():
    """A MoChA RNNsearch after three training steps (expected alignments with noise) on a copy
    task: `(model, losses, source, inputs)`."""
    keras.utils.set_random_seed(0)
    model = zoo.get("seq2seq-bahdanau-small", attention="mocha", compile=False, **SIZES)
    rng = np.random.default_rng(0)
    source = rng.integers(4, V, (32, 6)).astype("int32")
    target = np.concatenate([source[:, :5], np.full((32, 1), 3)], 1).astype("int32")  # a copy
    inputs = {"source": source,
              "target": np.concatenate([np.full((32, 1), 2), target[:, :-1]], 1).astype("int32")}
    optimizer, loss = keras.optimizers.Adam(0.01), ka.MaskedSparseCategoricalCrossentropy()
    if backends.BACKEND == "jax":  # one compiled train step, where each backends.gradients call compiles
        model.compile(optimizer=optimizer, loss=loss)
        return model, [model.train_on_batch(inputs, target) for _ in range(3)], source, inputs
    losses = []
    for _ in range(3):  # single steps: quicker here than compiling `fit`'s train step
        value, gradients = backends.gradients(
            lambda: loss(target, model(inputs, training=True)), (), model.trainable_weights)
        losses.append(value)
        optimizer.apply([ops.convert_to_tensor(g) for g in gradients], model.trainable_weights)
    return model, losses, source, inputs


@pytest.mark.large
def test_rnnsearch_trains_and_round_trips(trained_mocha, tmp_path):
    """Three training steps lower the loss; the `.keras` file loads back as MoChA with the
    same outputs."""
    model, losses, _, inputs = trained_mocha
    assert np.all(np.isfinite(losses)) and losses[2] < losses[1] < losses[0]
    model.save(tmp_path / "mocha.keras")
    loaded = keras.saving.load_model(tmp_path / "mocha.keras")
    decoder = loaded.get_layer("decoder")
    assert decoder.attention_type == "mocha" and decoder.attention.chunk_size == 3
    np.testing.assert_array_equal(to_numpy(loaded(inputs, training=False)),
                                  to_numpy(model(inputs, training=False)))


@pytest.mark.tensorflow_only
def test_trained_rnnsearch_decodes_the_same_after_a_keras_file(trained_mocha, tmp_path):
    """The `.keras` file of the trained MoChA RNNsearch greedy-decodes as the model does
    (zoo.decode: a TensorFlow loop)."""
    model, _, source, _ = trained_mocha
    loaded = check_keras_round_trip(model, tmp_path / "mocha.keras", source[:4], max_length=7)
    assert loaded.get_layer("decoder").attention_type == "mocha"


def test_decoder_config_round_trip_and_old_configs():
    decoder = seq2seq.BahdanauDecoder(4, 3, attention="mocha", mocha_chunk_size=5,
                                      sigmoid_noise=0.5, score_bias_init=-2.0)
    clone = seq2seq.BahdanauDecoder.from_config(decoder.get_config())
    assert (clone.attention.chunk_size, clone.attention.sigmoid_noise,
            clone.attention.score_bias_init) == (5, 0.5, -2.0)
    old = seq2seq.BahdanauDecoder.from_config(dict(units=4, attention_units=3, cell="gru",
                                                   attention="location", name="decoder"))
    assert old.mocha_chunk_size == 3 and isinstance(old.attention, ka.LocationAwareAttention)
    with pytest.raises(ValueError, match="mocha_chunk_size"):
        zoo.config("seq2seq-bahdanau-small", attention="mocha", mocha_chunk_size=0)


@pytest.mark.large
@pytest.mark.tensorflow_only
def test_export_serves_what_decoding_gives(models, tmp_path):
    """The SavedModel of a MoChA RNNsearch: its beam and greedy signatures equal in-process
    decoding."""
    check_export_serves_decoding(models["mocha"], tmp_path / "served", V)
