"""Single device vs `MirroredStrategy` on 2 logical CPUs, for each model family.

Run by tests/test_distribute.py in a fresh process (logical devices must be
configured before TensorFlow initialises its devices):

    python tests/distributed_mirrored.py OUT.npz [FAMILY ...]

For each family, the same tiny model (same seed, dropout 0, the recipe's label
smoothing) is trained for one epoch at the same global batch, once without a
strategy and once under `zoo.distribute.get_strategy("mirrored")`, validating
on a held-out set, then evaluated on another. The run without a strategy is the
reference and runs eagerly (`run_eagerly`: a few steps cost less than tracing
them); the mirrored one runs as training does, in `tf.function`s. The batches
are made so that the two replicas see very different numbers of real tokens
(the first half of each batch is long, the second half mostly padding), which
is what a wrong reduction of the masked loss would get wrong, and so that
batches do not split evenly: the last training batch splits 4 / 1, the last
validation batch 2 / 1 (or 3 / 0) and the last evaluation batch (1 example)
leaves a replica empty.
Saves, per family: the weight paths (`FAMILY/names`), and per run (`single`,
`mirrored`) the initial and final weights (`FAMILY/RUN/initial`, `.../final`,
object arrays in the order of the names), the per-step logs of `fit`
(`FAMILY/RUN/log/KEY`), its epoch logs (`FAMILY/RUN/epoch/KEY`: `loss`,
`val_loss`, metrics) and the results of `evaluate` (`FAMILY/RUN/evaluate/KEY`).
The ViT's weights include its `Augmentation`'s step count (`augmentation/step`).
Grappler (TensorFlow's graph optimizer) is off in this process: optimizing the
mirrored steps of these tiny graphs costs more than running them, and it changes
their results only by float32 rounding.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0],
    [tf.config.LogicalDeviceConfiguration()] * 2,
)

import keras  # noqa: E402

import zoo  # noqa: E402
from zoo import distribute  # noqa: E402

SEED = 1234
GLOBAL_BATCH = 8
# 8 + 8 + 5: the last training batch splits 4 / 1 over the two replicas.
TRAIN_SIZE = 2 * GLOBAL_BATCH + 5
# 8 + 3: a partial validation batch (batched by GLOBAL_BATCH) that splits unevenly.
VAL_SIZE = GLOBAL_BATCH + 3
# 4 + 4 + 1 (batched by EVAL_BATCH): a last batch smaller than the number of
# replicas, which leaves one replica with an empty batch.
EVAL_BATCH = 4
EVAL_SIZE = 2 * EVAL_BATCH + 1

FAMILIES = {
    "transformer": (
        "transformer-tiny",
        dict(
            vocabulary_size=40, num_encoder_layers=1, num_decoder_layers=1, d_model=16,
            num_heads=2, intermediate_dim=32, dropout=0.0, max_length=16, warmup_steps=2,
            learning_rate_scale=2.0,
        ),
    ),
    "seq2seq": (
        "seq2seq-bahdanau-small",
        dict(
            vocabulary_size=40, embedding_dim=8, encoder_units=16, decoder_units=16,
            attention_units=16, maxout_units=8, max_length=16, learning_rate=1e-2,
            global_clipnorm=0.5, label_smoothing=0.1,
        ),
    ),
    "vit": (
        "vit-tiny",
        dict(
            image_size=8, channels=1, patch_size=4, num_layers=1, hidden_dim=16, num_heads=2,
            mlp_dim=32, num_classes=5, warmup_steps=1, decay_steps=50, label_smoothing=0.1,
            learning_rate=1e-2, random_translation=0.0, random_erasing=0.0,
            # The `augmentation` layer draws its flips but never applies them (it stops
            # after round(0.005 × 50) = 0 steps): replicas draw other random numbers than
            # one device. It still counts the training steps in its weight `step`.
            random_flip=True, augmentation_until=0.005,
        ),
    ),
}


def text_data(rng, n, vocabulary=40, length=10):
    """`n` examples `({"source", "target"}, labels)`, uneven padding between batch halves."""
    source = rng.integers(3, vocabulary, (n, length)).astype("int32")
    target = rng.integers(3, vocabulary, (n, length + 1)).astype("int32")
    for i in range(n):
        # Rows 0-3 of each batch (replica 0) are long, rows 4-7 (replica 1) short.
        keep = rng.integers(7, length + 1) if i % GLOBAL_BATCH < 4 else rng.integers(2, 4)
        source[i, keep:] = 0
        target[i, keep + 1:] = 0
    return {"source": source, "target": target[:, :-1]}, target[:, 1:]


def image_data(rng, n, config):
    images = rng.normal(size=(n, config["image_size"], config["image_size"], 1))
    labels = rng.integers(0, config["num_classes"], (n,))
    return images.astype("float32"), labels.astype("int32")


class Recorder(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.logs = []

    def on_train_batch_end(self, batch, logs=None):
        self.logs.append({k: float(v) for k, v in (logs or {}).items()})


def _dataset(data, batch):
    return distribute.shard_by_data(tf.data.Dataset.from_tensor_slices(data).batch(batch))


def train(name, overrides, data, strategy):
    """Train one epoch on `data["train"]` (validating on `data["val"]`), then
    evaluate on `data["eval"]`: the weights, per-step logs, epoch logs and
    evaluation results."""
    keras.utils.set_random_seed(SEED)
    model = zoo.get(name, strategy=strategy, **overrides)
    model.run_eagerly = strategy is None  # the reference; the mirrored steps are traced
    initial = [w.numpy() for w in model.weights]
    recorder = Recorder()
    history = model.fit(
        _dataset(data["train"], GLOBAL_BATCH), epochs=1, verbose=0, callbacks=[recorder],
        validation_data=_dataset(data["val"], GLOBAL_BATCH),
    )
    final = [w.numpy() for w in model.weights]
    evaluation = model.evaluate(_dataset(data["eval"], EVAL_BATCH), verbose=0, return_dict=True)
    epoch = {k: float(v[-1]) for k, v in history.history.items()}
    return [w.path for w in model.weights], initial, final, recorder.logs, epoch, evaluation


def as_objects(arrays):
    """A 1-D object array holding `arrays` (of any shapes) as they are."""
    result = np.empty(len(arrays), dtype=object)
    for i, array in enumerate(arrays):
        result[i] = array
    return result


def make_data(family, rng, overrides):
    sizes = {"train": TRAIN_SIZE, "val": VAL_SIZE, "eval": EVAL_SIZE}
    if family == "vit":
        return {k: image_data(rng, n, overrides) for k, n in sizes.items()}
    return {k: text_data(rng, n) for k, n in sizes.items()}


def main(out, families):
    rng = np.random.default_rng(SEED)
    mirrored = distribute.get_strategy("mirrored")
    if mirrored.num_replicas_in_sync != 2:
        raise SystemExit(f"expected 2 replicas, got {mirrored.num_replicas_in_sync}")
    results = {}
    for family in families:
        name, overrides = FAMILIES[family]
        data = make_data(family, rng, overrides)
        for run, strategy in (("single", None), ("mirrored", mirrored)):
            names, initial, final, logs, epoch, evaluation = train(name, overrides, data, strategy)
            results[f"{family}/names"] = np.array(names)
            results[f"{family}/{run}/initial"] = as_objects(initial)
            results[f"{family}/{run}/final"] = as_objects(final)
            for key in logs[0]:
                results[f"{family}/{run}/log/{key}"] = np.array([step[key] for step in logs])
            for key, value in epoch.items():
                results[f"{family}/{run}/epoch/{key}"] = np.array(value)
            for key, value in evaluation.items():
                results[f"{family}/{run}/evaluate/{key}"] = np.array(float(value))
            print(f"{family} {run}: epoch {epoch} evaluate {evaluation}", flush=True)
    np.savez(out, **results)  # weights as object arrays: load with allow_pickle=True


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:] or list(FAMILIES))
