"""int8 weights (`keras.Model.quantize("int8")`) for the attention layers, against NumPy.

The reference is the scheme written out in NumPy (`keras_attention.quantization`'s
docstring): per-output-unit weight scales, per-row input scales, integer products.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_attention as ka
from keras_attention import quantization


def quantize_np(x, axes):
    """`round(x · 127 / max|x|)` over `axes`, and the scale (Keras' abs-max quantizer)."""
    scale = 127.0 / (np.max(np.abs(x), axis=axes, keepdims=True) + keras.config.epsilon())
    return np.clip(np.round(x * scale), -127, 127), scale


def int8_matmul_np(x, w):
    """x `(M, K)` float, w `(K, N)` float -> the int8 scheme's `x w`, exact integer sums."""
    xq, xs = quantize_np(x, 1)
    wq, ws = quantize_np(w, 0)
    return (xq.astype(np.int64) @ wq.astype(np.int64)) / (xs * ws)


def test_int8_matmul_is_the_integer_product_rescaled():
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((5, 16)), rng.standard_normal((16, 7))
    kernel, scale = quantization.quantize_kernel(w.astype("float32"))
    got = quantization.int8_matmul(tf.constant(x, tf.float32), kernel, scale, "float32")
    np.testing.assert_allclose(got, int8_matmul_np(x, w), rtol=1e-5, atol=1e-5)
    assert keras.ops.convert_to_numpy(kernel).dtype == np.int8
    # and close to the float product: one part in a hundred here
    np.testing.assert_allclose(got, x @ w, atol=0.05 * np.abs(x @ w).max())


@pytest.mark.parametrize("scoring", ["scaled_dot", "additive"])
def test_quantized_attention_matches_numpy_int8_projections(scoring):
    """Every projection of a quantized layer is the int8 scheme applied to the float weights."""
    rng = np.random.default_rng(1)
    query, value = rng.standard_normal((2, 3, 8)), rng.standard_normal((2, 5, 6))
    layer = ka.MultiHeadAttention(num_heads=2, key_dim=4, scoring=scoring)
    layer(query.astype("float32"), value.astype("float32"))
    float_weights = {w.name: keras.ops.convert_to_numpy(w) for w in layer.weights}
    layer.quantize("int8")
    assert layer.quantization_mode == "int8"
    assert layer.query_kernel.dtype == "int8" and layer.output_kernel.dtype == "int8"
    q = int8_matmul_np(query.reshape(6, 8), float_weights["query_kernel"].reshape(8, 8))
    q = q.reshape(2, 3, 8) + float_weights["query_bias"].reshape(8)
    projected = layer._project(tf.constant(query, tf.float32), ("query",))[0]  # (B, N, T, H)
    np.testing.assert_allclose(
        np.transpose(projected, (0, 2, 1, 3)).reshape(2, 3, 8), q, rtol=1e-5, atol=1e-5
    )
    heads = rng.standard_normal((4, 2 * 4))
    out = int8_matmul_np(heads, float_weights["output_kernel"].reshape(8, 8))
    got = layer._projection(tf.constant(heads, tf.float32), ("output",))
    np.testing.assert_allclose(got, out + float_weights["output_bias"], rtol=1e-5, atol=1e-5)


def quantized_copy(model):
    copy = keras.models.clone_model(model)
    copy.set_weights(model.get_weights())
    copy.quantize("int8")
    return copy


def test_model_quantize_reaches_the_attention_inside_blocks():
    rng = np.random.default_rng(2)
    inputs = keras.Input((6, 16))
    x = ka.TransformerEncoderBlock(num_heads=2, intermediate_dim=32, key_dim=8)(inputs)
    model = keras.Model(inputs, keras.layers.Dense(3)(x))
    x = rng.standard_normal((4, 6, 16)).astype("float32")
    quantized = quantized_copy(model)
    int8 = [w for w in quantized.weights if w.dtype == "int8"]
    assert len(int8) == 4 + 2 + 1  # q, k, v, o; the two feed-forward kernels; the head
    expected, reference = quantized.predict(x, verbose=0), model.predict(x, verbose=0)
    assert 0 < np.abs(expected - reference).max() < 0.05 * np.abs(reference).max()


def test_a_quantized_attention_layer_survives_a_keras_file(tmp_path):
    rng = np.random.default_rng(4)
    inputs = keras.Input((6, 16))
    x = ka.MultiHeadAttention(num_heads=2, key_dim=8)(inputs, inputs)
    model = quantized_copy(keras.Model(inputs, x))
    x = rng.standard_normal((4, 6, 16)).astype("float32")
    model.save(tmp_path / "int8.keras")
    loaded = keras.saving.load_model(tmp_path / "int8.keras")
    assert loaded.layers[1].quantization_mode == "int8"
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), model.predict(x, verbose=0))


def test_tied_logits_from_an_int8_table_match_numpy():
    rng = np.random.default_rng(3)
    embedding = ka.TokenAndPositionEmbedding(11, 8, 6)
    embedding(np.zeros((1, 3), "int32"))
    table = keras.ops.convert_to_numpy(embedding.embeddings)
    embedding.token_embedding.quantize("int8")  # one scale per token (Keras' Embedding)
    y = rng.standard_normal((2, 3, 6)).astype("float32")
    expected = int8_matmul_np(y.reshape(6, 6), table.T).reshape(2, 3, 11)
    np.testing.assert_allclose(embedding(y, reverse=True), expected, rtol=1e-5, atol=1e-5)
    table_major = embedding.int8_logits(tf.constant(y), table_major=True)
    np.testing.assert_allclose(table_major, expected, rtol=1e-5, atol=1e-5)
