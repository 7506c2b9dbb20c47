"""`ka.PointerGenerator` and `ka.PointerGeneratorCrossentropy` against NumPy re-implementations of
See, Liu & Manning (2017), eqs. 8-9 and 6, with repeated and out-of-vocabulary source tokens.

The shared layer check of the layer runs in tests/test_layers.py.
"""

import keras
import numpy as np
from keras import ops

import keras_attention as ka
from keras_attention.layers.pointer_generator import IMPOSSIBLE

import backends
from backends import to_numpy

B, T, S, V, F = 2, 3, 6, 7, 5
# Row 0: id 5 twice, OOV ids 7 (= V + 0) twice and 8 (= V + 1); row 1: padding at the end.
SOURCE = np.array([[5, 7, 5, 8, 3, 7], [7, 2, 7, 1, 3, 0]], "int32")


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((B, T, V)).astype("float32") * 3
    attention = rng.random((B, T, S)).astype("float32")
    attention[SOURCE[:, None, :].repeat(T, 1) == 0] = 0  # padding gets no attention
    attention /= attention.sum(-1, keepdims=True)
    features = rng.standard_normal((B, T, F)).astype("float32")
    return logits, attention, features


def np_pointer_generator(layer, logits, attention, source, features):
    """P(w) = p_gen P_vocab(w) + (1 - p_gen) Σ_{i: x_i = w} a_i, position by position."""
    w = to_numpy(layer.switch_kernel)[:, 0].astype("float64")
    b = float(to_numpy(layer.switch_bias)[0])
    p_gen = 1 / (1 + np.exp(-(features.astype("float64") @ w + b)))  # (B, T)
    shifted = np.exp(logits - logits.max(-1, keepdims=True))
    p_vocab = shifted / shifted.sum(-1, keepdims=True)
    probs = np.zeros(logits.shape[:2] + (V + source.shape[1],))
    for row in range(logits.shape[0]):
        for t in range(logits.shape[1]):
            probs[row, t, :V] = p_gen[row, t] * p_vocab[row, t]
            for i, token in enumerate(source[row]):
                probs[row, t, token] += (1 - p_gen[row, t]) * attention[row, t, i]
    return probs, p_gen


def test_mixture_matches_numpy_with_repeated_and_oov_tokens():
    logits, attention, features = _inputs()
    layer = ka.PointerGenerator(bias_initializer="ones")
    log_probs, p_gen = map(to_numpy, layer(logits, attention, SOURCE, features,
                                           return_switch=True))
    expected, expected_p_gen = np_pointer_generator(layer, logits, attention, SOURCE, features)
    assert log_probs.shape == (B, T, V + S)
    np.testing.assert_allclose(p_gen, expected_p_gen, rtol=1e-5)
    reached = expected > 0
    np.testing.assert_allclose(log_probs[reached], np.log(expected[reached]), atol=2e-5)
    # Extended ids that no source position holds (9 and up in row 0, 7 and up in row 1
    # but 7 itself) are impossible; each row's probabilities sum to 1.
    assert np.all(log_probs[~reached] == IMPOSSIBLE)
    assert reached[0, 0, V:].tolist() == [True, True] + [False] * (S - 2)
    np.testing.assert_allclose(np.exp(log_probs).sum(-1), 1.0, rtol=1e-5)
    # The repeated token 5 holds both of its positions' attention.
    copied = (1 - expected_p_gen[0, 0]) * (attention[0, 0, 0] + attention[0, 0, 2])
    generated = expected_p_gen[0, 0] * np.exp(logits[0, 0, 5]) / np.exp(logits[0, 0]).sum()
    np.testing.assert_allclose(np.exp(log_probs[0, 0, 5]), copied + generated, rtol=1e-5)


def test_one_step_equals_the_sequence():
    logits, attention, features = _inputs(seed=1)
    layer = ka.PointerGenerator()
    sequence = to_numpy(layer(logits, attention, SOURCE, features))
    for t in range(T):
        step = to_numpy(layer(logits[:, t], attention[:, t], SOURCE, features[:, t]))
        np.testing.assert_allclose(step, sequence[:, t], atol=1e-6)


def test_the_switch_saturated_gives_the_generator_or_the_copy_alone():
    logits, attention, features = _inputs(seed=2)
    generate = ka.PointerGenerator(kernel_initializer="zeros", bias_initializer=keras.initializers.Constant(40.0))
    log_probs = to_numpy(generate(logits, attention, SOURCE, features))
    np.testing.assert_allclose(log_probs[..., :V], to_numpy(ops.log_softmax(logits)), atol=1e-5)
    copy = ka.PointerGenerator(kernel_initializer="zeros", bias_initializer=keras.initializers.Constant(-40.0))
    copied = np.exp(to_numpy(copy(logits, attention, SOURCE, features)))
    expected, _ = np_pointer_generator(copy, logits, attention, SOURCE, features)
    np.testing.assert_allclose(copied, expected, atol=1e-6)


def test_gradients_are_finite_where_copy_and_generator_vanish():
    logits, attention, features = _inputs(seed=3)
    logits[0, 0, 0] = 80.0  # the generator's other words underflow
    attention[0, 0] = np.eye(S)[1]  # all attention on one position: copy mass 0 elsewhere
    layer = ka.PointerGenerator()
    layer(logits, attention, SOURCE, features)  # built: its weights exist

    def loss(logits, attention, features):
        log_probs = layer(logits, attention, SOURCE, features)
        return -ops.sum(ops.take(log_probs, np.array([1, 5, 8]), axis=-1))

    _, gradients = backends.gradients(loss, (logits, attention, features),
                                      layer.trainable_weights)
    for gradient in gradients:
        assert gradient is not None and np.all(np.isfinite(gradient))


def test_gradients_match_the_probability_space_formula():
    """Each id's log P written once: a repeated token's gradient is not counted twice."""
    logits, attention, features = _inputs(seed=5)
    layer = ka.PointerGenerator()
    layer(logits, attention, SOURCE, features)  # built: its weights exist
    chosen = np.array([5, 7, 3, 2, 1])  # 5 twice in row 0, 7 (out of vocabulary) twice in both rows

    def direct(logits, attention, features):
        p_gen = ops.sigmoid(ops.matmul(features, layer.switch_kernel) + layer.switch_bias)
        generated = ops.pad(ops.softmax(logits), [[0, 0], [0, 0], [0, S]])  # (B, T, V + S)
        copied = ops.matmul(attention, ops.one_hot(SOURCE, V + S))  # (B, T, V + S)
        probs = ops.take(p_gen * generated + (1 - p_gen) * copied, chosen, axis=-1)
        return ops.log(probs)  # (the log after the gather: no log 0 elsewhere)

    gradients = []
    for function in (lambda *x: ops.take(layer(x[0], x[1], SOURCE, x[2]), chosen, axis=-1),
                     direct):
        _, grads = backends.gradients(lambda *x, f=function: ops.sum(f(*x)),
                                      (logits, attention, features), layer.trainable_weights)
        gradients.append(grads)
    assert len(gradients[0]) == len(layer.trainable_weights) + 3
    for actual, expected in zip(*gradients, strict=True):
        np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5)


def np_mixture_nll(log_probs, labels, vocabulary, smoothing=0.0, pad_id=0):
    """The masked token mean of -(1 - ε) log P(y) - (ε / V) Σ_{w < V} log P(w)."""
    total, count = 0.0, 0
    for row in range(labels.shape[0]):
        for t in range(labels.shape[1]):
            if labels[row, t] == pad_id:
                continue
            nll = -log_probs[row, t, labels[row, t]]
            smooth = -log_probs[row, t, :vocabulary].mean()
            total += (1 - smoothing) * nll + smoothing * smooth
            count += 1
    return total / count


def test_loss_is_the_mixture_nll_with_oov_and_repeated_labels():
    logits, attention, features = _inputs(seed=4)
    layer = ka.PointerGenerator()
    log_probs = layer(logits, attention, SOURCE, features)
    # Row 0 targets: 7 (OOV, twice in the source), 5 (in the vocabulary and twice in the
    # source), 8 (OOV); row 1: 7 (OOV), 4 (the generator alone), then padding.
    labels = np.array([[7, 5, 8], [7, 4, 0]], "int32")
    reference = np_mixture_nll(to_numpy(log_probs).astype("float64"), labels, V)
    loss = ka.PointerGeneratorCrossentropy(vocabulary_size=V)
    np.testing.assert_allclose(float(to_numpy(loss(labels, log_probs))), reference, rtol=1e-5)
    expected, _ = np_pointer_generator(layer, logits, attention, SOURCE, features)
    by_hand = -np.mean([np.log(expected[0, 0, 7]), np.log(expected[0, 1, 5]),
                        np.log(expected[0, 2, 8]), np.log(expected[1, 0, 7]),
                        np.log(expected[1, 1, 4])])
    np.testing.assert_allclose(float(to_numpy(loss(labels, log_probs))), by_hand, rtol=1e-5)
    smoothed = ka.PointerGeneratorCrossentropy(vocabulary_size=V, label_smoothing=0.1)
    np.testing.assert_allclose(
        float(to_numpy(smoothed(labels, log_probs))),
        np_mixture_nll(to_numpy(log_probs).astype("float64"), labels, V, smoothing=0.1), rtol=1e-5,
    )


def test_loss_config_round_trip():
    loss = ka.PointerGeneratorCrossentropy(vocabulary_size=11, label_smoothing=0.2, pad_id=3)
    restored = keras.losses.deserialize(keras.losses.serialize(loss))
    assert isinstance(restored, ka.PointerGeneratorCrossentropy)
    assert restored.get_config() == loss.get_config()
    assert restored.vocabulary_size == 11 and restored.pad_id == 3
