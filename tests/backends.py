"""What the tests need that differs between Keras backends: gradients and a compiled call.

The tests of `keras_attention` run under TensorFlow, JAX and PyTorch: `make test` runs
the files of `BACKEND_TEST_FILES` (tests/conftest.py) again under JAX and PyTorch
(tests/test_backends.py), and `make test-jax` / `make test-torch` run them directly. Everything else those tests do
is `keras.ops` and NumPy; the few tests of TensorFlow-only code carry
`@pytest.mark.tensorflow_only` and are deselected under the other backends.
"""

import keras
import numpy as np

BACKEND = keras.backend.backend()

def to_numpy(tensor):
    """A backend tensor (or a Keras variable) as a NumPy array."""
    return keras.ops.convert_to_numpy(keras.ops.convert_to_tensor(tensor))


def gradients(fn, tensors=(), variables=()):
    """`fn(*tensors)` (a scalar) and its gradients w.r.t. `tensors` and Keras `variables`.

    Returns `(value, gradients)`: NumPy arrays, the gradients in the order
    `variables + tensors`, None where `fn` does not depend on one. `fn` may call
    layers that own `variables` (their weights); it must not change any variable.
    """
    tensors = [keras.ops.convert_to_tensor(t) for t in tensors]
    variables = list(variables)
    if BACKEND == "tensorflow":
        return _tensorflow_gradients(fn, tensors, variables)
    if BACKEND == "jax":
        return _jax_gradients(fn, tensors, variables)
    if BACKEND == "torch":
        return _torch_gradients(fn, tensors, variables)
    raise NotImplementedError(f"no gradients for the {BACKEND!r} backend")


def _tensorflow_gradients(fn, tensors, variables):
    import tensorflow as tf

    with tf.GradientTape() as tape:
        tape.watch(tensors)
        value = fn(*tensors)
    grads = tape.gradient(value, [v.value for v in variables] + tensors)
    return to_numpy(value), [None if g is None else to_numpy(g) for g in grads]


def _jax_gradients(fn, tensors, variables):
    import jax

    def pure(values, tensors):
        with keras.StatelessScope(state_mapping=list(zip(variables, values))):
            return fn(*tensors)

    # Compiled as one program, as every JAX training step is: op by op, JAX compiles each
    # primitive of the forward and backward passes on its own, and the JAX run of the layer
    # checks took several times the TensorFlow run.
    value, (variable_grads, tensor_grads) = jax.jit(jax.value_and_grad(pure, argnums=(0, 1)))(
        [v.value for v in variables], tensors)
    grads = list(variable_grads) + list(tensor_grads)
    # JAX gives zeros, never None, for an input that `fn` ignores.
    return to_numpy(value), [np.asarray(g) for g in grads]


def _torch_gradients(fn, tensors, variables):
    import torch

    tensors = [t.detach().clone().requires_grad_(True) for t in tensors]
    value = fn(*tensors)
    grads = torch.autograd.grad(value, [v.value for v in variables] + tensors, allow_unused=True)
    return to_numpy(value.detach()), [None if g is None else g.detach().cpu().numpy()
                                      for g in grads]


def jacobian(fn, tensor):
    """The Jacobian of `fn(tensor)` w.r.t. `tensor`, a NumPy array of shape
    `fn(tensor).shape + tensor.shape` (TensorFlow's `tape.jacobian`, `jax.jacobian`,
    `torch.autograd.functional.jacobian`). `fn` may call built layers (their weights fixed)."""
    tensor = keras.ops.convert_to_tensor(tensor)
    if BACKEND == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            tape.watch(tensor)
            value = fn(tensor)
        return to_numpy(tape.jacobian(value, tensor))
    if BACKEND == "jax":
        import jax

        return np.asarray(jax.jacobian(fn)(tensor))
    if BACKEND == "torch":
        import torch

        return torch.autograd.functional.jacobian(fn, tensor).detach().cpu().numpy()
    raise NotImplementedError(f"no Jacobian for the {BACKEND!r} backend")


def compiled(fn):
    """`fn` compiled by the backend's XLA (`tf.function(jit_compile=True)`, `jax.jit`).

    None under PyTorch, which has no XLA compilation here (`torch.compile` is a
    different compiler, slow to start on a CPU; not part of the layer checks).
    """
    if BACKEND == "tensorflow":
        import tensorflow as tf

        return tf.function(fn, jit_compile=True)
    if BACKEND == "jax":
        import jax

        return jax.jit(fn)
    return None


def compiled_gradients(fn, tensors=(), variables=()):
    """`gradients(fn, tensors, variables)` with the forward and backward passes compiled
    together by the backend's XLA (`tf.function(jit_compile=True)` around the tape,
    `jax.jit` around `jax.value_and_grad`).

    None under PyTorch, as `compiled`.
    """
    tensors = [keras.ops.convert_to_tensor(t) for t in tensors]
    variables = list(variables)
    if BACKEND == "tensorflow":
        import tensorflow as tf

        @tf.function(jit_compile=True)
        def step(tensors):
            with tf.GradientTape() as tape:
                tape.watch(tensors)
                value = fn(*tensors)
            return value, tape.gradient(value, [v.value for v in variables] + tensors)

        value, grads = step(tensors)
        return to_numpy(value), [None if g is None else to_numpy(g) for g in grads]
    if BACKEND == "jax":
        return _jax_gradients(fn, tensors, variables)  # always compiled by jax.jit
    return None
