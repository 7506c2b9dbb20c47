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
# # 4. A Vision Transformer on Fashion-MNIST
#
# ViT (Dosovitskiy et al., 2021) cuts an image into patches, projects each patch
# to D dimensions, prepends a learnable class token, adds learned 1-D position
# embeddings and runs a pre-norm Transformer encoder; the class token's output
# feeds a linear classifier. `vit-tiny` is a CPU-sized ViT for 28×28×1 images:
# 4 layers, D = 64. Its Fashion-MNIST recipe (see the README) takes patch 7 (a
# 4×4 grid, fast enough for ~60 epochs in 15 CPU-minutes), 2 heads, and
# sequence pooling instead of the class token; here we take the paper's class
# token and 4 heads, and patch 4 (a 7×7 grid of 49 patches) without shifted
# patch tokenization, for finer pictures. The rest of the recipe (flips,
# ±1-pixel shifts, random erasing, label smoothing) is the entry's.
#
# We train it for a few minutes, then look inside: attention rollout over test
# images, and the similarity of the learned position embeddings (ViT paper,
# Fig. 7). Fashion-MNIST is read from `/usr/share/datasets/fashion-mnist`
# (Debian package `dataset-fashion-mnist`), else downloaded. `TUTORIAL_SMOKE=1`
# shrinks everything, and falls back to scikit-learn's digits without the data.

# %%
import os
import pathlib
import time

import keras
import numpy as np

import zoo
from zoo import datasets, plot

SMOKE = os.environ.get("TUTORIAL_SMOKE") == "1"  # tiny sizes, for CI
OUT = pathlib.Path(os.environ.get("TUTORIAL_OUT", "docs/images"))
OUT.mkdir(parents=True, exist_ok=True)
keras.utils.set_random_seed(0)

# About 4 minutes of training on a 2-core CPU at full settings.
NUM_TRAIN, NUM_VAL, NUM_TEST, EPOCHS, LAYERS = (
    (512, 128, 256, 1, 1) if SMOKE else (55000, 5000, 10000, 4, 4))
BATCH_SIZE = 128

# %% [markdown]
# ## Data

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
x_val, y_val = x_train[-NUM_VAL:], y_train[-NUM_VAL:]  # held out of training
x_train, y_train = x_train[:NUM_TRAIN], y_train[:NUM_TRAIN]
x_test, y_test = x_test[:NUM_TEST], y_test[:NUM_TEST]
print(x_train.shape, x_train.dtype, "labels", class_names)

# %% [markdown]
# ## The model and its recipe
#
# The model takes uint8 pixels and rescales them itself. `zoo.get` compiles it
# with the ViT recipe: AdamW, linear warm-up then cosine decay over
# `decay_steps` (set to the number of training steps), weight decay on the
# kernels only.

# %%
steps = EPOCHS * int(np.ceil(NUM_TRAIN / BATCH_SIZE))
model = zoo.get("vit-tiny", patch_size=4, shifted_patches=False, pooling="cls", num_heads=4,
                num_layers=LAYERS, decay_steps=steps, warmup_steps=min(200, steps // 4))
model.run_eagerly = SMOKE  # a smoke run's few steps cost less eagerly than traced
print(f"{model.count_params():,} parameters, {steps} training steps")
started = time.monotonic()
history = model.fit(x_train, y_train, batch_size=BATCH_SIZE, epochs=EPOCHS,
                    validation_data=(x_val, y_val), verbose=2)
print(f"trained in {time.monotonic() - started:.0f} s")
plot.training_curves(history, metrics=["loss", "accuracy"], title="vit-tiny on Fashion-MNIST",
                     path=OUT / "04_training_curves.png")

# %%
loss, accuracy = model.evaluate(x_test, y_test, batch_size=512, verbose=0)
print(f"test accuracy on {len(x_test)} images: {100 * accuracy:.1f}%")

# %% [markdown]
# ## Attention rollout
#
# A single layer's attention says little about which pixels the class token
# finally depends on, because every layer also has a residual connection.
# Attention rollout (Abnar & Zuidema, 2020) averages each layer's heads,
# adds the identity for the residual path and renormalises the rows,
# `Â_l = (A_l + I) / 2`, then multiplies the layers, `Ã = Â_L ⋯ Â_1`. The class
# token's row of `Ã`, over the 49 patches, is drawn on the 7×7 grid and
# upsampled over the image.

# %%
shown = x_test[:8]
predicted = model.predict(shown, verbose=0).argmax(axis=-1)
titles = [f"{class_names[t]}\n→ {class_names[p]}" for t, p in zip(y_test[:8], predicted)]
plot.vit_attention_map(model, shown, titles=titles, path=OUT / "04_attention_rollout.png")

weights = zoo.attention_weights(model, shown)  # encoder_block_{i}/self_attention: (B, N, 50, 50)
maps = plot.rollout_maps(weights)  # (B, 7, 7)
print({name: w.shape for name, w in weights.items()})
print("rollout of image 0 (class token over patches, ×100):\n", (100 * maps[0]).round(1))

# %% [markdown]
# ## Position embeddings
#
# ViT's position embeddings are learned as a plain table of 50 vectors (class
# token + 49 patches), with no notion of 2-D. The cosine similarity between the
# embedding of one patch and all the others shows how much of the grid the
# model has learned: in the ViT paper (Fig. 7, after long pre-training) each
# tile is bright around its own position and along its row and column. After a
# few minutes here the embeddings are still close to their random start and
# the structure is faint; the numbers below measure it: neighbours on the grid
# are more similar than patches far apart.

# %%
plot.position_embedding_similarity(model, path=OUT / "04_position_embedding_similarity.png")

table = keras.ops.convert_to_numpy(model.get_layer("position_embedding").position_embeddings)
unit = table[1:] / np.linalg.norm(table[1:], axis=1, keepdims=True)  # patches only, (49, D)
similarity = unit @ unit.T
grid = int(np.sqrt(len(unit)))  # 7
rows, columns = np.divmod(np.arange(len(unit)), grid)
distance = np.abs(rows[:, None] - rows[None]) + np.abs(columns[:, None] - columns[None])
print(f"mean cosine similarity to the 4 nearest patches: {similarity[distance == 1].mean():.3f}, "
      f"to patches 4 or more steps away: {similarity[distance >= 4].mean():.3f}")
print("pictures written to", OUT)
