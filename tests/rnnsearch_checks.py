"""Checks shared by the tests of RNNsearch's attention variants (tests/test_monotonic.py,
tests/test_rnnsearch_location.py): a small model with wide random weights, its `.keras`
round trip and its TF Serving export, each against in-process decoding.
"""

import keras
import numpy as np
import tensorflow as tf

import zoo
from zoo import decode, text


def wide_rnnsearch(seed, **options):
    """`seq2seq-bahdanau-small` with `options` (sizes, `attention=...`), its weights drawn
    from N(0, 0.8²) with `seed`: wider than the initialisers, so that the tokens and the
    alignments vary."""
    keras.utils.set_random_seed(0)
    model = zoo.get("seq2seq-bahdanau-small", compile=False, **options)
    rng = np.random.default_rng(seed)
    for weight in model.weights:
        weight.assign(rng.normal(0, 0.8, tuple(weight.shape)).astype("float32"))
    return model


def check_keras_round_trip(model, path, source, max_length):
    """Save `model` to `path` (a `.keras` file), load it back and check that it greedy-decodes
    `source` as `model` does; returns the loaded model."""
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_array_equal(decode.greedy_decode(loaded, source, max_length=max_length),
                                  decode.greedy_decode(model, source, max_length=max_length))
    return loaded


def check_export_serves_decoding(model, directory, vocabulary_size):
    """`zoo.export` of `model` (with a WordPiece tokenizer of at most `vocabulary_size` ids)
    to `directory`: the SavedModel's beam search and greedy signatures, loaded back with
    `tf.saved_model.load`, give the tokens of in-process decoding, and in-process decoding
    has nothing after them."""
    words = ["eins zwei drei", "vier fünf", "sechs sieben acht neun"]
    tokenizer = text.WordPieceTokenizer.from_corpus(words, vocabulary_size, min_frequency=1)
    assert tokenizer.vocab_size <= vocabulary_size
    path = zoo.export(model, directory, max_length=8, beam_size=2, alpha=0.6,
                      tokenizer=tokenizer)
    served = tf.saved_model.load(str(path))
    rows = [ids[:7] + [decode.END_ID] for ids in tokenizer.tokenize(words).to_list()]
    source = np.zeros((len(words), max(map(len, rows))), "int32")
    for row, ids in enumerate(rows):
        source[row, : len(ids)] = ids
    beam, _ = decode.beam_search(model, source, beam_size=2, alpha=0.6, max_length=8)
    greedy = decode.greedy_decode(model, source, max_length=8)
    for signature, expected in (("serving_default", beam), ("greedy", greedy)):
        tokens = served.signatures[signature](text=tf.constant(words))["tokens"].numpy()
        np.testing.assert_array_equal(tokens, np.asarray(expected)[:, : tokens.shape[1]])
        assert not np.asarray(expected)[:, tokens.shape[1]:].any()
