"""What differs between Keras backends: the few TensorFlow-only pieces, imported only there.

The layers, losses and metrics of `keras_attention` run under TensorFlow, JAX and
PyTorch (Keras 3's backends, chosen by `KERAS_BACKEND` before Keras is imported).
TensorFlow itself is imported only when it is the backend, so a JAX or PyTorch
environment needs no TensorFlow installed. Features that exist only on TensorFlow
(tf.data pipelines, tokenizers in the graph, SavedModel export, `tf.distribute`)
ask for it with `require_tensorflow`, which says in one line what to set.
"""

import keras

from keras_attention.checks import ArgumentError

if keras.backend.backend() == "tensorflow":
    import tensorflow as tf
elif keras.backend.backend() == "jax":
    import jax
elif keras.backend.backend() == "torch":
    import torch


class BackendError(ArgumentError):
    """A TensorFlow-only feature asked for under another Keras backend."""


def backend():
    """The Keras backend in use: `"tensorflow"`, `"jax"`, `"torch"` or `"numpy"`."""
    return keras.backend.backend()


def is_tensorflow():
    return backend() == "tensorflow"


def has_gpu():
    """Whether the backend computes on a GPU: TensorFlow's logical GPUs, JAX's default
    devices, PyTorch's CUDA (each asked through its own backend, never through TensorFlow)."""
    name = backend()
    if name == "tensorflow":
        return bool(tf.config.list_logical_devices("GPU"))
    if name == "jax":
        return any(device.platform == "gpu" for device in jax.devices())
    if name == "torch":
        return torch.cuda.is_available()
    return False


def sync_training_state(model):
    """Put the state of a running `fit` back into `model`'s variables; the next step then
    reads them anew, so that an assignment made now reaches it. `model` may be None.

    On JAX, `fit` carries the weights, the optimizer's and the metrics' variables from
    step to step as arrays outside the variables (which it empties to save memory) and
    puts them back at each epoch's end: mid-epoch the variables are stale, and an
    assignment to them would be lost. `model.jax_state_sync()` is Keras's way to a synced
    state; a callback's `self.model` calls it too. TensorFlow and PyTorch train the
    variables themselves: nothing to do.
    """
    sync = getattr(model, "jax_state_sync", None)
    if sync is not None:
        sync()


def process_index():
    """This process's index among a JAX job's processes (`jax.process_index()`, 0 to
    `process_count() - 1`; process 0 keeps the files); 0 on the other backends, whose jobs
    are TensorFlow's (`tf.distribute`)."""
    return jax.process_index() if backend() == "jax" else 0


def process_count():
    """The processes of a JAX job (`keras.distribution.initialize`); 1 on other backends."""
    return jax.process_count() if backend() == "jax" else 1


def is_traced(value):
    """Whether `value` is an abstract value of a function JAX is tracing (`jax.core.Tracer`),
    as opposed to a concrete array, which a traced function holds as a constant. False on the
    other backends."""
    return backend() == "jax" and isinstance(value, jax.core.Tracer)


def require_tensorflow(feature, alternative=None):
    """Raise `BackendError` "`feature` needs the TensorFlow backend: ..." unless it is the backend.

    feature: what the user asked for, as they would name it (e.g. `"zoo export"`).
    alternative: what to use instead on the other backends, if anything (one clause).
    """
    if not is_tensorflow():
        instead = f"; {alternative}" if alternative else ""
        raise BackendError(
            f"{feature} needs the TensorFlow backend: KERAS_BACKEND=tensorflow "
            f"(this process runs Keras on {backend()}){instead}."
        )


def replica_context():
    """TensorFlow's `tf.distribute` replica context, or None (another backend, or no strategy).

    Under `tf.distribute`, `model.fit` computes losses and metrics on each replica, which
    must then sum over the replicas themselves. On JAX, `keras.distribution` computes them
    on the global batch (sharded arrays), so no replica ever sees a part of it.
    """
    if not is_tensorflow():
        return None
    return tf.distribute.get_replica_context()


def all_reduce_sum(context, values):
    """The replicas' sums of `values` (a list of tensors), with no gradient through them."""
    values = [tf.stop_gradient(value) for value in values]
    return context.all_reduce(tf.distribute.ReduceOp.SUM, values)


def jit_compile(requested):
    """The `jit_compile` to give `model.compile` for a recipe that asks for `requested`.

    On TensorFlow `False` is a `tf.function` graph and `True` XLA; on PyTorch `False` is
    eager PyTorch and `True` `torch.compile`: both are the recipe's choice. On JAX the one
    compiled path is XLA (`jax.jit`), and `False` would run every op on its own, tens of
    times slower, so JAX always compiles.
    """
    return True if backend() == "jax" else requested
