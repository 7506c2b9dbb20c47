"""`zoo.text.copying`: the extended vocabulary of the copy mechanism, against plain-Python
references, with the zoo's SentencePiece and WordPiece tokenizers.

The tokenizers are learned on a corpus without the letters Q, X and Z, so those are
`[UNK]`: the out-of-vocabulary pieces that only a copy can write.
"""

import unicodedata

import numpy as np
import pytest
import tensorflow as tf

from zoo import text
from zoo.datasets import pipeline
from zoo.text import copying
from zoo.text.sentencepiece import SentencePieceTokenizer
from zoo.text.special import UNK_ID

CORPUS = ["the code is abc%d now." % i for i in range(200)] + ["hello world, ab cd!"] * 20
SOURCES = ["the code is QZX9 now QZX.", "Qthe code is ZZ Q now.", "hello"]


@pytest.fixture(scope="module")
def sentencepiece():
    return SentencePieceTokenizer.from_corpus(CORPUS, 60)  # < 1024: no byte fallback


@pytest.fixture(scope="module")
def wordpiece():
    return text.WordPieceTokenizer.from_corpus(CORPUS, 60)


@pytest.fixture(params=["sentencepiece", "wordpiece"])
def tokenizer(request):
    return request.getfixturevalue(request.param)


def reference_extend(source, texts, table, size):
    """Per row: known pieces to their target id, each distinct OOV text to V + k in order
    of first occurrence; the slots' texts."""
    extended, slots = np.zeros_like(source), []
    for row, (ids, strings) in enumerate(zip(source, texts)):
        seen = []
        for i, (token, piece) in enumerate(zip(ids, strings)):
            if table[token] >= 0:
                extended[row, i] = table[token]
                continue
            if piece not in seen:
                seen.append(piece)
            extended[row, i] = size + seen.index(piece)
        slots.append(seen)
    return extended, slots


def test_piece_texts_are_the_tokenizers_ids_and_spans(sentencepiece, wordpiece):
    strings = tf.constant(SOURCES)
    for tokenizer in (sentencepiece, wordpiece):
        ids, texts = copying.piece_texts(tokenizer, strings)
        assert ids.to_list() == tokenizer.tokenize(strings).to_list()
    _, texts = copying.piece_texts(sentencepiece, strings)
    # SentencePiece: the input's own spans, a piece's leading space included; an unknown
    # run of characters is one [UNK] piece.
    assert [b"".join(row).decode() for row in texts.to_list()] == [s.strip() for s in SOURCES]
    assert b"QZX" in texts.to_list()[0]
    _, texts = copying.piece_texts(wordpiece, strings)
    # WordPiece: the lower-cased word's spans, `##` on the pieces inside a word; one [UNK]
    # per unknown character.
    first = texts.to_list()[0]
    assert first[first.index(b"q"):][:4] == [b"q", b"##z", b"##x", b"##9"]


def test_extended_ids_match_the_reference(tokenizer):
    table = copying.copy_table(tokenizer, tokenizer)
    size = tokenizer.vocab_size
    np.testing.assert_array_equal(np.delete(table, UNK_ID), np.delete(np.arange(size), UNK_ID))
    assert table[UNK_ID] == -1
    source, extended, slots = copying.encode_copy_sources(
        tokenizer, table, size, tf.constant(SOURCES), max_length=64)
    ids, texts = copying.piece_texts(tokenizer, tf.constant(SOURCES))
    texts = [row + [b""] for row in texts.to_list()]  # and [END]
    source = source.numpy()
    padded = [row + [b""] * (source.shape[1] - len(row)) for row in texts]
    expected, expected_slots = reference_extend(source, padded, table, size)
    np.testing.assert_array_equal(extended.numpy(), expected)
    for row, seen in zip(slots.numpy().tolist(), expected_slots):
        assert row[: len(seen)] == seen and not any(row[len(seen):])
    # "QZX" twice in the first sentence: one extended id for both.
    assert len(set(extended.numpy()[0][extended.numpy()[0] >= size])) == \
        len(expected_slots[0])


def test_separate_vocabularies_map_by_piece_string(sentencepiece):
    target = SentencePieceTokenizer.from_corpus(["hello world"] * 50 + ["abc"] * 20, 30)
    table = copying.copy_table(sentencepiece, target)
    source_pieces, target_pieces = sentencepiece.get_vocabulary(), target.get_vocabulary()
    for index, piece in enumerate(source_pieces):
        if index == UNK_ID or piece not in target_pieces:
            assert table[index] == -1
        else:
            assert target_pieces[table[index]] == piece
    assert (table >= 0).sum() > 4 and (table < 0).sum() > 1


def test_labels_copy_unknown_pieces_with_a_slots_text(tokenizer):
    table = copying.copy_table(tokenizer, tokenizer)
    size = tokenizer.vocab_size
    _, _, slots = copying.encode_copy_sources(tokenizer, table, size,
                                              tf.constant(SOURCES[:2]), 64)
    targets = tf.constant(["QZX Q 9", "ZZ Q the"])
    labels = copying.encode_copy_labels(tokenizer, targets, slots, 64).to_list()
    ids, texts = copying.piece_texts(tokenizer, targets)
    slots = slots.numpy().tolist()
    for row, (row_ids, row_texts) in enumerate(zip(ids.to_list(), texts.to_list())):
        expected = [size + slots[row].index(piece) if token == UNK_ID and piece in slots[row]
                    else token for token, piece in zip(row_ids, row_texts)]
        assert labels[row] == expected
    assert any(label >= size for label in labels[0]) and any(label >= size for label in labels[1])


def test_detokenize_extended_writes_the_copied_text(sentencepiece):
    table = copying.copy_table(sentencepiece, sentencepiece)
    size = sentencepiece.vocab_size
    _, extended, slots = copying.encode_copy_sources(
        sentencepiece, table, size, tf.constant(SOURCES), 64)
    # Generating the source's own extended ids, then [END], gives its text back.
    end = tf.fill([len(SOURCES), 1], text.END_ID)
    out = copying.detokenize_extended(sentencepiece, tf.concat([extended, end], 1), slots)
    assert [s.decode() for s in out.numpy()] == [s.strip() for s in SOURCES]
    # A real [UNK] reads as nothing (as detokenize), an out-of-range slot as "".
    ids = tf.constant([[size, UNK_ID, size + 1, 3, size]])
    row = copying.detokenize_extended(sentencepiece, ids, slots[:1])
    assert row.numpy().tolist() == [b"QZX"]


@pytest.mark.parametrize("case", ["sentencepiece", "wordpiece"])
def test_canonical_texts_keep_unknown_characters(case, request):
    tokenizer = request.getfixturevalue(case)
    sentences = ["the code is QZX9 now.", "Zhe code, ab cd!"]
    out = [s.decode() for s in copying.canonical_texts(tokenizer, tf.constant(sentences)).numpy()]
    expected = [unicodedata.normalize("NFKC", s) for s in sentences]
    if case == "wordpiece":  # lower-cased, spaced by its rules
        expected = [s.decode() for s in tokenizer.detokenize(
            tokenizer.tokenize(tf.constant([s.lower().replace("q", "a").replace("z", "a")
                                            .replace("x", "a") for s in sentences]))).numpy()]
        expected = [e.replace("aaa9", "qzx9").replace("ahe", "zhe") for e in expected]
    assert out == expected
    plain = [s.decode() for s in tokenizer.detokenize(tokenizer.tokenize(sentences)).numpy()]
    assert plain != out  # detokenize loses them


def test_copy_pipeline_yields_extended_sources_and_labels(sentencepiece):
    pairs = [("the code is QZX9 now.", "QZX9 the"), ("hello ZZ", "ZZ Q hello")]
    dataset = pipeline.make_translation_dataset(pairs, sentencepiece, sentencepiece, 2,
                                                max_length=32, shuffle=False, copy=True)
    inputs, labels = next(iter(dataset))
    size = sentencepiece.vocab_size
    table = copying.copy_table(sentencepiece, sentencepiece)
    source, extended, slots = copying.encode_copy_sources(
        sentencepiece, table, size, tf.constant([s for s, _ in pairs]), 32)
    np.testing.assert_array_equal(inputs["source"].numpy(), source.numpy())
    np.testing.assert_array_equal(inputs["source_extended"].numpy(), extended.numpy())
    words = copying.encode_copy_labels(sentencepiece, tf.constant([t for _, t in pairs]),
                                       slots, 32)
    expected = [row + [text.END_ID] for row in words.to_list()]
    assert [[x for x in row if x] for row in labels.numpy().tolist()] == expected
    assert labels.numpy()[0, 1] >= size and labels.numpy()[1, 1] >= size  # QZX, ZZ copied
    # The decoder input is [START] + the labels but the last: copies included.
    np.testing.assert_array_equal(inputs["target"].numpy()[:, 1:], labels.numpy()[:, :-1]
                                  * (inputs["target"].numpy()[:, 1:] != 0))
