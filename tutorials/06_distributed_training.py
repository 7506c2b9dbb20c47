# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 6. Distributed training with MirroredStrategy
#
# `tf.distribute.MirroredStrategy` keeps one copy of the model per device
# (replica), splits every global batch between them, and sums the gradients
# before each update, so training on R devices is the same computation as on
# one device with the same global batch. We check exactly that: the same
# Transformer, from the same initial weights, trained on the same batches once
# on one device and once mirrored over two.
#
# Without GPUs we split the CPU into two logical devices, which must happen
# before TensorFlow initialises its devices (first cell). With GPUs,
# `zoo.distribute.get_strategy("mirrored")` uses all of them. About a minute;
# `TUTORIAL_SMOKE=1` shrinks everything.

# %%
import os
import pathlib

import tensorflow as tf

if not tf.config.list_physical_devices("GPU"):
    tf.config.set_logical_device_configuration(
        tf.config.list_physical_devices("CPU")[0],
        [tf.config.LogicalDeviceConfiguration()] * 2,
    )

import keras  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

import zoo  # noqa: E402
from zoo import datasets, distribute, text
from zoo.datasets import pipeline

SMOKE = os.environ.get("TUTORIAL_SMOKE") == "1"  # tiny sizes, for CI
OUT = pathlib.Path(os.environ.get("TUTORIAL_OUT", "docs/images"))
OUT.mkdir(parents=True, exist_ok=True)

NUM_TRAIN, STEPS, PER_REPLICA = (32, 2, 8) if SMOKE else (4000, 150, 32)
SIZES = dict(num_encoder_layers=1, num_decoder_layers=1, d_model=32, num_heads=2,
             intermediate_dim=64) if SMOKE else {}
MAX_LENGTH = 48

# %% [markdown]
# ## The strategy and the global batch
#
# Each replica gets `PER_REPLICA` examples per step; the dataset is batched with
# the *global* batch size, `PER_REPLICA × replicas`, and Keras splits each batch.

# %%
strategy = distribute.get_strategy("mirrored")
replicas = strategy.num_replicas_in_sync
global_batch = distribute.global_batch_size(PER_REPLICA, strategy)
print(f"{type(strategy).__name__} over {replicas} replicas "
      f"({', '.join(strategy.extended.worker_devices)}); global batch {global_batch}")

data = datasets.numbers(num_train=NUM_TRAIN, num_test=10, seed=0)
tokenizer = text.WordPieceTokenizer.from_corpus(
    [sentence for pair in data.train_pairs for sentence in pair], vocab_size=400)


def dataset():
    """The same batches in the same order on every call (no shuffling)."""
    batches = pipeline.make_translation_dataset(
        data.train_pairs, tokenizer, tokenizer, batch_size=global_batch, max_length=MAX_LENGTH,
        shuffle=False, drop_remainder=True)
    return distribute.shard_by_data(batches)


# %% [markdown]
# ## One device and two, from the same weights
#
# `zoo.get(..., strategy=strategy)` builds and compiles the model inside
# `strategy.scope()`. Dropout is off so both runs are deterministic. The
# masked loss divides each replica's token sum by the *global* number of
# tokens, so the summed gradient is the single-device token mean even when one
# replica gets much more padding than the other.

# %%
config = dict(vocabulary_size=tokenizer.vocab_size, max_length=MAX_LENGTH, dropout=0.0,
              warmup_steps=100, **SIZES)
keras.utils.set_random_seed(0)
single = zoo.get("transformer-tiny", **config)
mirrored = zoo.get("transformer-tiny", strategy=strategy, **config)
mirrored.set_weights(single.get_weights())
for model in (single, mirrored):
    model.run_eagerly = SMOKE  # a smoke run's few steps cost less eagerly than traced
print(f"{single.count_params():,} parameters")

# One step per "epoch" on a repeated dataset: the history then holds every step's loss.
runs = {}
for name, model in (("one device", single), (f"mirrored, {replicas} replicas", mirrored)):
    history = model.fit(dataset().repeat(), epochs=STEPS, steps_per_epoch=1, verbose=0)
    runs[name] = history.history
    print(f"{name:22}: first losses {np.round(history.history['loss'][:4], 4).tolist()}, "
          f"last {history.history['loss'][-1]:.4f}")

# %% [markdown]
# The two runs compute the same thing in a different order (each replica sums
# its half of the batch, then the halves are added), so they agree up to
# float32 round-off, a few units in the last place of the loss. Training
# amplifies such differences (Adam divides by √v, so tiny gradients get full-size
# steps), and after some tens of steps the two trajectories drift apart, as two
# single-device runs with a different summation order would, while the loss
# curves stay the same.

# %%
single_history, mirrored_history = runs.values()
gap = np.abs(np.subtract(single_history["loss"], mirrored_history["loss"]))
early = min(20, STEPS)
print(f"largest step-loss difference over the first {early} steps: {gap[:early].max():.1e} "
      f"(float32 spacing at the loss: {np.spacing(np.float32(single_history['loss'][0])):.1e})")
print(f"final loss: one device {single_history['loss'][-1]:.4f}, "
      f"mirrored {mirrored_history['loss'][-1]:.4f}")

figure = Figure(figsize=(10, 3.5), layout="constrained")
loss_ax, gap_ax = figure.subplots(1, 2)
for (name, history), style in zip(runs.items(), ("-", "--")):
    loss_ax.plot(np.arange(1, STEPS + 1), history["loss"], style, label=name)
loss_ax.set_xlabel("training step")
loss_ax.set_title("loss")
loss_ax.legend()
gap_ax.semilogy(np.arange(1, STEPS + 1), np.maximum(gap, 1e-9), ".", label="|difference|")
gap_ax.axhline(np.spacing(np.float32(single_history["loss"][0])), color="gray", ls=":",
               label="float32 spacing")
gap_ax.set_xlabel("training step")
gap_ax.set_title("|loss(one device) - loss(mirrored)|")
gap_ax.legend()
figure.suptitle("Same batches, same initial weights: one device vs MirroredStrategy")
figure.savefig(OUT / "06_single_vs_mirrored.png", dpi=100)

# %% [markdown]
# Under `MultiWorkerMirroredStrategy` (`get_strategy("multiworker")`, one
# process per machine, the cluster in `TF_CONFIG`) the same script trains on
# several machines; `zoo train --strategy multiworker` does that from the
# command line.

# %%
print("pictures written to", OUT)
