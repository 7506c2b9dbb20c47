"""Tests for zoo/text/wordpiece.py: tokenize, detokenize, bad input, save and load, export."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from zoo import text

MIXED = [
    "One thousand, two hundred and thirty-four.",
    "Dienstag, 5. März 2024 (heute)!",
    "2024-03-05 and 3.14 or 1,234; don't stop: 50%/100%, and/or?",
    "Straße, Größe und Füße.",
] * 3
@pytest.fixture(scope="module")
def mixed():
    return text.WordPieceTokenizer.from_corpus(MIXED, 150, min_frequency=1)


def to_str(tensor):
    return [value.decode("utf-8") for value in tensor.numpy().tolist()]


# === Tokenize / detokenize ===


@pytest.mark.large
def test_round_trip_on_numbers_is_exact(numbers_data, german, english):
    for tokenizer, sentences in (
        (german, numbers_data.test_sources),
        (english, numbers_data.test_targets),
    ):
        ids = tokenizer.tokenize(sentences)
        assert isinstance(ids, tf.RaggedTensor) and ids.dtype == tf.int32
        assert ids.shape[0] == len(sentences)
        assert not np.any(ids.flat_values.numpy() == text.UNK_ID)
        assert to_str(tokenizer.detokenize(ids)) == sentences


def test_tokenize_splits_into_word_pieces(german, english):
    tokens = english.lookup(english.tokenize(["twenty-four thousand, one"]))
    assert tokens.to_list() == [[b"twenty", b"-", b"four", b"thousand", b",", b"one"]]
    pieces = german.lookup(german.tokenize(["vierundzwanzig"])).to_list()[0]
    assert b"".join(pieces).decode("utf-8").replace("##", "") == "vierundzwanzig"
    assert all(piece.startswith(b"##") for piece in pieces[1:])


def test_normalisation_lower_case_nfkc_and_whitespace(english):
    ids = english.tokenize(["  TWENTY-ＦＯＵＲ\t\nthousand  "])  # full-width letters: NFKC
    assert to_str(english.detokenize(ids)) == ["twenty-four thousand"]
    assert to_str(text.normalize(tf.constant(["ÄÖÜ ẞ ﬁ"]))) == ["äöü ß fi"]
    cased = text.normalize(tf.constant(["Größe"]), lower_case=False, normalization_form=None)
    assert to_str(cased) == ["Größe"]


def test_punctuation_spacing_is_restored(mixed):
    sentences = [sentence.lower() for sentence in MIXED[:4]]
    ids = mixed.tokenize(sentences)
    assert not np.any(ids.flat_values.numpy() == text.UNK_ID)
    assert to_str(mixed.detokenize(ids)) == sentences


def test_tokenize_never_emits_pad_start_or_end(english):
    ids = english.tokenize(["[START] one [END] [PAD] two"]).flat_values.numpy()
    for reserved in (text.PAD_ID, text.START_ID, text.END_ID):
        assert reserved not in ids


def test_detokenize_strips_pad_start_and_cuts_at_end(english):
    one, two = english.tokenize(["one", "two"]).flat_values.numpy().tolist()
    dense = tf.constant([[2, one, two, 3, two, 0], [2, two, 0, 0, 0, 0], [3, one, 0, 0, 0, 0]])
    expected = ["one two", "two", ""]
    assert to_str(english.detokenize(dense)) == expected
    assert to_str(english.detokenize(tf.cast(dense, tf.int64))) == expected
    assert to_str(english.detokenize(dense.numpy())) == expected
    ragged = tf.ragged.constant([[2, one, two, 3, two], [two], []], dtype=tf.int64)
    assert to_str(english.detokenize(ragged)) == ["one two", "two", ""]


def test_out_of_range_ids_read_as_unk(english):
    ids = tf.constant([[english.vocab_size, -1, 5]])
    tokens = english.lookup(ids).numpy().tolist()[0]
    assert tokens[:2] == [b"[UNK]", b"[UNK]"]
    assert to_str(english.detokenize(ids))[0].startswith("[UNK] [UNK]")


def test_lookup_keeps_shape(english):
    dense = tf.constant([[4, 5], [6, 0]])
    assert english.lookup(dense).shape == (2, 2)
    ragged = english.tokenize(["one two", ""])
    tokens = english.lookup(ragged)
    assert isinstance(tokens, tf.RaggedTensor)
    assert tokens.row_lengths().numpy().tolist() == ragged.row_lengths().numpy().tolist()


# === Bad input ===


def test_empty_string_and_empty_batch(english):
    ids = english.tokenize(["", "one", ""])
    assert ids.row_lengths().numpy().tolist()[0] == 0 and ids.row_lengths().numpy()[2] == 0
    assert to_str(english.detokenize(ids)) == ["", "one", ""]
    empty = english.tokenize(tf.constant([], tf.string))
    assert empty.shape[0] == 0
    assert english.detokenize(empty).shape == (0,)
    assert english.detokenize(tf.zeros([0, 0], tf.int32)).shape == (0,)


def test_unknown_characters_and_emoji_become_unk(english):
    ids = english.tokenize(["one 😀 two", "one😀two", "ωone", "oneω"])
    tokens = english.lookup(ids).to_list()
    assert tokens[0] == [b"one", b"[UNK]", b"two"]
    assert tokens[1] == [b"one", b"[UNK]", b"two"]  # a symbol is a word of its own
    # an unknown letter is one [UNK]; the rest of its word is still split
    assert tokens[2][0] == b"[UNK]" and len(tokens[2]) > 1
    assert tokens[3][0] == b"one" and tokens[3][-1] == b"[UNK]"
    # (an [UNK] inside a word loses its glue: there is only one [UNK] id)
    assert to_str(english.detokenize(ids))[2:] == ["[UNK]one", "one [UNK]"]
    assert english.vocab_size not in ids.flat_values.numpy()  # no out-of-vocabulary bucket id


def test_invalid_utf8_and_control_bytes_do_not_crash(english):
    ids = english.tokenize(tf.constant([b"\xff\xfe", b"one \xc3 two", b"one\x00two\x07"]))
    tokens = english.lookup(ids).to_list()
    assert tokens[0] == [b"[UNK]", b"[UNK]"]  # each bad byte -> U+FFFD -> [UNK]
    assert tokens[1] == [b"one", b"[UNK]", b"two"]
    assert tokens[2] == [b"one", b"two"]  # control characters are spaces


def test_tokenize_rejects_wrong_rank(english):
    with pytest.raises((ValueError, TypeError)):
        english.tokenize(tf.constant("one"))


# === Construction, save and load ===


@pytest.mark.parametrize(
    "vocabulary, message",
    [
        (["[UNK]", "[PAD]", "[START]", "[END]", "a"], "must start with"),
        (list(text.RESERVED_TOKENS) + ["a", "a"], "duplicate"),
        (list(text.RESERVED_TOKENS) + ["a b"], "whitespace"),
        (list(text.RESERVED_TOKENS) + [""], "non-empty"),
    ],
)
def test_tokenizer_rejects_bad_vocabulary(vocabulary, message):
    with pytest.raises(ValueError, match=message):
        text.WordPieceTokenizer(vocabulary)


def test_tokenizer_rejects_bad_options():
    vocabulary = list(text.RESERVED_TOKENS) + ["a"]
    with pytest.raises(ValueError, match="normalization_form"):
        text.WordPieceTokenizer(vocabulary, normalization_form="nfkc")
    with pytest.raises(ValueError, match="lower_case"):
        text.WordPieceTokenizer(vocabulary, lower_case="yes")
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        text.WordPieceTokenizer("/nonexistent/missing.txt")


def test_vocabulary_file_with_a_blank_line_is_rejected(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("[PAD]\n[UNK]\n[START]\n[END]\n\na\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 5 is empty"):
        text.WordPieceTokenizer(path)
    path.write_text("\ufeff[PAD]\r\n[UNK]\r\n[START]\r\n[END]\r\na\r\n", encoding="utf-8")
    assert text.WordPieceTokenizer(path).get_vocabulary()[-1] == "a"  # BOM and CRLF are fine


def test_save_and_load(tmp_path, german, numbers_data):
    directory = german.save(tmp_path / "tok")
    lines = (directory / "vocab.txt").read_text(encoding="utf-8").splitlines()
    assert lines == german.get_vocabulary()
    config = json.loads((directory / "tokenizer.json").read_text(encoding="utf-8"))
    assert config["lower_case"] is True and config["normalization_form"] == "NFKC"

    loaded = text.WordPieceTokenizer.load(directory)
    assert loaded.get_vocabulary() == german.get_vocabulary()
    assert loaded.get_config() == german.get_config()
    sentences = numbers_data.test_sources[:50]
    assert loaded.tokenize(sentences).to_list() == german.tokenize(sentences).to_list()

    from_file = text.WordPieceTokenizer(directory / "vocab.txt")
    assert from_file.get_vocabulary() == german.get_vocabulary()

    with pytest.raises(FileNotFoundError, match="tokenizer.json"):
        text.WordPieceTokenizer.load(tmp_path / "nothing-here")


@pytest.mark.large
def test_saved_model_loads_in_a_fresh_process_without_our_code(tmp_path, english):
    path = tmp_path / "tokenizer_savedmodel"
    tf.saved_model.save(english, str(path))
    sentences = ["Twenty-four thousand, one", "", "one 😀"]
    expected = {
        "ids": english.tokenize(sentences).to_list(),
        "text": to_str(english.detokenize(english.tokenize(sentences))),
        "dense_text": to_str(english.detokenize(tf.constant([[2, 5, 6, 3, 0]], tf.int64))),
        "vocab_size": english.vocab_size,
    }
    code = textwrap.dedent(
        f"""
        import json, sys
        import tensorflow as tf
        import tensorflow_text  # registers the ops
        model = tf.saved_model.load({str(path)!r})
        ids = model.tokenize(tf.constant({sentences!r}))
        print(json.dumps({{
            "ids": ids.to_list(),
            "text": [t.decode() for t in model.detokenize(ids).numpy().tolist()],
            "dense_text": [t.decode() for t in model.detokenize(
                tf.constant([[2, 5, 6, 3, 0]], tf.int64)).numpy().tolist()],
            "vocab_size": int(model.get_vocab_size()),
            "our_modules": sorted(m for m in sys.modules
                                  if m.split(".")[0] in ("zoo", "keras_attention")),
        }}))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,  # not the repository, so `zoo` is not importable by accident
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    assert loaded.pop("our_modules") == []
    assert loaded == expected
