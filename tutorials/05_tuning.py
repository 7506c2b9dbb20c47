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
# # 5. Tuning with keras-tuner
#
# `zoo.hypermodel(name, **fixed)` turns any zoo entry into a
# `keras_tuner.HyperModel`: its `build(hp)` samples the family's search space
# (for ViT: patch size, depth, width, heads, MLP ratio, dropout, learning rate,
# weight decay, batch size), holds the `fixed` config fields constant, and
# returns the model compiled with the family's recipe. Constraints such as
# "`num_heads` divides `hidden_dim`" and "`patch_size` divides `image_size`" are
# solved when the hypermodel is made, so no trial is wasted on an invalid
# config. Here: a small random search for a ViT on Fashion-MNIST, about
# 3 minutes on a laptop CPU; `TUTORIAL_SMOKE=1` shrinks everything.

# %%
import os
import pathlib
import tempfile

import keras
import keras_tuner
import numpy as np
import tensorflow as tf
from matplotlib.figure import Figure

import zoo
from zoo import datasets, plot, tuning

SMOKE = os.environ.get("TUTORIAL_SMOKE") == "1"  # tiny sizes, for CI
OUT = pathlib.Path(os.environ.get("TUTORIAL_OUT", "docs/images"))
OUT.mkdir(parents=True, exist_ok=True)
# keras-tuner's project (trials, checkpoints): under $TUTORIAL_MODELS, else a temporary folder.
TUNING_DIR = (pathlib.Path(os.environ["TUTORIAL_MODELS"]) / "tuning"
              if os.environ.get("TUTORIAL_MODELS") else pathlib.Path(tempfile.mkdtemp()))
keras.utils.set_random_seed(0)

NUM_TRAIN, NUM_VAL, NUM_TEST, TRIALS, EPOCHS = (
    (128, 64, 128, 2, 1) if SMOKE else (10000, 2000, 10000, 8, 2))
BATCH_SIZE = 64 if SMOKE else 128
if SMOKE:
    # A smoke run fits each model for two steps: tracing the train and test
    # steps into graphs would cost many times more than running them eagerly.
    tf.config.run_functions_eagerly(True)

# %%
try:
    data = datasets.fashion_mnist(download=not SMOKE)
except FileNotFoundError:
    if not SMOKE:
        raise
    # Smoke runs (the tests) need neither network nor the Debian package:
    # scikit-learn's bundled digits, resized to Fashion-MNIST's 28×28.
    data = datasets.digits(image_size=28)
(x_train, y_train), (x_test, y_test), class_names = data
x_val, y_val = x_train[-NUM_VAL:], y_train[-NUM_VAL:]
x_train, y_train = x_train[:NUM_TRAIN], y_train[:NUM_TRAIN]
x_test, y_test = x_test[:NUM_TEST], y_test[:NUM_TEST]

# %% [markdown]
# ## The hypermodel
#
# `space=` narrows the search (a list is a choice); keyword arguments fix
# config fields. `decay_steps` (the length of the cosine schedule) follows from
# the data, so it is fixed; so is the batch size.

# %%
steps = EPOCHS * int(np.ceil(NUM_TRAIN / BATCH_SIZE))
hypermodel = zoo.hypermodel(
    "vit-tiny",
    space={
        "patch_size": [4, 7],  # a 7×7 or 4×4 grid of patches
        "num_layers": [1, 2],
        "hidden_dim": [32, 64],
        "mlp_ratio": [2],
        "learning_rate": [1e-3, 3e-3],
    },
    num_heads=4, dropout=0.0, weight_decay=0.05, warmup_steps=steps // 10,
    decay_steps=steps, batch_size=BATCH_SIZE,
)
print(hypermodel.search_space)

# %% [markdown]
# ## The search
#
# Any keras-tuner tuner works (`RandomSearch`, `Hyperband`,
# `BayesianOptimization`); `zoo.tuning.make_tuner` builds one by name, and
# `zoo.tuning.tune` does search, report and `best_config.json` in one call.

# %%
tuner = keras_tuner.RandomSearch(
    hypermodel, objective="val_accuracy", max_trials=TRIALS, seed=0,
    directory=TUNING_DIR, project_name="vit-fashion-mnist", overwrite=True)
tuner.search(x_train, y_train, validation_data=(x_val, y_val), epochs=EPOCHS, verbose=0)
print(tuning.results_table(tuner, hypermodel, num_trials=TRIALS))

# %%
trials = [t for t in tuner.oracle.trials.values() if t.score is not None]
labels = [
    ", ".join(f"{k}={v}" for k, v in t.hyperparameters.values.items()
              if k in ("patch_size", "num_layers", "hidden_dim", "learning_rate"))
    for t in trials
]
figure = Figure(figsize=(8, 0.45 * len(trials) + 1.2), layout="constrained")
ax = figure.subplots()
ax.barh(range(len(trials)), [100 * t.score for t in trials])
ax.set_yticks(range(len(trials)), labels, fontsize="small")
ax.invert_yaxis()
ax.set_xlabel(f"validation accuracy after {EPOCHS} epoch(s) (%)")
ax.set_title("Random search over vit-tiny on Fashion-MNIST")
figure.savefig(OUT / "05_trials.png", dpi=100)

# %% [markdown]
# ## The best configuration
#
# `zoo.tuning.best_config` gives the best trial as config fields and `fit`
# arguments (`tune` writes the same dict to `best_config.json`), so the best
# architecture rebuilds with plain `zoo.get`.

# %%
best = tuning.best_config(tuner, hypermodel)
print(best["config"], best["fit"], best["objective"])
model = zoo.get(best["model"], **best["config"])
history = model.fit(x_train, y_train, validation_data=(x_val, y_val), epochs=EPOCHS,
                    verbose=2, **best["fit"])
plot.training_curves(history, metrics=["loss", "accuracy"],
                     title="best trial, trained again", path=OUT / "05_training_curves.png")
loss, accuracy = model.evaluate(x_test, y_test, batch_size=512, verbose=0)
print(f"test accuracy of the best configuration: {100 * accuracy:.1f}%")
print("pictures written to", OUT)
