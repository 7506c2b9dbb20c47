"""The zoo on JAX where TensorFlow cannot be imported: run by tests/test_backends.py.

    KERAS_BACKEND=jax XLA_FLAGS=--xla_force_host_platform_device_count=2 \
        python tests/jax_without_tensorflow.py OUT_DIR

Makes `import tensorflow` fail, as in an environment without it, then: imports
`keras_attention` and `zoo`; lists and describes every entry; builds every family's
smallest entry with `zoo.get`; trains `transformer-tiny` (vocabulary 64) and `vit-tiny`
(28×28×1, 10 classes) for 3 epochs with `model.fit` on NumPy arrays under
`keras.distribution.DataParallel` over 2 host devices; saves the transformer as
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


def main(out):
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    report = {"backend": keras.backend.backend(), "devices": len(jax.devices("cpu"))}
    report["described"] = [zoo.describe(name).name for name in zoo.list()]
    report["built"] = {name: zoo.get(name, **kwargs).count_params()
                       for name, kwargs in SMALLEST.items()}
    keras.distribution.set_distribution(
        keras.distribution.DataParallel(devices=jax.devices("cpu")[:2]))
    rng = np.random.default_rng(0)
    transformer = zoo.get("transformer-tiny", vocabulary_size=64)
    inputs, labels = translation_data(rng)
    losses = {"transformer-tiny": transformer.fit(inputs, labels, batch_size=8, epochs=3,
                                                  verbose=0).history["loss"]}
    vit = zoo.get("vit-tiny", image_size=28, channels=1, num_classes=10)
    images, classes = rng.random((32, 28, 28, 1)).astype("float32"), rng.integers(0, 10, 32)
    losses["vit-tiny"] = vit.fit(images, classes, batch_size=8, epochs=3, verbose=0).history["loss"]
    report["losses"] = losses
    report["distribution"] = type(keras.distribution.distribution()).__name__
    keras.distribution.set_distribution(None)
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
