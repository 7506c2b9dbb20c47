"""The zoo on JAX where TensorFlow cannot be imported: run by tests/test_backends.py.

    KERAS_BACKEND=jax XLA_FLAGS=--xla_force_host_platform_device_count=2 \
        python tests/jax_without_tensorflow.py OUT_DIR

Makes `import tensorflow` fail, as in an environment without it, then: imports
`keras_attention` and `zoo`; lists and describes every entry; builds every family's
smallest entry with `zoo.get`; trains `transformer-tiny` (vocabulary 64) and `vit-tiny`
(28×28×1, 10 classes) for 3 epochs with `model.fit` on NumPy arrays, on one device and
again from the same weights under `keras.distribution.DataParallel` over 2 host devices (the
test compares the losses, as tests/test_distribute.py does for `tf.distribute`'s Mirrored);
saves the transformer as
`OUT_DIR/transformer.keras` with a batch (`inputs.npz`) and its outputs (`outputs.npy`),
and writes what it saw to `OUT_DIR/report.json`.
"""

import importlib.abc
import sys


class _NoTensorFlow(importlib.abc.MetaPathFinder):
    """`import tensorflow` (and its packages) raises ImportError, as where it is not installed."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("tensorflow", "tensorflow_text"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _NoTensorFlow())

import json  # noqa: E402
import pathlib  # noqa: E402

import jax  # noqa: E402
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


def main(out):
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    report = {"backend": keras.backend.backend(), "devices": len(jax.devices("cpu"))}
    report["described"] = [zoo.describe(name).name for name in zoo.list()]
    report["built"] = {name: zoo.get(name, **kwargs).count_params()
                       for name, kwargs in SMALLEST.items()}
    rng = np.random.default_rng(0)
    data = {"transformer-tiny": translation_data(rng),
            "vit-tiny": (rng.random((32, 28, 28, 1)).astype("float32"), rng.integers(0, 10, 32))}
    parallel = keras.distribution.DataParallel(devices=jax.devices("cpu")[:2])
    report["distribution"] = type(parallel).__name__
    report["losses"], report["one_device_losses"], models = {}, {}, {}
    for name in TRAINED:
        _, first, report["one_device_losses"][name] = fit_losses(name, data[name])
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
