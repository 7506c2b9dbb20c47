"""The shared layer check, run on every public layer (like keras's `run_layer_test`).

`run_layer_checks(make_layer, inputs, tmp_dir)` builds layers from a
zero-argument factory, runs them on example inputs and checks:

1. config round trip: `get_config` holds exactly the constructor's arguments
   (nothing missing, nothing derived); `get_config` -> `from_config` (and the
   Keras serializer) gives the same config, and the same outputs once the
   weights are copied;
2. a functional `keras.Model` holding the layer, saved to `.keras` and loaded
   with `safe_mode=True`, gives identical outputs;
3. symbolic (functional) and eager calls agree, in values and in shape;
4. a training step (`backends.gradients` through the functional model,
   `training=True`) gives finite, non-zero gradients for every trainable weight
   and float input, and one SGD step moves every weight;
5. a call compiled by the backend's XLA (`backends.compiled`:
   `tf.function(jit_compile=True)`, `jax.jit`) matches the eager call; under
   PyTorch, which has no XLA compilation here, this check alone is skipped;
6. a fresh layer built under `"mixed_float16"` and `"mixed_bfloat16"` returns
   finite outputs in the compute dtype and keeps float32 variables (under JAX,
   the call compiled by `jax.jit`, as JAX runs a model).

Check 1 runs under TensorFlow only: a config is Python, the same under every
backend, and what a backend could change in it (the layer rebuilt from its
config, its weights, its outputs) check 2 covers, with identical outputs. Its
three eager calls were a third of the JAX run of these checks, which compiles
every operation of an eager call on its first shapes.

`inputs` is a dict from call-argument name to a numpy array; the first entry is
passed positionally, the rest as keywords. A value that is a string names
another entry and passes that same tensor again (self-attention:
`{"query": x, "value": "query"}`). `call_kwargs` holds the non-tensor call
arguments (e.g. `use_causal_mask=True`).
"""

import inspect
import os

import keras
import numpy as np

import backends


class _Inputs:
    """The example inputs of one layer call: numpy arrays plus repeated-tensor aliases."""

    def __init__(self, inputs, call_kwargs):
        self.names = list(inputs)
        self.arrays = {n: np.asarray(v) for n, v in inputs.items() if not isinstance(v, str)}
        self.aliases = {n: v for n, v in inputs.items() if isinstance(v, str)}
        for name, target in self.aliases.items():
            if target not in self.arrays:
                raise ValueError(f"input {name!r} repeats {target!r}, which is not an array")
        self.call_kwargs = dict(call_kwargs or {})

    def tensors(self):
        return {n: keras.ops.convert_to_tensor(v) for n, v in self.arrays.items()}

    def symbolic(self):
        return {
            n: keras.Input(shape=v.shape[1:], dtype=str(v.dtype), name=n)
            for n, v in self.arrays.items()
        }

    def call(self, layer, tensors, **extra):
        """`layer(first, **rest, **call_kwargs)` with `tensors` named as in `inputs`."""
        arguments = [tensors[self.aliases.get(name, name)] for name in self.names]
        keywords = dict(zip(self.names[1:], arguments[1:]))
        return layer(arguments[0], **keywords, **self.call_kwargs, **extra)

    def float_names(self):
        return [n for n, v in self.arrays.items() if v.dtype.kind == "f"]


def _flatten(outputs):
    return [np.asarray(keras.ops.convert_to_numpy(o)) for o in keras.tree.flatten(outputs)]


def _is_float(tensor):
    return keras.backend.standardize_dtype(tensor.dtype).startswith(("float", "bfloat"))


def assert_outputs_close(actual, expected, what, rtol=1e-5, atol=1e-5):
    actual, expected = _flatten(actual), _flatten(expected)
    assert len(actual) == len(expected), f"{what}: {len(actual)} outputs vs {len(expected)}"
    for i, (a, e) in enumerate(zip(actual, expected)):
        assert a.shape == e.shape, f"{what}: output {i} shape {a.shape} != {e.shape}"
        np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, err_msg=f"{what}: output {i}")


def functional_model(layer, inputs):
    """A `keras.Model` whose inputs are `keras.Input`s named and shaped like the examples."""
    symbolic = inputs.symbolic()
    return keras.Model(symbolic, inputs.call(layer, symbolic))


BASE_LAYER_CONFIG = {"name", "trainable", "dtype", "activity_regularizer"}


def check_config_round_trip(make_layer, inputs):
    layer = make_layer()
    expected = inputs.call(layer, inputs.tensors())
    config = layer.get_config()
    parameters = {
        name
        for name, p in inspect.signature(type(layer).__init__).parameters.items()
        if name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
    }
    missing = parameters - set(config)
    assert not missing, f"get_config misses constructor arguments {sorted(missing)}"
    derived = set(config) - parameters - BASE_LAYER_CONFIG
    assert not derived, f"get_config holds values that are not arguments: {sorted(derived)}"
    clone = type(layer).from_config(config)
    assert clone.get_config() == config, "from_config(get_config()) changed the config"
    restored = keras.layers.deserialize(keras.layers.serialize(layer))
    assert type(restored) is type(layer)
    assert restored.get_config() == config, "the Keras serializer changed the config"
    inputs.call(clone, inputs.tensors())  # build
    assert [tuple(w.shape) for w in clone.weights] == [tuple(w.shape) for w in layer.weights]
    clone.set_weights(layer.get_weights())
    actual = inputs.call(clone, inputs.tensors())
    assert_outputs_close(actual, expected, "from_config clone", rtol=0, atol=0)


def check_save_and_load(make_layer, inputs, tmp_dir):
    layer = make_layer()
    model = functional_model(layer, inputs)
    expected = model(inputs.tensors())
    path = os.path.join(str(tmp_dir), f"{layer.name}.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    loaded_layer = loaded.get_layer(layer.name)
    assert type(loaded_layer) is type(layer)
    assert loaded_layer.get_config() == layer.get_config()
    assert len(loaded_layer.weights) == len(layer.weights)
    for saved, original in zip(loaded_layer.weights, layer.weights):
        np.testing.assert_array_equal(
            backends.to_numpy(saved), backends.to_numpy(original), err_msg=original.path
        )
    assert_outputs_close(loaded(inputs.tensors()), expected, ".keras save/load", rtol=0, atol=0)


def check_symbolic_matches_eager(make_layer, inputs):
    layer = make_layer()
    eager = _flatten(inputs.call(layer, inputs.tensors()))
    model = functional_model(layer, inputs)
    symbolic_outputs = keras.tree.flatten(model.outputs)
    assert len(symbolic_outputs) == len(eager), "symbolic and eager calls differ in outputs"
    for symbolic, actual in zip(symbolic_outputs, eager):
        shape = tuple(symbolic.shape)
        assert len(shape) == actual.ndim, f"symbolic shape {shape} vs eager {actual.shape}"
        for s, e in zip(shape, actual.shape):
            assert s is None or s == e, f"symbolic shape {shape} vs eager {actual.shape}"
        assert keras.backend.standardize_dtype(symbolic.dtype) == str(actual.dtype)
    assert_outputs_close(model(inputs.tensors()), eager, "functional vs eager")


def check_training_step(make_layer, inputs, allow_zero_gradients=()):
    """Gradients of a random projection of the outputs (a plain sum is constant after a LayerNorm).

    Every trainable weight and every float input must get a finite, non-zero
    gradient; weights whose path contains a name in `allow_zero_gradients` may
    get zeros (e.g. a key bias under dot-product scoring, which the softmax cancels).
    """
    layer = make_layer()
    model = functional_model(layer, inputs)
    tensors = inputs.tensors()
    float_names = inputs.float_names()
    rng = np.random.default_rng(0)
    projections = []  # drawn at the first call, in the order of the outputs

    def loss(*float_inputs):
        outputs = [
            o
            for o in keras.tree.flatten(
                model({**tensors, **dict(zip(float_names, float_inputs))}, training=True)
            )
            if _is_float(o)
        ]
        assert outputs, "the layer has no float output to train"
        if not projections:
            projections.extend(
                rng.standard_normal(tuple(o.shape)).astype("float32") for o in outputs
            )
        return sum(keras.ops.sum(keras.ops.multiply(o, p)) for o, p in zip(outputs, projections))

    weights = list(layer.trainable_weights)
    names = [w.path for w in weights] + [f"input {n}" for n in float_names]
    assert names, "nothing to differentiate: no trainable weight and no float input"
    if not weights:
        assert not layer.weights, "the layer has weights but none is trainable"
    _, gradients = backends.gradients(loss, [tensors[n] for n in float_names], weights)
    for name, gradient in zip(names, gradients):
        assert gradient is not None, f"no gradient for {name}"
        assert np.all(np.isfinite(gradient)), f"non-finite gradient for {name}"
        if not any(allowed in name for allowed in allow_zero_gradients):
            assert np.any(gradient != 0), f"zero gradient for {name}"
    if weights:
        before = [backends.to_numpy(w) for w in weights]
        steps = [keras.ops.convert_to_tensor(g) for g in gradients[: len(weights)]]
        keras.optimizers.SGD(0.1).apply_gradients(zip(steps, weights))
        for weight, old in zip(weights, before):
            if not any(allowed in weight.path for allowed in allow_zero_gradients):
                assert not np.array_equal(old, backends.to_numpy(weight)), (
                    f"{weight.path} did not move"
                )


def check_jit_matches_eager(make_layer, inputs, rtol=1e-4, atol=1e-5):
    """The call compiled by the backend's XLA (`backends.compiled`) matches the eager call.

    Skipped under PyTorch (`backends.compiled` is None there: no XLA compilation); the
    other checks still run.
    """
    layer = make_layer()
    compiled = backends.compiled(lambda tensors: inputs.call(layer, tensors))
    if compiled is None:
        return
    tensors = inputs.tensors()
    eager = inputs.call(layer, tensors)
    assert_outputs_close(compiled(tensors), eager, "jit_compile vs eager", rtol=rtol, atol=atol)


def _mixed_precision_call(layer, inputs):
    """The layer's outputs on the example inputs; under JAX, compiled by `jax.jit` (the layer
    built symbolically first), as JAX trains and serves: called eagerly, JAX compiles each of
    the call's operations on its own, again for each half-precision dtype."""
    if backends.BACKEND != "jax":
        return inputs.call(layer, inputs.tensors())
    inputs.call(layer, inputs.symbolic())  # builds the weights outside the traced call
    return backends.compiled(lambda tensors: inputs.call(layer, tensors))(inputs.tensors())


def check_mixed_precision(make_layer, inputs, policies=("mixed_float16", "mixed_bfloat16")):
    for policy in policies:
        try:
            keras.config.set_dtype_policy(policy)
            layer = make_layer()
            compute_dtype = keras.config.dtype_policy().compute_dtype
            assert layer.compute_dtype == compute_dtype, f"{policy}: layer ignores the policy"
            outputs = keras.tree.flatten(_mixed_precision_call(layer, inputs))
            for i, out in enumerate(outputs):
                if not _is_float(out):
                    continue
                dtype = keras.backend.standardize_dtype(out.dtype)
                assert dtype == compute_dtype, f"{policy}: output {i} has dtype {dtype}"
                values = keras.ops.convert_to_numpy(keras.ops.cast(out, "float32"))
                assert np.all(np.isfinite(values)), f"{policy}: output {i} is not finite"
            for weight in layer.weights:
                assert weight.dtype == "float32", f"{policy}: {weight.path} is {weight.dtype}"
        finally:
            keras.config.set_dtype_policy("float32")


def run_layer_checks(
    make_layer,
    inputs,
    tmp_dir,
    call_kwargs=None,
    allow_zero_gradients=(),
    jit_atol=1e-5,
    mixed_precision=True,
    jit=True,
):
    """Run every check above on layers from `make_layer()` called on `inputs`.

    `jit=False` and `mixed_precision=False` leave out checks 5 and 6, which
    compile or rebuild the layer: where a layer class has several cases, one
    case runs them (the compiled program and the dtype handling are the
    class's, whatever its options).
    """
    inputs = _Inputs(inputs, call_kwargs)
    if backends.BACKEND == "tensorflow":  # see the module's docstring
        check_config_round_trip(make_layer, inputs)
    check_save_and_load(make_layer, inputs, tmp_dir)
    check_symbolic_matches_eager(make_layer, inputs)
    check_training_step(make_layer, inputs, allow_zero_gradients)
    if jit:
        check_jit_matches_eager(make_layer, inputs, atol=jit_atol)
    if mixed_precision:
        check_mixed_precision(make_layer, inputs)
