"""Tests for zoo/text/vocabulary.py: learning WordPiece vocabularies (both learners)."""


import pytest
import tensorflow as tf

from zoo import text


def to_str(tensor):
    return [value.decode("utf-8") for value in tensor.numpy().tolist()]


def test_vocabulary_starts_with_reserved_tokens_and_respects_size(german, english):
    for tokenizer in (german, english):
        vocabulary = tokenizer.get_vocabulary()
        assert vocabulary[:4] == list(text.RESERVED_TOKENS)
        assert len(vocabulary) == tokenizer.vocab_size <= 200
        assert len(set(vocabulary)) == len(vocabulary)
        assert int(tokenizer.get_vocab_size()) == tokenizer.vocab_size


def test_vocabulary_learns_german_number_morphemes(german):
    vocabulary = set(german.get_vocabulary())
    assert {"##hundert", "##tausend", "##und"} <= vocabulary
    # Every letter in both forms, so no German number word is ever [UNK].
    for char in "abcdefghilnrstuvwzßü":
        assert char in vocabulary or "##" + char in vocabulary


def test_punctuation_gets_no_continuation_form(english):
    vocabulary = english.get_vocabulary()
    assert "," in vocabulary and "-" in vocabulary
    assert "##," not in vocabulary and "##-" not in vocabulary


def test_vocabulary_learning_is_deterministic(numbers_data):
    sentences = numbers_data.train_sources[:500]
    first = text.train_wordpiece_vocabulary(sentences, 120)
    second = text.train_wordpiece_vocabulary(list(reversed(sentences)), 120)
    assert first == second


def test_vocabulary_from_dataset_matches_list(numbers_data):
    sentences = numbers_data.train_targets[:300]
    from_list = text.train_wordpiece_vocabulary(sentences, 80)
    from_dataset = text.train_wordpiece_vocabulary(
        tf.data.Dataset.from_tensor_slices(sentences), 80
    )
    assert from_list == from_dataset


def test_vocabulary_progress_only_when_asked_and_same_result(capsys, numbers_data):
    sentences = numbers_data.train_sources  # 1,500 sentences: two batches of counting
    quiet = text.train_wordpiece_vocabulary(sentences, 300)
    assert capsys.readouterr().out == ""
    shown = text.train_wordpiece_vocabulary(sentences, 300, progress=True)
    out = capsys.readouterr().out
    assert shown == quiet and len(shown) == 300
    assert "1500/1500" in out and "sentence" in out  # counting words
    assert "300/300" in out and "token" in out  # merges up to the vocabulary size


def test_vocabulary_progress_ends_at_the_size_reached(capsys, numbers_data):
    sentences = numbers_data.train_targets[:200]
    vocabulary = text.train_wordpiece_vocabulary(sentences, 5000, progress=True)
    out = capsys.readouterr().out
    assert len(vocabulary) < 5000  # merging ran out of frequent pairs
    assert f"{len(vocabulary)}/{len(vocabulary)}" in out and "/5000" in out


def test_vocabulary_progress_counts_a_dataset_of_unknown_size(capsys, numbers_data):
    sentences = numbers_data.train_targets[:300]
    dataset = tf.data.Dataset.from_tensor_slices(sentences).filter(lambda s: True)
    assert int(dataset.cardinality()) < 0  # unknown
    vocabulary = text.train_wordpiece_vocabulary(dataset, 80, progress=True)
    assert "300/Unknown" in capsys.readouterr().out
    assert vocabulary == text.train_wordpiece_vocabulary(sentences, 80)


def test_from_corpus_forwards_progress(capsys, numbers_data):
    sentences = numbers_data.train_targets[:100]
    tokenizer = text.WordPieceTokenizer.from_corpus(sentences, 60, progress=True)
    out = capsys.readouterr().out
    assert "100/100" in out and f"{tokenizer.vocab_size}/{tokenizer.vocab_size}" in out
    text.WordPieceTokenizer.from_corpus(sentences, 60)
    assert capsys.readouterr().out == ""


def test_tensorflow_text_learner_builds_a_usable_vocabulary(numbers_data):
    sentences = numbers_data.train_targets[:300]
    vocabulary = text.train_wordpiece_vocabulary(
        sentences, 100, algorithm="tensorflow_text", learn_params={"lower_thresh": 2}
    )
    assert vocabulary[:4] == list(text.RESERVED_TOKENS)
    assert len(vocabulary) <= 100
    tokenizer = text.WordPieceTokenizer(vocabulary)
    ids = tokenizer.tokenize(sentences[:20])
    assert to_str(tokenizer.detokenize(ids)) == sentences[:20]


def test_extra_reserved_tokens_follow_the_fixed_four():
    vocabulary = text.train_wordpiece_vocabulary(
        ["abc abd"] * 3, 30, reserved_tokens=list(text.RESERVED_TOKENS) + ["[MASK]"]
    )
    assert vocabulary[:5] == list(text.RESERVED_TOKENS) + ["[MASK]"]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(sentences=["a b"], vocab_size=5), "vocab_size"),
        (
            dict(sentences=["a b"], vocab_size=50, reserved_tokens=["[UNK]", "[PAD]"]),
            "reserved_tokens must start",
        ),
        (dict(sentences=["", "  "], vocab_size=50), "no words"),
        (dict(sentences="just one string", vocab_size=50), "not a single string"),
        (dict(sentences=["a", 3], vocab_size=50), "int"),
        (dict(sentences=["a b"], vocab_size=50, algorithm="sentencepiece"), "algorithm"),
        (dict(sentences=["a b"], vocab_size=50, learn_params={"lower_thresh": 1}), "learn_params"),
        (dict(sentences=["a b"], vocab_size=50, normalization_form="NFX"), "normalization_form"),
    ],
)
def test_train_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        text.train_wordpiece_vocabulary(**kwargs)


