"""The main job (`make demo`): translate German number words into English with transformer-tiny.

Generates the offline `numbers` task (held-out numbers never seen in
training), learns one shared WordPiece vocabulary, trains `transformer-tiny`
for a time budget, then decodes the held-out set greedily and reports exact
match and BLEU (sacrebleu).
"""

import time

import keras
import numpy as np
import sacrebleu
import tensorflow as tf

import zoo
from zoo import datasets, decode, pipeline, text

MAX_LENGTH = 48
BUCKETS = [8, 12, 16, 24, 32]


class TimeBudget(keras.callbacks.Callback):
    """Stops training once `seconds` have passed (checked after every batch)."""

    def __init__(self, seconds):
        super().__init__()
        self.seconds = seconds
        self.start = None
        self.stopped_early = False

    def on_train_begin(self, logs=None):
        self.start = time.monotonic()

    def on_train_batch_end(self, batch, logs=None):
        if time.monotonic() - self.start > self.seconds:
            self.model.stop_training = True
            self.stopped_early = True


def translate(model, tokenizer, sentences, batch_size=256, max_length=MAX_LENGTH):
    """Greedy translations of `sentences` (in order) with a shared-vocabulary model."""
    outputs = []
    for i in range(0, len(sentences), batch_size):
        chunk = tf.constant(sentences[i : i + batch_size])
        ids = tokenizer.tokenize(chunk)[:, : max_length - 1]  # (B, (S))
        end = tf.fill([ids.nrows(), 1], text.END_ID)
        source = tf.concat([ids, tf.RaggedTensor.from_tensor(end)], axis=1).to_tensor()
        generated = decode.greedy_decode(model, source, max_length=max_length)
        outputs += [s.decode("utf-8") for s in tokenizer.detokenize(generated).numpy()]
    return outputs


def evaluate(model, tokenizer, pairs):
    """Exact match (%) and BLEU of greedy translations against the references."""
    sources = [s for s, _ in pairs]
    # References in the tokenizer's canonical form (normalised, lower-cased).
    references = [
        r.decode("utf-8")
        for r in tokenizer.detokenize(tokenizer.tokenize(tf.constant([t for _, t in pairs]))).numpy()
    ]
    hypotheses = translate(model, tokenizer, sources)
    exact = 100.0 * float(np.mean([h == r for h, r in zip(hypotheses, references)]))
    bleu = sacrebleu.corpus_bleu(hypotheses, [references]).score
    return exact, bleu, hypotheses, references


def run(
    minutes=4.0, train_size=20000, test_size=1000, seed=0, vocab_size=1000, batch_size=64
):
    keras.utils.set_random_seed(seed)
    started = time.monotonic()
    print(
        f"[1/4] Generating the numbers task ({train_size} training pairs, "
        f"{test_size} held out)..."
    )
    data = datasets.numbers(num_train=train_size, num_test=test_size, seed=seed)
    print(f"      e.g. {data.train_pairs[0][0]!r} -> {data.train_pairs[0][1]!r}")

    print(f"[2/4] Learning a shared WordPiece vocabulary of at most {vocab_size} tokens...")
    tokenizer = text.WordPieceTokenizer.from_corpus(
        [sentence for pair in data.train_pairs for sentence in pair], vocab_size=vocab_size
    )
    print(f"      {tokenizer.vocab_size} tokens")

    train = pipeline.make_translation_dataset(
        data.train_pairs, tokenizer, tokenizer, batch_size=batch_size, max_length=MAX_LENGTH,
        seed=seed, bucket_boundaries=BUCKETS,
    )
    model = zoo.get(
        "transformer-tiny", vocabulary_size=tokenizer.vocab_size, max_length=MAX_LENGTH
    )
    print(f"[3/4] Training transformer-tiny ({model.count_params():,} parameters) "
          f"for at most {minutes:g} minutes...")
    budget = TimeBudget(60.0 * minutes)
    train_started = time.monotonic()
    history = model.fit(train, epochs=1000, callbacks=[budget], verbose=2)
    train_seconds = time.monotonic() - train_started

    print(f"[4/4] Greedy decoding of the {test_size} held-out numbers...")
    exact, bleu, hypotheses, references = evaluate(model, tokenizer, data.test_pairs)
    for (source, _), hypothesis, reference in list(zip(data.test_pairs, hypotheses, references))[:5]:
        mark = "ok " if hypothesis == reference else "ERR"
        print(f"  {mark} {source}\n      -> {hypothesis}\n      (reference: {reference})")

    epochs = len(history.history["loss"])
    print("\nSummary")
    print(f"  model:       transformer-tiny, {model.count_params():,} parameters")
    print(f"  training:    {epochs} epochs in {train_seconds / 60:.1f} min, "
          f"final loss {history.history['loss'][-1]:.3f}, "
          f"token accuracy {100 * history.history['masked_accuracy'][-1]:.1f}%")
    print(f"  held-out:    exact match {exact:.1f}%, BLEU {bleu:.1f} "
          f"(greedy, {test_size} numbers never seen in training)")
    print(f"  total time:  {(time.monotonic() - started) / 60:.1f} min")
    return {"exact_match": exact, "bleu": bleu, "epochs": epochs}
