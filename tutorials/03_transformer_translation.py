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
# # 3. Transformer translation, from tokenizer to TF Serving
#
# The whole path of "Attention Is All You Need" on an offline task: German
# number words to English ("dreihundertvierundzwanzig" → "three hundred and
# twenty-four"; German puts units before tens inside one word, English the other
# way round). We learn a shared WordPiece vocabulary, train `transformer-tiny`
# with the paper's recipe, decode greedily and with beam search, score with
# BLEU, export a SavedModel for TensorFlow Serving and call it the way its REST
# API is called. About 5 minutes on a laptop CPU; `TUTORIAL_SMOKE=1` shrinks
# everything.

# %%
import json
import os
import pathlib
import tempfile
import time

import keras
import numpy as np
import sacrebleu
import tensorflow as tf

import zoo
from zoo import datasets, decode, plot, text
from zoo.datasets import pipeline

SMOKE = os.environ.get("TUTORIAL_SMOKE") == "1"  # tiny sizes, for CI
OUT = pathlib.Path(os.environ.get("TUTORIAL_OUT", "docs/images"))
OUT.mkdir(parents=True, exist_ok=True)
# Where the SavedModel goes (TF Serving's layout: <dir>/<version>/saved_model.pb);
# saved_models/ is git-ignored.
MODELS = pathlib.Path(os.environ.get("TUTORIAL_MODELS")
                      or (tempfile.mkdtemp(prefix="zoo-") if SMOKE else "saved_models"))
keras.utils.set_random_seed(0)

if SMOKE:
    NUM_TRAIN, NUM_TEST, VOCAB, EPOCHS = 128, 4, 200, 1
    SIZES = dict(num_encoder_layers=1, num_decoder_layers=1, d_model=32, num_heads=2,
                 intermediate_dim=64)
else:
    NUM_TRAIN, NUM_TEST, VOCAB, EPOCHS = 20000, 500, 1000, 12
    SIZES = {}  # transformer-tiny: 2 + 2 layers, d_model 128, 4 heads, d_ff 512
MAX_LENGTH = 48

# %% [markdown]
# ## Data and tokenizer
#
# `zoo.datasets.numbers` draws numbers evenly over their number of digits; no
# test number occurs in training. Source and target share one WordPiece
# vocabulary (and, in the model, one embedding matrix, as in the paper).

# %%
data = datasets.numbers(num_train=NUM_TRAIN, num_test=NUM_TEST, seed=0)
print(data, data.train_pairs[:2])
tokenizer = text.WordPieceTokenizer.from_corpus(
    [sentence for pair in data.train_pairs for sentence in pair], vocab_size=VOCAB)
pieces = tokenizer.lookup(tokenizer.tokenize(tf.constant([data.train_pairs[0][0]])))
print(tokenizer, pieces.to_list())

train = pipeline.make_translation_dataset(
    data.train_pairs, tokenizer, tokenizer, batch_size=64, max_length=MAX_LENGTH,
    bucket_boundaries=[8, 12, 16, 24, 32])

# %% [markdown]
# ## Training
#
# `zoo.get` compiles with section 5.3 of the paper: Adam (β = 0.9, 0.98,
# ε = 1e-9), the warm-up then inverse-square-root learning rate, label
# smoothing 0.1, and loss and accuracy over non-padding tokens only.

# %%
model = zoo.get("transformer-tiny", vocabulary_size=tokenizer.vocab_size,
                max_length=MAX_LENGTH, **SIZES)
model.run_eagerly = SMOKE  # a smoke run's few steps cost less eagerly than traced
print(f"{model.count_params():,} parameters")
started = time.monotonic()
history = model.fit(train, epochs=EPOCHS, verbose=2)
print(f"trained in {time.monotonic() - started:.0f} s")
plot.training_curves(history, metrics=["loss", "masked_accuracy"],
                     title="transformer-tiny, German → English numbers",
                     path=OUT / "03_training_curves.png")

# %% [markdown]
# ## Greedy decoding, beam search and BLEU
#
# Decoding is auto-regressive from `[START]` to `[END]`. Beam search keeps the
# `beam_size` best hypotheses and ranks finished ones by
# `log p(y | x) / lp(y)` with the length penalty `lp(y) = ((5 + |y|) / 6)^α`
# (the paper: beam 4, α = 0.6). BLEU (sacrebleu) compares with the references,
# written in the tokenizer's normal form (lower case, NFKC).

# %%
def encode_source(sentences):
    """Sentences -> source ids `(B, S)`: pieces + `[END]`, padded with 0."""
    ids = tokenizer.tokenize(tf.constant(sentences))[:, : MAX_LENGTH - 1]
    end = tf.fill([ids.nrows(), 1], text.END_ID)
    return tf.concat([ids, tf.RaggedTensor.from_tensor(end)], axis=1).to_tensor()


def to_text(ids):
    return [s.decode("utf-8") for s in tokenizer.detokenize(ids).numpy()]


sources = [source for source, _ in data.test_pairs]
references = to_text(tokenizer.tokenize(tf.constant([t for _, t in data.test_pairs])))
source_ids = encode_source(sources)
greedy = to_text(decode.greedy_decode(model, source_ids, max_length=MAX_LENGTH))
beam_ids, beam_scores = decode.beam_search(model, source_ids, beam_size=4, alpha=0.6,
                                           max_length=MAX_LENGTH)
beam = to_text(beam_ids)
for name, hypotheses in (("greedy", greedy), ("beam 4", beam)):
    exact = 100 * np.mean([h == r for h, r in zip(hypotheses, references)])
    bleu = sacrebleu.corpus_bleu(hypotheses, [references]).score
    print(f"{name:7}: BLEU {bleu:5.1f}, exact match {exact:5.1f}% on {len(sources)} numbers")
for source, hypothesis, reference in list(zip(sources, beam, references))[:3]:
    print(f"  {source}\n    -> {hypothesis}\n    (reference: {reference})")

# %% [markdown]
# ## Cross-attention
#
# `zoo.attention_weights` returns every attention map of the model. The last
# decoder block's cross-attention shows which source pieces each output token
# reads; "twenty" should look at "##zwanzig", "four" at "vier".

# %%
example = "vierundzwanzigtausenddreihundertzwölf"
source = encode_source([example])  # (1, S)
output = decode.greedy_decode(model, source, max_length=MAX_LENGTH)[0].numpy().tolist()
output = output[: output.index(text.END_ID) + 1] if text.END_ID in output else output
decoder_input = np.array([[text.START_ID] + output[:-1]], "int32")  # row t predicts output[t]
weights = zoo.attention_weights(model, {"source": source, "target": decoder_input})
last = max(int(k.split("/")[0].rsplit("_", 1)[1]) for k in weights if k.startswith("decoder"))
cross = weights[f"decoder_block_{last}/cross_attention"][0]  # (N, T, S)
vocabulary = tokenizer.get_vocabulary()
plot.attention_heatmap(cross, [vocabulary[i] for i in source[0].numpy()],
                       [vocabulary[i] for i in output], head="all",
                       title=f"Cross-attention of decoder block {last}: {example}",
                       path=OUT / "03_cross_attention.png")

# %% [markdown]
# ## Export for TensorFlow Serving
#
# `zoo.export` writes a SavedModel version directory (`<path>/1/`) that holds
# the model, the tokenizer and beam search: its `serving_default` signature
# takes strings and returns `translation`, `tokens` and `score`. Loading it
# needs TensorFlow and the tensorflow-text ops (`import tensorflow_text`),
# nothing from this package.

# %%
version_dir = zoo.export(model, MODELS / "numbers", tokenizer=tokenizer, beam_size=4, alpha=0.6,
                         max_length=MAX_LENGTH)
print("exported to", version_dir)

# %% [markdown]
# TF Serving's REST API takes `POST /v1/models/numbers:predict` with a JSON body
# `{"instances": [...]}` and answers `{"predictions": [...]}`, one object per
# instance. With the model server running,
#
# ```
# docker run -p 8501:8501 -v "$PWD/saved_models/numbers:/models/numbers" \
#     -e MODEL_NAME=numbers tensorflow/serving
# curl -d '{"instances": ["siebzehn", "zweihundert"]}' \
#     http://localhost:8501/v1/models/numbers:predict
# ```
#
# Here we do what the server does, in process: parse the body, feed the
# instances to the `serving_default` signature, and write one prediction per
# instance.

# %%
import tensorflow_text  # noqa: E402,F401 - registers the tokenizer's ops, as TF Serving links them

loaded = tf.saved_model.load(str(version_dir))
serving = loaded.signatures["serving_default"]
request = json.dumps({"instances": ["siebzehn", "zweihundertdreiundvierzig", example]})

outputs = serving(text=tf.constant(json.loads(request)["instances"]))
predictions = [
    {"translation": outputs["translation"][i].numpy().decode("utf-8"),
     "tokens": outputs["tokens"][i].numpy().tolist(),
     "score": float(outputs["score"][i])}
    for i in range(len(json.loads(request)["instances"]))
]
response = json.dumps({"predictions": predictions}, ensure_ascii=False)
print(response[:400])
in_process = to_text(decode.beam_search(model, encode_source(json.loads(request)["instances"]),
                                        beam_size=4, alpha=0.6, max_length=MAX_LENGTH)[0])
print("same as beam search in Python:", in_process == [p["translation"] for p in predictions])
print("pictures written to", OUT)
