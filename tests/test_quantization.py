"""int8 weights (`keras.Model.quantize("int8")`) for the attention layers, against NumPy.

The reference is the scheme written out in NumPy (`keras_attention.quantization`'s
docstring): per-output-unit weight scales, per-row input scales, integer products.
"""

import keras
import numpy as np
import pytest
from keras import ops

import keras_attention as ka
from keras_attention import quantization

from backends import to_numpy


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
    got = to_numpy(quantization.int8_matmul(ops.convert_to_tensor(x, "float32"), kernel, scale,
                                            "float32"))
    np.testing.assert_allclose(got, int8_matmul_np(x, w), rtol=1e-5, atol=1e-5)
    assert keras.ops.convert_to_numpy(kernel).dtype == np.int8
    # and close to the float product: one part in a hundred here
    np.testing.assert_allclose(got, x @ w, atol=0.05 * np.abs(x @ w).max())


@pytest.mark.parametrize("transpose_b", [False, True])
def test_int8_products_are_summed_exactly_in_int32(transpose_b):
    """Sums past 2**24, where float32 would round: the integer product on every backend
    (TensorFlow's MatMul with an int32 output, int32 `keras.ops.matmul` elsewhere)."""
    rng = np.random.default_rng(5)
    a = rng.integers(-127, 128, (3, 4096)).astype("int8")
    b = rng.integers(-127, 128, (4096, 5)).astype("int8")
    a[0], b[:, 0], a[0, 0] = 127, 127, 0  # 4095 · 127² = 66,048,255
    expected = a.astype(np.int64) @ b.astype(np.int64)
    assert expected[0, 0] == 66_048_255 != int(np.float32(expected[0, 0]))  # float32 rounds it
    got = quantization._int32_matmul(ops.convert_to_tensor(a),
                                     ops.convert_to_tensor(b.T.copy() if transpose_b else b),
                                     transpose_b=transpose_b)
    assert keras.backend.standardize_dtype(got.dtype) == "int32"
    np.testing.assert_array_equal(to_numpy(got), expected)


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
    projected = to_numpy(layer._project(ops.convert_to_tensor(query, "float32"), ("query",))[0])
    assert projected.shape == (2, 2, 3, 4)  # (B, N, T, H)
    np.testing.assert_allclose(
        np.transpose(projected, (0, 2, 1, 3)).reshape(2, 3, 8), q, rtol=1e-5, atol=1e-5
    )
    heads = rng.standard_normal((4, 2 * 4))
    out = int8_matmul_np(heads, float_weights["output_kernel"].reshape(8, 8))
    got = to_numpy(layer._projection(ops.convert_to_tensor(heads, "float32"), ("output",)))
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
    np.testing.assert_allclose(to_numpy(embedding(y, reverse=True)), expected, rtol=1e-5,
                               atol=1e-5)
    table_major = to_numpy(embedding.int8_logits(ops.convert_to_tensor(y), table_major=True))
    np.testing.assert_allclose(table_major, expected, rtol=1e-5, atol=1e-5)
