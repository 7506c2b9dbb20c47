"""Learning a WordPiece vocabulary from sentences: `count_words`, `train_wordpiece_vocabulary`."""

import collections

import tensorflow as tf
from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib

from zoo.errors import ZooError
from zoo.progress import progress_bar
from zoo.text.normalization import check_options, split_words
from zoo.text.special import RESERVED_TOKENS
from zoo.text.wordpiece_bpe import learn_wordpiece_bpe

ALGORITHMS = ("bpe", "tensorflow_text")


def _check_reserved_tokens(reserved_tokens):
    reserved_tokens = list(reserved_tokens)
    if tuple(reserved_tokens[: len(RESERVED_TOKENS)]) != RESERVED_TOKENS:
        raise ZooError(
            f"reserved_tokens must start with {list(RESERVED_TOKENS)} (ids 0-3 are fixed); "
            f"received reserved_tokens={reserved_tokens}"
        )
    if len(set(reserved_tokens)) != len(reserved_tokens):
        raise ZooError(f"reserved_tokens has duplicates; received {reserved_tokens}")
    return reserved_tokens


def _sentence_dataset(sentences):
    """`(tf.data.Dataset of scalar tf.string, its size or None)` from `count_words`' input."""
    if isinstance(sentences, tf.data.Dataset):
        if sentences.element_spec != tf.TensorSpec([], tf.string):
            raise ZooError(
                "sentences must be a dataset of scalar tf.string; received element_spec="
                f"{sentences.element_spec}"
            )
        total = int(sentences.cardinality())
        return sentences, (total if total >= 0 else None)  # unknown or infinite: None
    if isinstance(sentences, (str, bytes)):
        raise ZooError(
            "sentences must be an iterable of strings, not a single string; "
            f"received {sentences[:50]!r}"
        )
    sentences = list(sentences)
    for sentence in sentences:
        if not isinstance(sentence, (str, bytes)):
            raise ZooError(
                "sentences must contain str or bytes; received an element of type "
                f"{type(sentence).__name__}: {sentence!r}"
            )
    return tf.data.Dataset.from_tensor_slices(tf.constant(sentences, tf.string)), len(sentences)


def count_words(
    sentences, lower_case=True, normalization_form="NFKC", batch_size=1024, progress=False
):
    """Count the words `split_words` finds in `sentences`.

    Args:
        sentences: iterable of `str` (or `bytes`), or a `tf.data.Dataset` of
            scalar `tf.string`.
        lower_case, normalization_form: as in `normalize`.
        batch_size: strings tokenized per TensorFlow call.
        progress: show a progress bar (unit "sentence") on stdout, moved
            once a batch; a dataset of unknown size shows a counter.

    Returns:
        `collections.Counter` mapping word (`str`) to count.
    """
    check_options(lower_case, normalization_form)
    dataset, total = _sentence_dataset(sentences)
    dataset = dataset.batch(batch_size).map(
        lambda batch: (
            split_words(batch, lower_case, normalization_form).flat_values,
            tf.size(batch),
        )
    )
    bar = progress_bar(total, "sentence", progress)
    counts = collections.Counter()
    seen = 0
    for words, batch_length in dataset.as_numpy_iterator():
        counts.update(words.tolist())
        seen += int(batch_length)
        if bar is not None and seen != total:
            bar.update(seen)
    if bar is not None:
        bar.update(seen, finalize=True)
    return collections.Counter({word.decode("utf-8"): count for word, count in counts.items()})


def train_wordpiece_vocabulary(
    sentences,
    vocab_size,
    lower_case=True,
    reserved_tokens=RESERVED_TOKENS,
    normalization_form="NFKC",
    min_frequency=2,
    max_unique_chars=1000,
    algorithm="bpe",
    learn_params=None,
    progress=False,
):
    """Learn a WordPiece vocabulary from `sentences`.

    Words come from `split_words` (the tokenizer's own pre-tokenization), so
    the vocabulary matches what `WordPieceTokenizer` will look up.

    Two learners:

    * `"bpe"` (default): frequency-ordered pair merges (see
      `zoo.text.wordpiece_bpe`); 2-3 s for 20,000 German number words.
    * `"tensorflow_text"`: `wordpiece_tokenizer_learner_lib.learn`, the
      learner behind tensorflow-text's `bert_vocab_from_dataset`
      (`learn_params` are passed to it). It is slow on long words (about
      50 s for the same German words: it counts every substring of every
      word) and on compound-heavy text it splits word starts into single
      characters, so it is not the default. Its size can miss `vocab_size`
      a little (it searches a count threshold).

    Args:
        sentences: iterable of `str`, or a `tf.data.Dataset` of scalar
            `tf.string`.
        vocab_size: the largest vocabulary size, reserved tokens included.
        lower_case, normalization_form: as in `normalize`; use the same
            values for the tokenizer.
        reserved_tokens: tokens given the first ids; must start with
            `[PAD]`, `[UNK]`, `[START]`, `[END]`.
        min_frequency: `"bpe"` stops merging pairs seen fewer times.
        max_unique_chars: the largest alphabet (rarer characters are left
            out and become `[UNK]`).
        algorithm: `"bpe"` or `"tensorflow_text"`.
        learn_params: `"tensorflow_text"` only: keyword arguments for
            `wordpiece_tokenizer_learner_lib.learn`.
        progress: show `keras.utils.Progbar`s on stdout: one over the
            sentences while their words are counted, then (`"bpe"` only) one
            over the vocabulary as merges add tokens.

    Returns:
        list of `str`, the vocabulary, reserved tokens first.
    """
    reserved_tokens = _check_reserved_tokens(reserved_tokens)
    if not isinstance(vocab_size, int) or vocab_size < len(reserved_tokens) + 2:
        raise ZooError(
            f"vocab_size must be an int of at least len(reserved_tokens) + 2 = "
            f"{len(reserved_tokens) + 2}; received vocab_size={vocab_size!r}"
        )
    if algorithm not in ALGORITHMS:
        raise ZooError(
            f"algorithm must be 'bpe' or 'tensorflow_text'; received algorithm={algorithm!r}"
        )
    if learn_params is not None and algorithm != "tensorflow_text":
        raise ZooError(
            f"learn_params is only used with algorithm='tensorflow_text'; received "
            f"algorithm={algorithm!r}, learn_params={learn_params!r}"
        )
    if not isinstance(min_frequency, int) or min_frequency < 1:
        raise ZooError(f"min_frequency must be an int >= 1; received {min_frequency!r}")
    if not isinstance(max_unique_chars, int) or max_unique_chars < 1:
        raise ZooError(f"max_unique_chars must be an int >= 1; received {max_unique_chars!r}")

    word_counts = count_words(sentences, lower_case, normalization_form, progress=progress)
    for token in reserved_tokens:
        word_counts.pop(token, None)
    if not word_counts:
        raise ZooError("sentences contain no words; cannot learn a vocabulary")

    if algorithm == "bpe":
        return learn_wordpiece_bpe(
            word_counts, vocab_size, reserved_tokens, min_frequency, max_unique_chars, progress
        )
    # The learner `bert_vocab_from_dataset` calls, fed with our own word counts
    # (its own counting would split words the BERT way, not ours).
    return wordpiece_tokenizer_learner_lib.learn(
        dict(sorted(word_counts.items())),
        vocab_size,
        reserved_tokens,
        **{"max_unique_chars": max_unique_chars, **(learn_params or {})},
    )

