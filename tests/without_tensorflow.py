"""The zoo on JAX or PyTorch where TensorFlow cannot be imported: run by tests/test_backends.py.

    KERAS_BACKEND=jax XLA_FLAGS=--xla_force_host_platform_device_count=2 \
        python tests/without_tensorflow.py OUT_DIR
    KERAS_BACKEND=torch python tests/without_tensorflow.py OUT_DIR

Makes `import tensorflow` fail, as in an environment without it, then: imports
`keras_attention` and `zoo`; lists and describes every entry; builds every family's
smallest entry with `zoo.get`; trains `transformer-tiny` (vocabulary 64) and `vit-tiny`
(28×28×1, 10 classes) for 3 epochs with `model.fit` on NumPy arrays. Under JAX it trains
each again from the same weights under `keras.distribution.DataParallel` over 2 host devices
(the test compares the losses, as tests/test_distribute.py does for `tf.distribute`'s
Mirrored); Keras 3 has no distribution API for PyTorch, so there it trains on one device.
Saves the transformer as `OUT_DIR/transformer.keras` with a batch (`inputs.npz`) and its
outputs (`outputs.npy`), and writes what it saw to `OUT_DIR/report.json`. Under JAX it also
writes layouts of vit-tiny's weights over the 2 devices (`zoo.layouts.model_parallel`:
`keras.distribution.ModelParallel`).
"""

import sys

HIDDEN = ("tensorflow", "tensorflow_text")


class _WithoutTensorFlow:
    """A finder of sys.meta_path that finds nothing of TensorFlow's packages, as where they
    are not installed: `import tensorflow` raises ModuleNotFoundError, and
    `importlib.util.find_spec("tensorflow")` is None (PyTorch's dynamo asks it at import)."""

    def __init__(self, finder):
        self.finder = finder

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            return None
        return self.finder.find_spec(name, path, target)

    def __getattr__(self, attribute):  # invalidate_caches, find_distributions
        return getattr(self.finder, attribute)


sys.meta_path[:] = [_WithoutTensorFlow(finder) for finder in sys.meta_path]

import json  # noqa: E402
import pathlib  # noqa: E402

import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_attention  # noqa: E402
import zoo  # noqa: E402

SMALLEST = {
    "transformer-tiny": {"vocabulary_size": 64},
    "seq2seq-bahdanau-small": {"vocabulary_size": 64},
    "convs2s-small": {"vocabulary_size": 64},
    "vit-tiny": {},
}


def translation_data(rng, batch=32):
    source = rng.integers(3, 64, (batch, 9))
    source[::2, -3:] = 0
    target = rng.integers(3, 64, (batch, 8))
    return {"source": source, "target": target}, rng.integers(3, 64, (batch, 8))


# The families trained, with the arguments of the check.
TRAINED = {"transformer-tiny": {"vocabulary_size": 64},
           "vit-tiny": {"image_size": 28, "channels": 1, "num_classes": 10}}


def fit_losses(name, data, distribution=None, weights=None):
    """`fit` of the family `name` for 3 epochs in order (no shuffling), optionally under
    `distribution` and from `weights`; returns the model, its first weights and the losses."""
    inputs, labels = data
    keras.distribution.set_distribution(distribution)
    try:
        keras.utils.set_random_seed(0)
        model = zoo.get(name, **TRAINED[name])
        model(inputs if not isinstance(inputs, dict) else {k: v[:1] for k, v in inputs.items()})
        if weights is not None:
            model.set_weights(weights)
        first = model.get_weights()
        if distribution is not None:  # each weight on both devices, as DataParallel places it
            devices = model.trainable_variables[0].value.sharding.device_set
            assert keras.distribution.distribution() is distribution and len(devices) == 2
        history = model.fit(inputs, labels, batch_size=8, epochs=3, shuffle=False, verbose=0)
    finally:
        keras.distribution.set_distribution(None)
    return model, first, history.history["loss"]


def data_parallel():
    """DataParallel over the first 2 CPU devices under JAX; None where Keras has no
    distribution API (PyTorch)."""
    if keras.backend.backend() != "jax":
        return None
    import jax

    return keras.distribution.DataParallel(devices=jax.devices("cpu")[:2])


def main(out):
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    parallel = data_parallel()
    report = {"backend": keras.backend.backend(),
              "devices": len(parallel.device_mesh.devices) if parallel else 1,
              "distribution": type(parallel).__name__ if parallel else None}
    report["described"] = [zoo.describe(name).name for name in zoo.list()]
    if parallel is not None:  # JAX: ModelParallel's layout map (zoo.layouts) needs no TensorFlow
        sharded = zoo.layouts.model_parallel("vit-tiny", 2)
        report["layouts"] = {path: list(sharded.get_tensor_layout(path).axes) for path in (
            "encoder_block_0/self_attention/query_kernel", "head/kernel")}
    report["built"] = {name: zoo.get(name, **kwargs).count_params()
                       for name, kwargs in SMALLEST.items()}
    rng = np.random.default_rng(0)
    data = {"transformer-tiny": translation_data(rng),
            "vit-tiny": (rng.random((32, 28, 28, 1)).astype("float32"), rng.integers(0, 10, 32))}
    report["losses"], report["one_device_losses"], models = {}, {}, {}
    for name in TRAINED:
        models[name], first, report["one_device_losses"][name] = fit_losses(name, data[name])
        if parallel is not None:
            models[name], _, report["losses"][name] = fit_losses(name, data[name], parallel, first)
    transformer, (inputs, _) = models["transformer-tiny"], data["transformer-tiny"]
    transformer.save(out / "transformer.keras")
    batch = {key: value[:4] for key, value in inputs.items()}
    np.savez(out / "inputs.npz", **batch)
    np.save(out / "outputs.npy", keras.ops.convert_to_numpy(transformer(batch, training=False)))
    try:
        zoo.export(transformer, out / "export")
    except keras_attention.backends.BackendError as error:
        report["export"] = str(error)
    report["tensorflow_modules"] = sorted(m for m in sys.modules if m.split(".")[0] == "tensorflow")
    (out / "report.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
