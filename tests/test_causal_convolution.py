"""Causal convolutions: a numpy reference, causality (perturbation and Jacobian), receptive field.

Shape legend: B batch, T length, C channels, k kernel size, d dilation.
"""

import keras
import numpy as np
import pytest
from keras import ops

import keras_attention as ka

import backends
from backends import to_numpy

B, T, C = 2, 20, 3


def _x(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype("float32")


def _numpy_causal_conv(x, kernel, bias, dilation):
    """`y_t = Σ_i x_{t - (k-1-i)·d} W_i + b`, inputs before position 0 taken as 0."""
    k = kernel.shape[0]
    y = np.zeros(x.shape[:2] + (kernel.shape[-1],)) + bias
    for t in range(x.shape[1]):
        for i in range(k):
            source = t - (k - 1 - i) * dilation
            if source >= 0:
                y[:, t] += x[:, source] @ kernel[i]
    return y


@pytest.mark.parametrize("kernel_size, dilation", [(1, 1), (2, 1), (3, 2), (3, 4), (4, 8)])
def test_causal_conv_matches_numpy(kernel_size, dilation):
    x = _x(B, T, C)
    layer = ka.CausalConv1D(5, kernel_size, dilation_rate=dilation, bias_initializer="ones")
    actual = to_numpy(layer(x))
    kernel, bias = (to_numpy(w) for w in layer.weights)
    np.testing.assert_allclose(actual, _numpy_causal_conv(x, kernel, bias, dilation),
                               rtol=1e-5, atol=1e-5)


def test_causal_conv_equals_keras_causal_padding():
    x = _x(B, T, C)
    ours = ka.CausalConv1D(4, 3, dilation_rate=2)
    reference = keras.layers.Conv1D(4, 3, dilation_rate=2, padding="causal")
    ours(x)
    reference(x)
    reference.set_weights(ours.get_weights())
    np.testing.assert_allclose(to_numpy(ours(x)), to_numpy(reference(x)), rtol=1e-6, atol=1e-6)


def _layers():
    return {
        "conv": lambda: ka.CausalConv1D(4, 3, dilation_rate=2),
        "block": lambda: ka.DilatedResidualBlock(4, 3, dilation_rate=2),
        "stack": lambda: keras.Sequential(
            [ka.DilatedResidualBlock(4, 2, dilation_rate=d) for d in (1, 2, 4)]
        ),
    }


@pytest.mark.parametrize("name", ["conv", "block", "stack"])
def test_outputs_never_depend_on_later_inputs(name):
    layer = _layers()[name]()
    x = _x(B, T, C)
    baseline = to_numpy(layer(x))
    for t in (0, 7, T - 2):
        perturbed = x.copy()
        perturbed[:, t + 1:] += 10.0 * _x(B, T - t - 1, C, seed=t + 1)
        changed = to_numpy(layer(perturbed))
        np.testing.assert_array_equal(changed[:, : t + 1], baseline[:, : t + 1])
        assert not np.allclose(changed[:, t + 1:], baseline[:, t + 1:])


@pytest.mark.parametrize("name", ["conv", "block", "stack"])
def test_jacobian_is_lower_triangular_in_time(name):
    layer = _layers()[name]()
    # Positive inputs and weights, the same on every backend (their random streams differ):
    # every ReLU is active, so no dead unit hides a dependence, above or on the diagonal.
    x = np.abs(_x(1, T, C))
    layer(x)  # built outside the differentiation
    rng = np.random.default_rng(10)
    for weight in layer.weights:
        weight.assign(rng.uniform(0.05, 1.0, tuple(weight.shape)).astype("float32"))
    jacobian = backends.jacobian(layer, x)[0, :, :, 0]  # (T, F, T, C)
    dependence = np.abs(jacobian).sum(axis=(1, 3))  # output t × input s
    assert np.all(dependence[np.triu_indices(T, k=1)] == 0.0)
    assert np.all(np.diag(dependence) > 0)


def test_receptive_field_formula():
    assert ka.receptive_field(3, [1]) == 3
    assert ka.receptive_field(3, [1, 2, 4, 8]) == 31
    assert ka.receptive_field(2, [1, 2, 4, 8]) == 16  # k = 2: dilations 2^i see 2^L inputs
    assert ka.receptive_field(3, [1, 2, 4], convolutions_per_dilation=2) == 29


def _empirical_receptive_field(layer, length, channels):
    """How many input positions change the last output (Jacobian of the last position)."""
    x = _x(1, length, channels, seed=3)
    weights = _x(1, layer(x).shape[-1], seed=4)  # (built outside the differentiation)
    _, (gradient,) = backends.gradients(lambda x: ops.sum(ops.multiply(layer(x)[:, -1], weights)), [x])
    gradient = gradient[0]  # (T, C)
    seen = np.nonzero(np.abs(gradient).sum(-1))[0]
    return length - seen.min()


@pytest.mark.parametrize("kernel_size, dilations", [(2, [1, 2, 4, 8]), (3, [1, 3, 9]), (4, [1])])
def test_receptive_field_matches_measurement(kernel_size, dilations):
    stack = keras.Sequential(
        [ka.CausalConv1D(4, kernel_size, dilation_rate=d) for d in dilations]
    )
    length = 64
    measured = _empirical_receptive_field(stack, length, C)
    assert measured == ka.receptive_field(kernel_size, dilations)


def test_block_receptive_field_matches_measurement():
    dilations = [1, 2, 4]
    stack = keras.Sequential(
        [ka.DilatedResidualBlock(16, 3, dilation_rate=d, kernel_initializer=keras.initializers.
                                 RandomUniform(0.05, 1.0, seed=d)) for d in dilations]
    )
    measured = _empirical_receptive_field(stack, 64, C)
    assert measured == ka.receptive_field(3, dilations, convolutions_per_dilation=2) == 29


def test_masked_positions_are_zeroed_and_the_mask_passes_on():
    ids = np.array([[3, 1, 4, 0, 0], [2, 7, 1, 8, 0]], dtype="int32")
    embedding = keras.layers.Embedding(10, C, mask_zero=True)
    conv = ka.CausalConv1D(4, 2)
    block = ka.DilatedResidualBlock(4, 2)
    x = embedding(ids)
    y = block(conv(x))
    np.testing.assert_array_equal(to_numpy(y._keras_mask), ids != 0)
    zeroed = to_numpy(x) * (ids != 0)[..., None]
    np.testing.assert_allclose(to_numpy(conv(x)), to_numpy(conv(zeroed)), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: ka.CausalConv1D(0, 3), "filters=0"),
        (lambda: ka.CausalConv1D(4, 3, dilation_rate=0), "dilation_rate=0"),
        (lambda: ka.DilatedResidualBlock(4, 3, dropout=1.0), "dropout=1.0"),
        (lambda: ka.CausalConv1D(4, 3)(np.zeros((2, 3), "float32")), "inputs.shape"),
        (lambda: ka.receptive_field(3, [1, 0]), "dilations entry=0"),
        (lambda: ka.receptive_field(0, [1]), "kernel_size=0"),
    ],
)
def test_bad_arguments_raise(call, match):
    with pytest.raises(ValueError, match=match):
        call()
