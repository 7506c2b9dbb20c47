"""The XLA paths of a decoding step: tied logits as `(E yᵀ)ᵀ` (zoo/decode/steps.py) and
key/value buffers written by dynamic-update-slice (keras_attention/kv_cache.py).

Each is checked for its values (against the plain path and NumPy) and for what XLA
makes of it, in the optimized HLO of a small decoding-like loop
(`experimental_get_compiler_ir`): no transposed copy of the token table, no `select`
over the whole buffer."""

import re

import numpy as np
import tensorflow as tf

from keras_attention import kv_cache
from keras_attention.layers import TokenAndPositionEmbedding
from zoo.decode import steps

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
