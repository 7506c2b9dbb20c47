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
# # 1. Attention pooling from scratch
#
# A query `q` attends over a database of (key, value) pairs:
# `attention(q, D) = Σ_i α(q, k_i) v_i` with `α(q, k_i) = softmax_i(a(q, k_i))`.
# This tutorial builds that up with `keras_attention`: attention pooling as
# kernel regression, the scoring functions, masks, multi-head attention and the
# sinusoidal positional encoding, checking each against a few lines of NumPy.
#
# Run it as a script from the repository root (`python tutorials/01_attention_pooling.py`)
# or open it as a notebook (`jupytext --to notebook tutorials/01_attention_pooling.py`).
# Pictures go to `$TUTORIAL_OUT` (default `docs/images/`).

# %%
import os
import pathlib

import keras
import numpy as np

import keras_attention as ka
from zoo import plot

SMOKE = os.environ.get("TUTORIAL_SMOKE") == "1"  # tiny sizes, for CI
OUT = pathlib.Path(os.environ.get("TUTORIAL_OUT", "docs/images"))
OUT.mkdir(parents=True, exist_ok=True)
keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)

# %% [markdown]
# ## Attention pooling as kernel regression
#
# Nadaraya-Watson regression is attention pooling: the training inputs are the
# keys, the training targets the values, a test input the query, and the
# scoring function a Gaussian kernel `a(q, k) = -½ (q - k)²`. Each prediction
# is a weighted average of the training targets, the weights a softmax over
# the keys.

# %%
def f(x):
    return 2 * np.sin(x) + x**0.8


keys = np.sort(rng.uniform(0, 5, 20))  # training inputs (S,)
values = f(keys) + rng.normal(0, 0.5, 20)  # training targets (S,)
queries = np.linspace(0, 5, 20)  # test inputs (T,)

scores = -0.5 * (queries[:, None] - keys[None, :]) ** 2 * 4.0  # (T, S), kernel width 1/2
weights = keras.ops.convert_to_numpy(ka.masked_softmax(scores))  # rows sum to 1
predictions = weights @ values  # (T,)
np.testing.assert_allclose(weights.sum(axis=1), 1.0, rtol=1e-6)
print("mean absolute error of the pooled predictions:",
      float(np.abs(predictions - f(queries)).mean()))

# %% [markdown]
# Each row is one query; the weight concentrates on the keys next to it, so
# the picture is a band along the diagonal.

# %%
plot.attention_heatmap(
    weights,
    source_tokens=[f"{k:.1f}" for k in keys],
    target_tokens=[f"{q:.1f}" for q in queries],
    title="Nadaraya-Watson weights: test inputs (queries) × training inputs (keys)",
    path=OUT / "01_kernel_regression.png",
)

# %% [markdown]
# ## Scoring functions
#
# * dot product `a(q, k) = qᵀk`;
# * scaled dot product `a(q, k) = qᵀk / √d`;
# * additive (Bahdanau) `a(q, k) = w_vᵀ tanh(W_q q + W_k k)`, for queries and
#   keys of different sizes.
#
# Why `√d`? With components of zero mean and unit variance, `qᵀk` is a sum of
# d products of unit variance, so its variance is d: large d pushes the
# softmax into flat regions with tiny gradients. Dividing by `√d` brings the
# variance back to 1.

# %%
for d in (4, 64, 512):
    q = rng.normal(size=(10000, d))
    k = rng.normal(size=(10000, d))
    dot = (q * k).sum(axis=1)
    print(f"d={d:4d}: var(qᵀk) = {dot.var():7.1f}, var(qᵀk/√d) = {(dot / np.sqrt(d)).var():.2f}")

# %% [markdown]
# `ka.scaled_dot_product_attention` is `softmax(QKᵀ/√d) V` in matrix form;
# `ka.additive_scores` is the additive scoring function.

# %%
Q = rng.normal(size=(2, 3, 8)).astype("float32")  # (B, T, d)
K = rng.normal(size=(2, 5, 8)).astype("float32")  # (B, S, d)
V = rng.normal(size=(2, 5, 4)).astype("float32")  # (B, S, v)


def softmax(x):
    x = np.exp(x - x.max(axis=-1, keepdims=True))
    return x / x.sum(axis=-1, keepdims=True)


output, attention = ka.scaled_dot_product_attention(Q, K, V, return_weights=True)
reference = softmax(Q @ K.transpose(0, 2, 1) / np.sqrt(8)) @ V
np.testing.assert_allclose(keras.ops.convert_to_numpy(output), reference, atol=1e-5)
print("scaled dot product:", tuple(output.shape), "weights", tuple(attention.shape))

W_q = rng.normal(size=(8, 6)).astype("float32")  # queries of size 8
W_k = rng.normal(size=(3, 6)).astype("float32")  # keys of size 3
w_v = rng.normal(size=(6,)).astype("float32")
K_small = rng.normal(size=(2, 5, 3)).astype("float32")
additive = ka.additive_scores(Q, K_small, w_v, W_q, W_k)  # (B, T, S)
reference = np.tanh((Q @ W_q)[:, :, None, :] + (K_small @ W_k)[:, None, :, :]) @ w_v
np.testing.assert_allclose(keras.ops.convert_to_numpy(additive), reference, atol=1e-4)
print("additive scores:", tuple(additive.shape))

# %% [markdown]
# ## Masks
#
# One convention everywhere: a boolean mask, `True` where a query may attend.
# A *padding mask* hides the padding keys of shorter sequences; a *causal
# mask* lets query t see only keys ≤ t. Masked scores get a large negative
# value before the softmax, so their weight is exactly 0; a query whose keys
# are all masked gets zeros, never NaN.

# %%
ids = np.array([[5, 7, 9, 0, 0], [4, 0, 0, 0, 0]])  # 0 = padding
padding = ka.padding_mask(ids)  # (B, S)
print("padding mask:\n", keras.ops.convert_to_numpy(padding))
print("causal mask:\n", keras.ops.convert_to_numpy(ka.causal_mask(4)).astype(int))

scores = rng.normal(size=(2, 3, 5)).astype("float32")  # (B, T, S)
masked = keras.ops.convert_to_numpy(ka.masked_softmax(scores, padding[:, None, :]))
print("weights of example 1 (only key 0 is real):\n", masked[1].round(3))
nothing = np.zeros((1, 1, 5), bool)
print("a fully masked row:", keras.ops.convert_to_numpy(ka.masked_softmax(scores[:1, :1], nothing)))

# %% [markdown]
# ## Multi-head attention
#
# `h` heads each pool over their own projections, `head_i = f(W_i^q q, W_i^k k,
# W_i^v v)`, and `W_o` mixes the concatenated heads. With `p = d_model / h`
# per head the cost is close to one head at full width. Below: self-attention
# over 8 tokens with a causal mask; every head's weights are lower-triangular.

# %%
tokens, d_model, heads = (6, 16, 2) if SMOKE else (8, 32, 4)
x = rng.normal(size=(1, tokens, d_model)).astype("float32")
mha = ka.MultiHeadAttention(num_heads=heads, key_dim=d_model // heads)
y, scores = mha(x, x, use_causal_mask=True, return_attention_scores=True)
scores = keras.ops.convert_to_numpy(scores)  # (B, N, T, T)
print("output", tuple(y.shape), "weights", scores.shape)
assert np.allclose(np.triu(scores[0], k=1), 0.0)  # no peeking at later tokens
np.testing.assert_allclose(scores.sum(axis=-1), 1.0, rtol=1e-5)

words = ["the", "cat", "sat", "on", "the", "mat", "all", "day"][:tokens]
plot.attention_heatmap(scores[0], words, words, head="all",
                       title="Causal self-attention, every head (untrained weights)",
                       path=OUT / "01_multi_head_causal.png")

# %% [markdown]
# Without positions, self-attention is *permutation-equivariant*: permuting the
# tokens permutes the outputs the same way. That is why a Transformer needs
# positional information.

# %%
permutation = rng.permutation(tokens)
y_plain = keras.ops.convert_to_numpy(mha(x, x))
y_permuted = keras.ops.convert_to_numpy(mha(x[:, permutation], x[:, permutation]))
np.testing.assert_allclose(y_permuted, y_plain[:, permutation], atol=1e-5)
print("permuting the inputs permutes the outputs: ok")

# %% [markdown]
# ## Sinusoidal positional encoding
#
# `p_{i,2j} = sin(i / 10000^{2j/d})`, `p_{i,2j+1} = cos(i / 10000^{2j/d})`. Each
# pair of columns is a sinusoid whose wavelength grows geometrically from 2π
# to 10000·2π: the left columns change fast with the position, the right ones
# slowly (like the low and high bits of a binary counter).

# %%
plot.positional_encoding(length=60, depth=32, columns=(6, 7, 8, 9),
                         path=OUT / "01_positional_encoding.png")

# %% [markdown]
# For any offset δ, the pair `(p_{i+δ,2j}, p_{i+δ,2j+1})` is a fixed rotation
# of `(p_{i,2j}, p_{i,2j+1})` that does not depend on i: relative positions are
# linear functions of absolute ones.

# %%
depth, delta, j = 32, 5, 3
P = ka.sinusoidal_encoding(100, depth).astype("float64")
omega = 1.0 / 10000 ** (2 * j / depth)
rotation = np.array([[np.cos(delta * omega), np.sin(delta * omega)],
                     [-np.sin(delta * omega), np.cos(delta * omega)]])
pairs = P[:, 2 * j: 2 * j + 2]  # (L, 2)
np.testing.assert_allclose(pairs[:-delta] @ rotation.T, pairs[delta:], atol=1e-6)
print(f"positions i + {delta} are positions i rotated by {delta}·ω_{j}: ok")
print("pictures written to", OUT)
