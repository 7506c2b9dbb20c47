"""`zoo.text.tokenizers`: learning by name, and loading whichever kind a folder holds."""

import pytest
import tensorflow as tf

from zoo import text
from zoo.text import tokenizers
from zoo.text.sentencepiece import SentencePieceTokenizer

SENTENCES = ["Tres cientos veinte.", "Hola, Mundo.", "¿Qué tal?"] * 10


@pytest.mark.parametrize("name, cls", [("sentencepiece", SentencePieceTokenizer),
                                       ("wordpiece", text.WordPieceTokenizer)])
def test_learn_save_and_load_each_kind(tmp_path, name, cls):
    tokenizer = tokenizers.learn(name, SENTENCES, 60)
    assert isinstance(tokenizer, cls) and tokenizers.kind(tokenizer) == name
    tokenizer.save(tmp_path / name)
    loaded = tokenizers.load(tmp_path / name)
    assert type(loaded) is cls
    strings = tf.constant(SENTENCES[:3])
    assert loaded.tokenize(strings).to_list() == tokenizer.tokenize(strings).to_list()


def test_sentencepiece_is_cased_wordpiece_is_not():
    cased = tokenizers.learn("sentencepiece", SENTENCES, 60)
    lowered = tokenizers.learn("wordpiece", SENTENCES, 60)
    for tokenizer, expected in ((cased, b"Hola, Mundo."), (lowered, b"hola, mundo.")):
        ids = tokenizer.tokenize(tf.constant(["Hola, Mundo."]))
        assert tokenizer.detokenize(ids).numpy()[0] == expected


def test_bad_names_and_folders(tmp_path):
    with pytest.raises(ValueError, match="tokenizer must be one of sentencepiece, wordpiece"):
        tokenizers.learn("bpe", SENTENCES, 60)
    with pytest.raises(FileNotFoundError, match="tokenizer config not found"):
        tokenizers.load(tmp_path)
    (tmp_path / "tokenizer.json").write_text("{truncated")
    with pytest.raises(ValueError, match="corrupt"):
        tokenizers.load(tmp_path)
