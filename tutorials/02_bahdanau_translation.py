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
# # 2. Translation with an RNN and Bahdanau attention
#
# RNNsearch (Bahdanau, Cho & Bengio, 2015): a bidirectional GRU reads the source
# into annotations `h_j`; at each target step the decoder scores every
# annotation against its previous state, `e_{t,j} = w_vᵀ tanh(W_q s_{t-1} + W_k h_j)`,
# turns the scores into weights `α_{t,j} = softmax_j(e_{t,j})` and reads the
# context `c_t = Σ_j α_{t,j} h_j`. The weights `α` are the alignment between
# target and source tokens, and the heat map of `α` is the paper's famous
# picture.
#
# The task is offline: German dates written out ("Dienstag, 5. März 2024",
# "05.03.2024") to ISO 8601 ("2024-03-05"). The year moves from the end to the
# front and the month name becomes a number, so the alignment must cross.
# About a minute on a laptop CPU; `TUTORIAL_SMOKE=1` shrinks everything.

# %%
import os
import pathlib
import time

import keras
import numpy as np
import tensorflow as tf

import zoo
from zoo import datasets, decode, plot, text
from zoo.datasets import pipeline

SMOKE = os.environ.get("TUTORIAL_SMOKE") == "1"  # tiny sizes, for CI
OUT = pathlib.Path(os.environ.get("TUTORIAL_OUT", "docs/images"))
OUT.mkdir(parents=True, exist_ok=True)
keras.utils.set_random_seed(0)

NUM_TRAIN, NUM_TEST, EPOCHS, UNITS = (128, 8, 1, 16) if SMOKE else (10000, 500, 6, 64)
if SMOKE:
    # A smoke run trains for two steps and decodes a few dates: tracing the
    # train step and the decoding loops into graphs would cost more than
    # running them eagerly.
    tf.config.run_functions_eagerly(True)
MAX_LENGTH = 24

# %% [markdown]
# ## Data and tokenizers
#
# `zoo.datasets.dates` writes dates with `babel` in German; no test date occurs
# in training. Small WordPiece vocabularies (`zoo.text`) keep month and weekday
# names whole but split numbers into digits, so the model learns to copy digits
# one by one.

# %%
data = datasets.dates(num_train=NUM_TRAIN, num_test=NUM_TEST, seed=0)
print(data)
print(data.train_pairs[:3])

source_tokenizer = text.WordPieceTokenizer.from_corpus(
    [source for source, _ in data.train_pairs], vocab_size=120)
target_tokenizer = text.WordPieceTokenizer.from_corpus(
    [target for _, target in data.train_pairs], vocab_size=30)
example = tf.constant([data.train_pairs[0][0]])
print(source_tokenizer.lookup(source_tokenizer.tokenize(example)).to_list())

# %% [markdown]
# `zoo.datasets.pipeline` tokenizes inside `tf.data` and builds teacher-forcing batches:
# `source = x + [END]`, decoder input `target = [START] + y`, labels `y + [END]`.

# %%
train = pipeline.make_translation_dataset(
    data.train_pairs, source_tokenizer, target_tokenizer, batch_size=64, max_length=MAX_LENGTH)
(batch, labels), = train.take(1)
print({name: tuple(value.shape) for name, value in batch.items()}, tuple(labels.shape))

# %% [markdown]
# ## The model
#
# `seq2seq-bahdanau-small` is RNNsearch at CPU size (the paper's is
# `seq2seq-bahdanau`: GRU 1000, embeddings 620, maxout 500). Any config field
# can be overridden; here everything is smaller still.

# %%
model = zoo.get(
    "seq2seq-bahdanau-small",
    source_vocabulary_size=source_tokenizer.vocab_size,
    target_vocabulary_size=target_tokenizer.vocab_size,
    embedding_dim=UNITS // 2, encoder_units=UNITS, decoder_units=UNITS,
    attention_units=UNITS, maxout_units=UNITS // 2,
    learning_rate=3e-3, max_length=MAX_LENGTH,
)
print(f"{model.count_params():,} parameters")
started = time.monotonic()
history = model.fit(train, epochs=EPOCHS, verbose=2)
print(f"trained in {time.monotonic() - started:.0f} s")
plot.training_curves(history, title="RNNsearch on German dates",
                     path=OUT / "02_training_curves.png")

# %% [markdown]
# ## Greedy decoding and exact match
#
# `zoo.decode.greedy_decode` starts from `[START]` and feeds back the most
# likely token until `[END]`.

# %%
def encode_source(sentences):
    """Sentences -> source ids `(B, S)`: pieces + `[END]`, padded with 0."""
    ids = source_tokenizer.tokenize(tf.constant(sentences))[:, : MAX_LENGTH - 1]
    end = tf.fill([ids.nrows(), 1], text.END_ID)
    return tf.concat([ids, tf.RaggedTensor.from_tensor(end)], axis=1).to_tensor()


sources = [source for source, _ in data.test_pairs]
generated = decode.greedy_decode(model, encode_source(sources), max_length=16)
hypotheses = [h.decode("utf-8") for h in target_tokenizer.detokenize(generated).numpy()]
exact = np.mean([h == reference for h, (_, reference) in zip(hypotheses, data.test_pairs)])
print(f"exact match on {len(sources)} held-out dates: {100 * exact:.1f}%")
for (source, reference), hypothesis in list(zip(data.test_pairs, hypotheses))[:5]:
    print(f"  {source!r:32} -> {hypothesis!r} (reference {reference!r})")

# %% [markdown]
# ## The alignment
#
# `zoo.attention_weights` runs the model's own layers and returns `α` for a
# batch, `(B, T, S)`. Row t holds the weights the decoder used to predict the
# t-th output token, so we feed the decoded tokens back as the decoder input.

# %%
def alignment(sentence):
    """Greedy translation of one sentence and its alignment `α` `(T, S)`, with token labels."""
    source = encode_source([sentence])  # (1, S)
    output = decode.greedy_decode(model, source, max_length=16)[0].numpy().tolist()
    if text.END_ID in output:
        output = output[: output.index(text.END_ID) + 1]  # keep [END]: it is predicted too
    decoder_input = np.array([[text.START_ID] + output[:-1]], "int32")  # (1, T)
    weights = zoo.attention_weights(model, {"source": source, "target": decoder_input})
    source_vocabulary = source_tokenizer.get_vocabulary()
    target_vocabulary = target_tokenizer.get_vocabulary()
    return (
        weights["decoder/alignment"][0],  # (T, S)
        [source_vocabulary[i] for i in source[0].numpy()],
        [target_vocabulary[i] for i in output],
    )


for name, sentence in (("02_alignment.png", "Dienstag, 5. März 2024"),
                       ("02_alignment_numeric.png", "17.08.1961")):
    weights, source_tokens, target_tokens = alignment(sentence)
    plot.attention_heatmap(weights, source_tokens, target_tokens,
                           title=f"Bahdanau alignment: {sentence!r}", path=OUT / name)
    print(sentence, "->", target_tokens)
print("pictures written to", OUT)
