"""The XLA paths of a decoding step: tied logits as `(E yᵀ)ᵀ`, or from `Eᵀ` made once for a
search (zoo/transformer/decoding.py),
key/value buffers written by dynamic-update-slice (keras_attention/kv_cache.py) and biases
added as `x - (-b)` and reshaped kernels behind a barrier (keras_attention/xla.py).

Each is checked for its values (against the plain path and NumPy) and for what XLA
makes of it, in the optimized HLO of a small decoding-like loop
(`experimental_get_compiler_ir`): no transposed copy of the token table, no `select`
over the whole buffer, no bias or kernel reshape fused into a one-row product."""

import re

import numpy as np
import pytest
import tensorflow as tf
from test_decode import padded_source, transformer

import zoo
from keras_attention import kv_cache, xla
from keras_attention.layers import TokenAndPositionEmbedding
from zoo import decode
from zoo.decode import steps
from zoo.transformer.decoding import FEW_ROWS, TransformerStep

VOCABULARY, DIM, STEPS = 301, 24, 3


def _loop(step):
    """`step` applied STEPS times in a tf.while_loop: the shape of a decoding loop."""
    def run(value):
        return tf.while_loop(lambda i, _: i < STEPS, lambda i, v: (i + 1, step(i, v)),
                             (tf.constant(0), value))[1]
    return run


def _optimized_hlo(function, *args):
    return tf.function(function, jit_compile=True, autograph=False).experimental_get_compiler_ir(*args)(
        stage="optimized_hlo"
    )


def test_in_xla_context_only_under_jit_compile():
    seen = {}

    def probe(name):
        seen[name] = kv_cache.in_xla_context()
        return tf.constant(0)

    probe("eager")
    tf.function(lambda: probe("graph"))()
    tf.function(lambda: probe("xla"), jit_compile=True)()
    tf.function(lambda: tf.while_loop(lambda i: i < 1, lambda i: i + probe("xla loop") + 1,
                                      [tf.constant(0)]), jit_compile=True)()
    assert seen == {"eager": False, "graph": False, "xla": True, "xla loop": True}


def test_tied_logits_under_xla_equal_the_plain_product_without_copying_the_table(rng):
    embedding = TokenAndPositionEmbedding(VOCABULARY, 8, DIM)
    embedding.build((None, None))
    y = tf.constant(rng.normal(size=(2, 1, DIM)).astype("float32"))
    expected = y.numpy() @ embedding.embeddings.numpy().T  # (2, 1, V)
    got = tf.function(lambda v: steps.tied_logits(v, embedding), jit_compile=True)(y)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(steps.tied_logits(y, embedding).numpy(), expected, rtol=1e-5, atol=1e-5)

    def logits_of(form):
        def step(_, v):  # the next input depends on the logits, as in greedy decoding
            return v + tf.reduce_mean(form(v)) * 1e-3
        return _loop(step)

    # One row (greedy at batch 1): XLA:CPU's matrix-vector product, where `y Eᵀ` copies Eᵀ.
    transposed = re.compile(rf"f32\[{DIM},{VOCABULARY}\]")  # the (D, V) table, Eᵀ
    fixed = _optimized_hlo(logits_of(lambda v: steps.tied_logits(v, embedding)), y[:1])
    plain = _optimized_hlo(logits_of(lambda v: embedding(v, reverse=True)), y[:1])
    assert not transposed.search(fixed)
    assert transposed.search(plain)  # the copy the fix removes


def _tiny_transformer(**overrides):
    return zoo.get("transformer-tiny", compile=False, num_encoder_layers=1, num_decoder_layers=1,
                   d_model=DIM, num_heads=4, intermediate_dim=32, vocabulary_size=VOCABULARY,
                   max_length=16, **overrides)


def test_a_table_transposed_once_gives_the_tied_logits_at_a_few_rows(rng):
    stepper = steps.stepper(_tiny_transformer(), use_cache=True)
    transposed = stepper.with_transposed_table()
    table = stepper.target_embedding.embeddings.numpy()  # E (V, D)
    np.testing.assert_array_equal(transposed.output_table.numpy(), table.T)
    for rows in (1, 4):
        y = tf.constant(rng.normal(size=(rows, 1, DIM)).astype("float32"))
        expected = y.numpy() @ table.T
        got = tf.function(transposed.logits, jit_compile=True, autograph=False)(y)
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(transposed.logits(y).numpy(), expected, rtol=1e-5, atol=1e-5)

    def table_read(chosen, rows):
        """The table the loop's logits product reads: Eᵀ (D, V) contracts its first axis."""
        y = tf.constant(rng.normal(size=(rows, 1, DIM)).astype("float32"))
        hlo = _optimized_hlo(_loop(lambda _, v: v + tf.reduce_mean(chosen.logits(v)) * 1e-3), y)
        dot = re.search(rf"= f32\[{rows},{VOCABULARY}\]\S* dot\(.*rhs_contracting_dims=\{{(\d)\}}", hlo)
        return {"0": "Eᵀ", "1": "E"}[dot.group(1)]

    assert table_read(transposed, 4) == "Eᵀ" and table_read(transposed, 2) == "Eᵀ"
    assert table_read(transposed, FEW_ROWS + 1) == "E"  # where Eᵀ is slower
    assert table_read(stepper, 4) == "E"
    untied = steps.stepper(_tiny_transformer(tie_embeddings=False), use_cache=True)
    assert untied.with_transposed_table() is untied  # its output projection is a Dense


def test_beam_search_under_xla_takes_the_transposed_table_and_keeps_its_ids(monkeypatch):
    model = transformer("post_norm_tied")  # a model of its own: no decoding trace cached
    source = tf.constant(padded_source(np.random.default_rng(3), [5, 3, 7]))
    expected, expected_scores = decode.beam_search(model, source, beam_size=3, max_length=9)
    calls = []
    original = TransformerStep.with_transposed_table
    monkeypatch.setattr(TransformerStep, "with_transposed_table",
                        lambda self: calls.append(self) or original(self))
    decode.beam_search(model, source, beam_size=3, max_length=9)
    assert not calls  # outside XLA, TensorFlow's MatMul reads E as it is
    tokens, scores = decode.beam_search(model, source, beam_size=3, max_length=9,
                                        jit_compile=True)
    assert calls
    np.testing.assert_array_equal(tokens.numpy(), expected.numpy())
    np.testing.assert_allclose(scores.numpy(), expected_scores.numpy(), atol=1e-5)
    # One sentence: 3 rows a step, whose logits read Eᵀ.
    alone, alone_scores = decode.beam_search(model, source[:1], beam_size=3, max_length=9,
                                             jit_compile=True)
    np.testing.assert_array_equal(alone.numpy(), expected.numpy()[:1])
    np.testing.assert_allclose(alone_scores.numpy(), expected_scores.numpy()[:1], atol=1e-5)


def test_cache_writes_under_xla_match_numpy_and_update_in_place(rng):
    cache = rng.normal(size=(2, 3, 8, 4)).astype("float32")  # (B, N, L, H)
    new = rng.normal(size=(2, 3, 1, 4)).astype("float32")
    for index in (0, 5, 7):
        expected = cache.copy()
        expected[:, :, index] = new[:, :, 0]
        write = tf.function(lambda c, n, i: kv_cache.write_positions(c, n, i, axis=2),
                            jit_compile=True)
        np.testing.assert_array_equal(write(cache, new, tf.constant(index)).numpy(), expected)

    def writes(c):
        return _loop(lambda i, buffer: kv_cache.write_positions(buffer, new, i, axis=2))(c)

    hlo = _optimized_hlo(writes, tf.constant(cache))
    assert "dynamic-update-slice" in hlo and " select(" not in hlo


# XLA:CPU's output fusion: an add fused into the matrix-vector product that feeds it, a
# kernel that runs on one thread (keras_attention/xla.py).
OUTPUT_FUSION = "kind=kOutput"
DOT_IN_FUSION = re.compile(r"ROOT %dot[\w.]* = ")  # a fused computation that ends in a dot


def test_add_bias_under_xla_equals_the_plain_add_and_keeps_the_product_unfused(rng):
    kernel = tf.constant(rng.normal(size=(DIM, VOCABULARY)).astype("float32"))
    bias = tf.constant(rng.normal(size=(VOCABULARY,)).astype("float32"))
    x = tf.constant(rng.normal(size=(1, DIM)).astype("float32"))
    expected = (x @ kernel + bias).numpy()
    # Under XLA the product is computed by another kernel than the fused one, so the sums
    # may differ in their last bits; x - (-b) itself is exactly x + b.
    got = tf.function(lambda v: xla.add_bias(v @ kernel, bias), jit_compile=True)(x)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-5)
    outputs = tf.constant(rng.normal(size=(1, VOCABULARY)).astype("float32"))
    np.testing.assert_array_equal(
        tf.function(xla.add_bias, jit_compile=True)(outputs, bias).numpy(), (outputs + bias).numpy())
    np.testing.assert_array_equal(xla.add_bias(x @ kernel, bias).numpy(), expected)

    def logits_of(add):
        def step(_, v):  # one row, as a decoding step of one sentence
            return v + tf.reduce_mean(add(v @ kernel, bias)) * 1e-3
        return _loop(step)

    assert OUTPUT_FUSION not in _optimized_hlo(logits_of(xla.add_bias), x)
    assert OUTPUT_FUSION in _optimized_hlo(logits_of(lambda a, b: a + b), x)  # what it avoids


@pytest.mark.large
def test_a_batch_one_transformer_decode_under_xla_fuses_no_bias_and_no_kernel_into_a_product(rng):
    # Biases in every projection, the feed-forward layers and Marian's final logits bias.
    model = zoo.get("transformer-tiny", compile=False, num_encoder_layers=1, num_decoder_layers=2,
                    d_model=32, num_heads=4, intermediate_dim=64, vocabulary_size=VOCABULARY,
                    max_length=16, final_logits_bias=True)
    bias = next(w for w in model.weights if "final_logits_bias" in w.path)
    bias.assign(rng.normal(size=bias.shape).astype("float32"))
    source = tf.constant([[5, 6, 7, decode.END_ID]], dtype="int32")

    def greedy(s):
        return decode.greedy_decode(model, s, max_length=6)

    hlo = _optimized_hlo(greedy, source)
    assert OUTPUT_FUSION not in hlo
    # Every product is a dot of its own, none inside a fusion (a reshaped attention kernel
    # fused into its product is emitted as a plain loop: `xla.unfused`).
    assert " dot(" in hlo and not DOT_IN_FUSION.search(hlo)
    xla_tokens = tf.function(greedy, jit_compile=True, autograph=False)(source)
    np.testing.assert_array_equal(xla_tokens.numpy(), greedy(source).numpy())


def test_unfused_kernels_reach_their_one_row_products_as_buffers_with_their_gradients(rng):
    kernel = tf.Variable(rng.normal(size=(4, 8, DIM)).astype("float32"))  # (N, H, D)
    x = tf.constant(rng.normal(size=(1, 32)).astype("float32"))

    def product(keep):
        def step(_, v):
            return v + tf.reduce_mean(v @ keep(tf.reshape(kernel, (32, DIM)))) * 1e-3
        return _loop(step)

    assert not DOT_IN_FUSION.search(_optimized_hlo(product(xla.unfused), x))
    assert DOT_IN_FUSION.search(_optimized_hlo(product(lambda k: k), x))  # what it avoids

    def gradient(keep):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.tanh(x @ keep(tf.reshape(kernel, (32, DIM)))))
        return tape.gradient(loss, kernel)

    np.testing.assert_allclose(
        tf.function(lambda: gradient(xla.unfused), jit_compile=True)().numpy(),
        gradient(lambda k: k).numpy(), rtol=1e-5, atol=1e-6)
