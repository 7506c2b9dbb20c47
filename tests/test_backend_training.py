"""Every family builds, computes and trains alike under TensorFlow, JAX and PyTorch.

References recorded under TensorFlow:
- the `.keras` fixtures of tests/fixtures (`*_v2.keras`, saved by TensorFlow runs) load
  under every backend and give their recorded outputs;
- `backend_training.json`: each family, with weights set from a seeded NumPy generator,
  gives the same loss, the same three training steps' losses and the same weight change
  (`python tests/test_backend_training.py --record`, under TensorFlow, writes it).

On JAX, `model.fit` on NumPy arrays and `keras.distribution.DataParallel` over two host
devices (the losses of one device) are checked by tests/without_tensorflow.py, which
tests/test_backends.py runs with TensorFlow unimportable. tests/test_backends.py runs this
file under JAX and PyTorch from `make test`; `make test-jax` and `make test-torch` run it too.
"""

import json
import pathlib
import sys
import warnings

import keras
import numpy as np
import pytest

import keras_attention as ka
import zoo
from keras_attention.backends import sync_training_state

from backends import BACKEND, to_numpy

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
RECORD = FIXTURES / "backend_training.json"
VOCABULARY = 64

# Each family's smallest entry, without dropout or augmentation, so that a training step is
# the same computation on every backend (their random streams differ), and with a short
# warm-up, so that three steps move the weights.
FAMILIES = {
    "transformer-tiny": {"vocabulary_size": VOCABULARY, "dropout": 0.0, "warmup_steps": 16},
    "seq2seq-bahdanau-small": {"vocabulary_size": VOCABULARY},
    "convs2s-small": {"vocabulary_size": VOCABULARY, "dropout": 0.0, "num_encoder_layers": 2,
                      "num_decoder_layers": 2},
    "vit-tiny": {"random_flip": False, "random_translation": 0.0, "random_erasing": 0.0,
                 "warmup_steps": 2},
}


def _data(name, batch=8, seed=0):
    rng = np.random.default_rng(seed)
    if name.startswith("vit"):
        return rng.random((batch, 28, 28, 1)).astype("float32"), rng.integers(0, 10, batch)
    source = rng.integers(3, VOCABULARY, (batch, 7))
    source[: batch // 2, -2:] = 0  # padding
    target = rng.integers(3, VOCABULARY, (batch, 6))
    return {"source": source, "target": target}, rng.integers(3, VOCABULARY, (batch, 6))


def _set_seeded_weights(model, seed=0):
    """Every float weight from a NumPy generator: kernels N(0, 1/fan_in), vectors near 0 (1 for
    scales), so that the model is the same on every backend whatever its random stream."""
    rng = np.random.default_rng(seed)
    for weight in model.weights:
        if not keras.backend.is_float_dtype(weight.dtype):
            continue
        shape = tuple(weight.shape)
        if len(shape) >= 2:
            value = rng.standard_normal(shape) / np.sqrt(np.prod(shape[:-1]))
        else:
            base = 1.0 if weight.name in ("gamma", "scale") else 0.0
            value = base + 0.1 * rng.standard_normal(shape)
        weight.assign(value.astype(weight.dtype))


def training_trace(name):
    """Loss before training, three `train_on_batch` losses, and ‖Δw‖² over the trainable weights."""
    keras.utils.set_random_seed(0)
    model = zoo.get(name, **FAMILIES[name])
    inputs, labels = _data(name)
    model(inputs)
    _set_seeded_weights(model)
    before = [keras.ops.convert_to_numpy(w.value).copy() for w in model.trainable_weights]
    loss = model.evaluate(inputs, labels, verbose=0, return_dict=True)["loss"]
    steps = [float(model.train_on_batch(inputs, labels, return_dict=True)["loss"])
             for _ in range(3)]
    change = sum(float(np.sum((keras.ops.convert_to_numpy(w.value) - b) ** 2))
                 for w, b in zip(model.trainable_weights, before))
    return {"parameters": model.count_params(), "loss": float(loss), "steps": steps,
            "weight_change": change}


@pytest.mark.skipif(BACKEND == "tensorflow", reason="the references are TensorFlow's own "
                    "recording: python tests/test_backend_training.py --record rewrites them")
@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_a_family_trains_as_under_tensorflow(name):
    recorded = json.loads(RECORD.read_text())[name]
    trace = training_trace(name)
    assert trace["parameters"] == recorded["parameters"], (
        "the family changed: record its TensorFlow values again "
        "(python tests/test_backend_training.py --record)")
    np.testing.assert_allclose(trace["loss"], recorded["loss"], rtol=1e-4)
    # Adam's first steps move each weight by about ±learning rate whatever its gradient's size,
    # so a gradient near zero whose sign differs by rounding between backends moves its weight
    # the other way: the losses after a step agree to 1e-3 (ConvS2S: 3e-4 on JAX), not 1e-4.
    np.testing.assert_allclose(trace["steps"], recorded["steps"], rtol=1e-3)
    np.testing.assert_allclose(trace["weight_change"], recorded["weight_change"], rtol=1e-3)
    assert trace["steps"][-1] < trace["loss"], "three steps on one batch did not lower its loss"


@pytest.mark.parametrize("name", sorted(n for n in FAMILIES if not n.startswith("vit")))
def test_more_padding_changes_no_output_and_no_loss(name):
    """Source and target padded 5 positions further, as `zoo train` pads a batch to its length
    bucket's boundary on JAX (zoo.datasets.pipeline's `pad_to_bucket_boundary`): the outputs at
    the real positions and the masked loss are those of the batch padded to its longest."""
    model = zoo.get(name, **FAMILIES[name])
    inputs, labels = _data(name)
    model(inputs)
    _set_seeded_weights(model)
    padded = {key: np.pad(value, ((0, 0), (0, 5))) for key, value in inputs.items()}
    padded_labels = np.pad(labels, ((0, 0), (0, 5)))
    outputs = keras.ops.convert_to_numpy(model(inputs, training=False))
    padded_outputs = keras.ops.convert_to_numpy(model(padded, training=False))
    np.testing.assert_allclose(padded_outputs[:, : labels.shape[1]], outputs, rtol=1e-5, atol=1e-5)
    loss = model.evaluate(inputs, labels, verbose=0, return_dict=True)["loss"]
    padded_loss = model.evaluate(padded, padded_labels, verbose=0, return_dict=True)["loss"]
    np.testing.assert_allclose(padded_loss, loss, rtol=1e-6)


@pytest.mark.parametrize("family", ["transformer", "seq2seq", "convs2s"])
def test_a_keras_file_saved_by_tensorflow_loads_with_its_outputs(family):
    model = keras.saving.load_model(FIXTURES / f"{family}_v2.keras")
    inputs = dict(np.load(FIXTURES / f"{family}_v2_input.npz"))
    expected = np.load(FIXTURES / f"{family}_v2_output.npy")
    actual = keras.ops.convert_to_numpy(model(inputs, training=False))
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(BACKEND != "torch", reason="model.fit on NumPy arrays: TensorFlow's is "
                    "tests/test_zoo.py's, JAX's tests/without_tensorflow.py's (one and two devices)")
@pytest.mark.parametrize("name", ["transformer-tiny", "vit-tiny"])
def test_fit_trains_three_epochs_on_numpy_arrays(name):
    model = zoo.get(name, **FAMILIES[name])
    inputs, labels = _data(name, batch=32)
    history = model.fit(inputs, labels, batch_size=8, epochs=3, verbose=0)
    losses = history.history["loss"]
    assert len(losses) == 3 and np.all(np.isfinite(losses)), losses


def test_the_gpu_check_asks_the_backend_in_use():
    """`has_gpu` (float16 or bfloat16 for `--mixed-precision auto`) asks the backend that
    computes, not TensorFlow: it agrees with Keras' own device list for that backend."""
    from keras_attention import backends

    if BACKEND == "torch":  # Keras has no keras.distribution on PyTorch: where it puts a tensor
        devices = [str(keras.ops.zeros(1).device)]
    else:
        devices = keras.distribution.list_devices()
    expected = any(device.split(":")[0] in ("gpu", "cuda") for device in devices)
    assert backends.has_gpu() is expected


@pytest.mark.skipif(BACKEND == "tensorflow", reason="under TensorFlow these features run (tests/test_zoo.py, "
                    "tests/test_export.py); the refusals exist only under JAX and PyTorch")
def test_tensorflow_only_features_name_the_backend_they_need(tmp_path):
    from keras_attention.backends import BackendError
    from zoo.decode import greedy_decode
    from zoo.export import export

    model = zoo.get("transformer-tiny", **FAMILIES["transformer-tiny"])
    with pytest.raises(BackendError, match=rf"^zoo export needs the TensorFlow backend: "
                       rf"KERAS_BACKEND=tensorflow \(this process runs Keras on {BACKEND}\)\.$"):
        export(model, tmp_path / "export")
    with pytest.raises(BackendError, match="needs the TensorFlow backend: KERAS_BACKEND=tensorflow"):
        greedy_decode(model, np.ones((1, 4), "int32"), max_length=4)
    with pytest.raises(BackendError, match="on JAX, call keras.distribution.set_distribution"):
        zoo.get("vit-tiny", strategy="mirrored")


# === A budget's corrections reach the compiled training step ===


class _Weight(keras.layers.Layer):
    """One scalar weight `w` as every output: with the loss `-mean(w)`, SGD adds the rate of
    each step to `w`, so `w` sums the rates the compiled step used."""

    def build(self, input_shape):
        self.w = self.add_weight(shape=(), initializer="zeros")

    def call(self, inputs):
        return inputs[:, :1] * 0.0 + self.w


class _CorrectAt(keras.callbacks.Callback):
    """Corrects the budget after the `step`-th batch of an epoch, as `zoo.runs.budget`'s
    `BudgetCallback` does: the training state synced first (`sync_training_state`)."""

    def __init__(self, schedule, step, budget):
        super().__init__()
        self.schedule, self.step, self.budget = schedule, step, budget

    def on_train_batch_end(self, batch, logs=None):
        if batch + 1 == self.step:
            sync_training_state(self.model)
            self.schedule.set_budget(*self.budget)


def _sgd_on_one_weight(schedule, attach=True):
    inputs = keras.Input((1,))
    model = keras.Model(inputs, _Weight()(inputs))
    optimizer = keras.optimizers.SGD(0.5)
    model.compile(optimizer=optimizer, loss=lambda y, p: -keras.ops.mean(p))
    optimizer.build(model.trainable_variables)
    if attach:
        schedule.attach(optimizer)
    return model, model.layers[-1].w


def _rates(warmup, total, steps):
    """The linear budget's rates (peak 1) at iterations `steps`, in NumPy."""
    return sum((i + 1) / warmup if i < warmup else max(0.0, (total - i) / (total - warmup))
               for i in steps)


def test_a_corrected_budget_reaches_the_compiled_step():
    """SGD on one weight, gradient -1: the weight sums the rates used. The budget corrected
    between two `fit` calls (#62's check: the last 5 rates add up to 4.70, the old total's
    1.67) and after the 5th batch of an epoch (a time limit's correction, mid-epoch)."""
    x = np.zeros((10, 1), "float32")
    schedule = ka.BudgetSchedule(peak=1.0, warmup_steps=1, total_steps=10)
    model, weight = _sgd_on_one_weight(schedule)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(x[:1], x[:1], epochs=5, verbose=0)
        first = float(to_numpy(weight))
        schedule.set_budget(1, 100)
        model.fit(x[:1], x[:1], epochs=5, verbose=0)
    assert not [w for w in caught if "BudgetSchedule" in str(w.message)]  # traced as state
    assert first == pytest.approx(_rates(1, 10, range(5)), rel=1e-6)
    assert float(to_numpy(weight)) - first == pytest.approx(4.69697, rel=1e-5)

    schedule = ka.BudgetSchedule(peak=1.0, warmup_steps=1, total_steps=10)
    model, weight = _sgd_on_one_weight(schedule)
    model.fit(x, x, batch_size=1, epochs=1, verbose=0, shuffle=False,
              callbacks=[_CorrectAt(schedule, 5, (1, 100))])
    expected = _rates(1, 10, range(5)) + _rates(1, 100, range(5, 10))
    assert float(to_numpy(weight)) == pytest.approx(expected, rel=1e-6)
    assert [int(to_numpy(v)) for v in (schedule.warmup_steps, schedule.total_steps)] == [1, 100]


@pytest.mark.skipif(BACKEND != "jax", reason="only jax.jit freezes what is not its state as a constant; "
                    "TensorFlow and PyTorch read the schedule's variables at every step")
def test_a_budget_outside_the_optimizers_state_is_named_when_jax_traces_it():
    schedule = ka.BudgetSchedule(peak=1.0, warmup_steps=1, total_steps=10)
    model, _ = _sgd_on_one_weight(schedule, attach=False)
    model.optimizer.learning_rate = schedule
    with pytest.warns(UserWarning, match=r"schedule\.attach\(optimizer\)"):
        model.fit(np.zeros((1, 1), "float32"), np.zeros((1, 1), "float32"), verbose=0)


if __name__ == "__main__" and sys.argv[1:] == ["--record"]:
    if BACKEND != "tensorflow":
        sys.exit("record under TensorFlow: KERAS_BACKEND=tensorflow")
    RECORD.write_text(json.dumps({name: training_trace(name) for name in sorted(FAMILIES)},
                                 indent=1) + "\n")
    print(f"wrote {RECORD}")
