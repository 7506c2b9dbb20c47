"""ConvS2S (`zoo/convs2s.py`, `zoo/convs2s_layers.py`): layers, a numpy forward pass, causality,
cached decoding and export.

References: a numpy re-implementation of the whole forward pass with the model's
weights; the model's own logits under perturbed later target tokens (causality)
and extra source padding; the full model's logits (cached decoding steps); a plain
Python arg-max loop over the model (greedy decoding, cached and not); log-probabilities recomputed from teacher-forced logits (beam
scores); a SavedModel served in a fresh process that never imports our code.
The registry-wide checks (golden count, forward/backward, training, `.keras`
round trip, mirrored strategy) are in tests/test_zoo.py.
"""

import math
import os
import pathlib
import pickle
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text

import zoo
from zoo import decode, families, text
from zoo.convs2s.layers import (
    ConvS2SDecoderBlock,
    ConvS2SEncoderBlock,
    GatedConvolution,
    MultiStepAttention,
    SourceKeysAndValues,
)

from layer_checks import run_layer_checks  # pytest puts tests/ (no __init__.py) on sys.path

START, END = decode.START_ID, decode.END_ID
B, T, S, D, F = 2, 5, 4, 6, 4
V = 16
TINY = dict(
    vocabulary_size=V, embedding_dim=8, hidden_dim=12, output_embedding_dim=6,
    num_encoder_layers=2, num_decoder_layers=2, max_length=32, dropout=0.0,
)
SOURCE = np.array([[5, 6, 7, 8, 3, 0], [9, 4, 3, 0, 0, 0], [12, 3, 0, 0, 0, 0]], "int32")


# TF Serving runs no Python: the export must load with TensorFlow and the text op libraries
# it links, without Keras, tensorflow_text's Python package or our code (as tests/test_export.py).
SERVE_SCRIPT = textwrap.dedent(
    """
    import pickle, sys
    BLOCKED = ("keras", "tf_keras", "tensorflow_text", "zoo", "keras_attention")
    for name in BLOCKED:
        sys.modules[name] = None
    import tensorflow as tf

    request = pickle.load(open(sys.argv[1], "rb"))
    for library in request["op_libraries"]:
        tf.load_op_library(library)
    loaded = tf.saved_model.load(request["path"])
    results = {s: {k: v.numpy() for k, v in loaded.signatures[s](text=tf.constant(request["texts"])).items()}
               for s in ("greedy", "serving_default")}
    imported = sorted(m for m, module in sys.modules.items()
                      if m.split(".")[0] in BLOCKED and module is not None)
    pickle.dump({"results": results, "imported": imported}, open(sys.argv[2], "wb"))
    """
)


def _x(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype("float32")


def _mask(lengths, width):
    return np.arange(width)[None, :] < np.array(lengths)[:, None]


def randomize(model, seed, scale=2.0):
    """Redraw every matrix wider (std scale/√fan-in) so that arg-max tokens vary."""
    rng = np.random.default_rng(seed)
    for weight in model.weights:
        shape = tuple(weight.shape)
        if len(shape) >= 2:
            fan_in = shape[-1] if "embedding" in weight.path else int(np.prod(shape[:-1]))
            weight.assign(rng.normal(0.0, scale / np.sqrt(fan_in), shape).astype("float32"))
    return model


def tiny_model(seed=0, **overrides):
    keras.utils.set_random_seed(seed)
    return randomize(zoo.get("convs2s-small", compile=False, **{**TINY, **overrides}), seed)


@pytest.fixture(scope="module")
def model():
    return tiny_model(seed=3)


# === The shared layer check ===


LAYERS = {
    "gated_convolution_centred": (
        lambda: GatedConvolution(D, 3), {"inputs": _x(B, T, 5), "padding_mask": _mask([5, 3], T)},
    ),
    "gated_convolution_causal": (
        lambda: GatedConvolution(D, 2, causal=True), {"inputs": _x(B, T, 5)},
    ),
    "encoder_block": (
        lambda: ConvS2SEncoderBlock(D, 3), {"inputs": _x(B, S, D), "padding_mask": _mask([4, 2], S)},
    ),
    "multi_step_attention": (
        lambda: MultiStepAttention(F),
        {"hidden": _x(B, T, D), "target_embedding": _x(B, T, F, seed=1),
         "keys": _x(B, S, F, seed=2), "values": _x(B, S, F, seed=3),
         "padding_mask": _mask([4, 2], S)},
    ),
    "decoder_block": (
        lambda: ConvS2SDecoderBlock(D, F, 3),
        {"inputs": _x(B, T, D), "target_embedding": _x(B, T, F, seed=1),
         "encoder_keys": _x(B, S, F, seed=2), "encoder_values": _x(B, S, F, seed=3),
         "encoder_padding_mask": _mask([4, 2], S)},
    ),
    "source_keys_and_values": (
        lambda: SourceKeysAndValues(3),
        {"encoder_output": _x(B, S, F), "source_embedding": _x(B, S, F, seed=1),
         "padding_mask": _mask([4, 2], S)},
    ),
}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_layers_pass_the_layer_checks(name, tmp_path):
    make_layer, inputs = LAYERS[name]
    run_layer_checks(make_layer, inputs, tmp_path)


def test_encoder_gradient_is_scaled_but_values_are_not():
    """Section 3.4: forward unchanged, ∂keys/∂z = 1/(2·layers), ∂values/∂e = √½."""
    layer = SourceKeysAndValues(4)
    z, e = tf.constant(_x(1, 3, 2)), tf.constant(_x(1, 3, 2, seed=1))
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([z, e])
        keys, values = layer(z, e)
        key_sum, value_sum = tf.reduce_sum(keys), tf.reduce_sum(values)
    np.testing.assert_allclose(keys, z, atol=1e-7)
    np.testing.assert_allclose(values, (z + e) * math.sqrt(0.5), atol=1e-6)
    np.testing.assert_allclose(tape.gradient(key_sum, z), np.full((1, 3, 2), 1 / 8), atol=1e-7)
    np.testing.assert_allclose(tape.gradient(value_sum, e), np.full((1, 3, 2), 0.5**0.5), atol=1e-7)


def test_bad_arguments_name_the_field():
    with pytest.raises(ValueError, match="hidden_dim=0"):
        GatedConvolution(0, 3)
    with pytest.raises(ValueError, match="kernel_size=0"):
        ConvS2SDecoderBlock(4, 4, 0)
    with pytest.raises(ValueError, match="hidden_dim=6"):
        ConvS2SEncoderBlock(6, 3)(np.zeros((1, 3, 5), "float32"))


# === The whole model against numpy ===


def _count(model, prefix):
    return sum(layer.name.startswith(prefix) for layer in model.layers)


def _numpy_forward(model, source, target):
    """ConvS2S in numpy with the model's weights: the equations of zoo/convs2s.py."""
    w = {weight.path: np.asarray(weight, "float64") for weight in model.weights}
    half = math.sqrt(0.5)

    def dense(x, name):
        return x @ w[f"{name}/kernel"] + w[f"{name}/bias"]

    def embed(ids, name):  # w + p
        table = w[f"{name}/token_embedding/embeddings"]
        return table[ids] + w[f"{name}/position_embedding/position_embeddings"][: ids.shape[1]]

    def glu_convolution(x, name, left, right):
        kernel, bias = w[f"{name}/kernel"], w[f"{name}/bias"]
        padded = np.pad(x, ((0, 0), (left, right), (0, 0)))
        y = sum(padded[:, i : i + x.shape[1]] @ kernel[i] for i in range(len(kernel))) + bias
        gated, gate = np.split(y, 2, axis=-1)
        return gated / (1 + np.exp(-gate))

    mask = (source != 0)[:, :, None]
    e = embed(source, "source_embedding")
    x = dense(e, "encoder_input_projection")
    for i in range(_count(model, "convolutional_encoder_block_")):
        name = f"convolutional_encoder_block_{i}"
        k = len(w[f"{name}/gated_convolution/convolution/kernel"])
        h = glu_convolution(x * mask, f"{name}/gated_convolution/convolution", (k - 1) // 2, k // 2)
        x = (h + x) * half
    z = dense(x, "encoder_output_projection") * mask
    values = (z + e) * half
    length = mask.sum(axis=1)[:, :, None]  # (B, 1, 1)
    g = embed(target, "target_embedding")
    y = dense(g, "decoder_input_projection")
    for i in range(_count(model, "convolutional_decoder_block_")):
        name = f"convolutional_decoder_block_{i}"
        k = len(w[f"{name}/gated_convolution/convolution/convolution/kernel"])
        h = glu_convolution(y, f"{name}/gated_convolution/convolution/convolution", k - 1, 0)
        query = (dense(h, f"{name}/attention/in_projection") + g) * half
        scores = np.where(mask[:, None, :, 0], np.einsum("btf,bsf->bts", query, z), -np.inf)
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        weights = scores / scores.sum(-1, keepdims=True)
        context = weights @ values * np.sqrt(length)
        h = (dense(context, f"{name}/attention/out_projection") + h) * half
        y = (h + y) * half
    return dense(dense(y, "decoder_output_projection"), "output_projection")


@pytest.mark.parametrize("kernel_size", [3, 4])
def test_forward_pass_equals_numpy(kernel_size, rng):
    model = tiny_model(seed=kernel_size, kernel_size=kernel_size, num_encoder_layers=3)
    target = np.concatenate([np.full((3, 1), START), rng.integers(1, V, (3, 6))], 1).astype("int32")
    expected = _numpy_forward(model, SOURCE, target)
    actual = np.asarray(model({"source": SOURCE, "target": target}, training=False))
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-4)


# === Causality and padding ===


def test_logits_at_t_never_depend_on_later_target_tokens(model, rng):
    target = rng.integers(1, V, (3, 8)).astype("int32")
    logits = np.asarray(model({"source": SOURCE, "target": target}, training=False))
    for t in range(target.shape[1]):
        changed = target.copy()
        changed[:, t + 1 :] = rng.integers(1, V, changed[:, t + 1 :].shape)
        changed[:, t] = (target[:, t] % (V - 1)) + 1  # differs at t itself
        after = np.asarray(model({"source": SOURCE, "target": changed}, training=False))
        # Positions before t see the same prefix; position t sees a new token.
        np.testing.assert_allclose(after[:, :t], logits[:, :t], rtol=1e-5, atol=1e-5)
        assert np.abs(after[:, t] - logits[:, t]).max() > 1e-3, f"position {t} ignores its token"


def test_extra_source_padding_changes_nothing(model, rng):
    target = rng.integers(1, V, (3, 5)).astype("int32")
    padded = np.pad(SOURCE, ((0, 0), (0, 5)))
    np.testing.assert_allclose(
        model({"source": padded, "target": target}, training=False),
        model({"source": SOURCE, "target": target}, training=False), rtol=1e-5, atol=1e-5,
    )


def test_attention_weights_are_distributions_over_real_source_tokens(model, rng):
    target = rng.integers(1, V, (3, 5)).astype("int32")
    weights = zoo.attention_weights(model, {"source": SOURCE, "target": target})
    assert sorted(weights) == [f"convolutional_decoder_block_{i}/attention" for i in range(2)]
    for attention in weights.values():
        assert attention.shape == (3, 5, 6)
        np.testing.assert_allclose(attention.sum(-1), 1.0, atol=1e-5)
        np.testing.assert_array_equal(attention[np.broadcast_to(SOURCE[:, None] == 0, attention.shape)], 0)


# === Decoding ===


def python_greedy(model, source, max_length, end_id):
    """Arg-max over the model's logits at the last position, one call per token."""
    target = np.full((len(source), 1), START, "int32")
    for _ in range(max_length):
        logits = np.array(model({"source": source, "target": target}, training=False))[:, -1]
        logits[:, 0] = -np.inf  # padding is never generated
        target = np.concatenate([target, logits.argmax(-1)[:, None].astype("int32")], 1)
    tokens = target[:, 1:]
    for row in tokens:  # [END] kept, padding after it
        ends = np.flatnonzero(row == end_id)
        if len(ends):
            row[ends[0] + 1 :] = 0
    return tokens


def test_cached_steps_give_the_full_models_logits(model, rng):
    """`IncrementalDecoder`, one token at a time along a fixed target, beams repeated."""
    target = np.concatenate([np.full((3, 1), START), rng.integers(1, V, (3, 7))], 1)
    target = target.astype("int32")
    expected = np.asarray(model({"source": SOURCE, "target": target}, training=False))
    stepper = decode._stepper(model, use_cache=True)
    assert isinstance(stepper, zoo.decode.steps.IncrementalDecoder)
    windows = stepper.prepare(tf.constant(SOURCE), 2, target.shape[1])  # 2 copies per row
    for t in range(target.shape[1]):
        logits, windows = stepper.step(tf.constant(np.repeat(target[:, t], 2)), tf.constant(t), windows)
        np.testing.assert_allclose(logits, np.repeat(expected[:, t], 2, axis=0), atol=2e-4, rtol=1e-4)


@pytest.mark.parametrize("use_cache", [True, False], ids=["cached", "full_model"])
def test_decoding_stays_within_the_learned_positions(model, use_cache):
    """32 learned target positions: a Python int width past them is refused at once."""
    assert decode.steps.learned_positions(model) == 32
    decode.greedy_decode(model, SOURCE, max_length=32, use_cache=use_cache)  # the last position
    with pytest.raises(ValueError, match="32 learned target positions; cannot generate 33"):
        decode.greedy_decode(model, SOURCE, max_length=33, use_cache=use_cache)
    with pytest.raises(ValueError, match="learned target positions"):  # default: S + 50 = 56
        decode.beam_search(model, SOURCE, beam_size=2)


@pytest.mark.large
def test_decoding_past_the_learned_positions_raises_with_dynamic_shapes(model):
    """Source length unknown when traced: the width (S + 50 by default, or a tensor
    `max_length`) is checked when the graph runs, and under XLA, which drops asserts,
    when it compiles; within the table both decode as eagerly."""
    spec = tf.TensorSpec((None, None), tf.int32)

    # autograph=False: plain graph building, as the export's signatures do.
    @tf.function(input_signature=[spec, tf.TensorSpec((), tf.int32)], autograph=False)
    def beam(source, max_length):
        return decode.beam_search(model, source, beam_size=2, max_length=max_length)[0]

    @tf.function(input_signature=[spec], autograph=False)
    def greedy(source):  # default length S + 50
        return decode.greedy_decode(model, source)

    @tf.function(input_signature=[spec], jit_compile=True, autograph=False)
    def compiled(source):  # default length S + 50
        return decode.greedy_decode(model, source)

    source = tf.constant(SOURCE)
    expected, _ = decode.beam_search(model, SOURCE, beam_size=2, max_length=8)
    np.testing.assert_array_equal(beam(source, tf.constant(8)), expected)
    with pytest.raises(tf.errors.InvalidArgumentError, match="32 learned target positions"):
        beam(source, tf.constant(33))
    with pytest.raises(tf.errors.InvalidArgumentError, match="32 learned target positions"):
        greedy(source)
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"width_exceeds_learned_positions/excess_positions \[24\]"):
        compiled(source)  # 6 + 50 = 56 positions, 24 past the table
    # XLA with a width inside the table still compiles and decodes as eagerly.
    xla = tf.function(lambda s: decode.greedy_decode(model, s, max_length=8), jit_compile=True,
                      input_signature=[spec], autograph=False)
    eager = decode.greedy_decode(model, SOURCE, max_length=8)
    np.testing.assert_array_equal(xla(source), eager)
    np.testing.assert_array_equal(
        decode.greedy_decode(model, SOURCE, max_length=8, jit_compile=True), eager)


def test_numbered_layers_are_the_blocks_in_order_up_to_the_first_gap(model):
    layers = {layer.name: layer for layer in model.layers}
    for prefix in ("convolutional_encoder_block_", "convolutional_decoder_block_"):
        expected = [layer for layer in model.layers if layer.name.startswith(prefix)]
        expected.sort(key=lambda layer: int(layer.name[len(prefix):]))
        assert len(expected) == 2
        assert families.numbered_layers(layers, prefix) == expected
    assert families.numbered_layers({"b_0": "x", "b_1": "y", "b_3": "z"}, "b_") == ["x", "y"]
    assert families.numbered_layers({"b_1": "y"}, "b_") == []


@pytest.mark.parametrize("use_cache", [True, False], ids=["cached", "full_model"])
def test_greedy_decode_equals_a_python_argmax_loop(model, use_cache):
    assert families.model_family(model) == "convs2s"
    free = python_greedy(model, SOURCE, 8, end_id=-1)
    # An [END] id that stops some rows mid-way and not others (the model is random).
    end_id = next(int(t) for t in free[:, 2:5].ravel() if t not in (0, START)
                  and (free == t).any(1).sum() < len(free))
    expected = python_greedy(model, SOURCE, 8, end_id)
    actual = decode.greedy_decode(
        model, SOURCE, max_length=8, end_id=end_id, use_cache=use_cache
    ).numpy()
    np.testing.assert_array_equal(actual, expected)
    assert (actual == 0).any() and (actual[:, -1] != 0).any(), actual


def test_beam_search_scores_are_length_penalised_log_probabilities(model):
    tokens, scores = decode.beam_search(model, SOURCE, beam_size=3, alpha=0.6, max_length=6)
    tokens = tokens.numpy()
    target = np.concatenate([np.full((3, 1), START), tokens[:, :-1]], 1).astype("int32")
    log_probs = tf.nn.log_softmax(
        np.asarray(model({"source": SOURCE, "target": target}, training=False), "float64")
    ).numpy()
    for row, lp, score in zip(tokens, log_probs, scores.numpy()):
        n = int(np.flatnonzero(row == END)[0]) + 1 if END in row else len(row)
        total = sum(lp[t, row[t]] for t in range(n))
        np.testing.assert_allclose(score, total / ((5.0 + n) / 6.0) ** 0.6, rtol=1e-4)
    # max_length 8: the greedy loop traced for the other tests serves this one too.
    greedy = decode.greedy_decode(model, SOURCE, max_length=8).numpy()
    one_beam, _ = decode.beam_search(model, SOURCE, beam_size=1, max_length=8)
    np.testing.assert_array_equal(one_beam.numpy(), greedy)


# === Export, served in a fresh process ===


@pytest.mark.large
def test_export_serves_what_decoding_gives(tmp_path):
    corpus = ["one two three four", "five six seven", "eight nine ten eleven twelve"]
    tokenizer = text.WordPieceTokenizer.from_corpus(corpus, 60, min_frequency=1)
    model = tiny_model(seed=5, vocabulary_size=tokenizer.vocab_size, max_length=12)
    path = zoo.export(model, tmp_path / "convs2s", tokenizer=tokenizer, max_length=8, beam_size=2)
    with pytest.raises(ValueError, match="max_length"):  # the learned position table
        zoo.export(model, tmp_path / "too_long", tokenizer=tokenizer, max_length=13)
    texts = ["one two three", "twelve eleven", ""]
    source = [ids[:7] + [END] for ids in tokenizer.tokenize(texts).to_list()]
    source = np.array([row + [0] * (8 - len(row)) for row in source], "int32")
    greedy = decode.greedy_decode(model, source, max_length=8).numpy()
    beam, _ = decode.beam_search(model, source, beam_size=2, alpha=0.6, max_length=8)
    libraries = pathlib.Path(tensorflow_text.__file__).parent / "python" / "ops"
    request = {
        "path": str(path), "texts": texts,
        "op_libraries": [str(libraries / n) for n in zoo.export.TF_SERVING_TEXT_OP_LIBRARIES],
    }
    (tmp_path / "request.pkl").write_bytes(pickle.dumps(request))
    (tmp_path / "serve.py").write_text(SERVE_SCRIPT)
    result = subprocess.run(
        [sys.executable, "serve.py", "request.pkl", "report.pkl"], capture_output=True, text=True,
        cwd=tmp_path, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    report = pickle.loads((tmp_path / "report.pkl").read_bytes())
    assert report["imported"] == []  # neither keras nor our code
    np.testing.assert_array_equal(report["results"]["greedy"]["tokens"], greedy)
    np.testing.assert_array_equal(report["results"]["serving_default"]["tokens"], beam.numpy())
