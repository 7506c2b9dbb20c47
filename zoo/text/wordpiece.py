"""`WordPieceTokenizer`: strings <-> WordPiece ids as exportable `tf.function`s (step 6 of
`zoo.text`), with detokenization and its `vocab.txt` + `tokenizer.json` files."""

import collections
import json
import os
import pathlib

import tensorflow as tf
import tensorflow_text as tf_text

from zoo import files
from zoo.errors import ZooError
from zoo.text.ids import ID_SPECS, clean_ids, lookup_ids
from zoo.text.listed_vocabulary import ListedVocabulary
from zoo.text.normalization import check_options, split_words
from zoo.text.special import RESERVED_TOKENS, UNK_ID, UNK_TOKEN
from zoo.text.vocabulary import train_wordpiece_vocabulary
from zoo.text.wordpiece_bpe import SUFFIX_INDICATOR

VOCAB_FILENAME = "vocab.txt"
CONFIG_FILENAME = "tokenizer.json"

# (pattern, rewrite) pairs applied in order by `detokenize` to the pieces
# joined with single spaces.
_DETOKENIZE_RULES = (
    (r"(\d) ([.,]) (\d)", r"\1\2\3"),  # 1 , 234 -> 1,234 ; 3 . 14 -> 3.14
    (r"(\d) ([.,]) (\d)", r"\1\2\3"),  # again, for overlapping matches: 1 . 2 . 3
    (r" ([,.!?;:%)\]}])", r"\1"),
    (r"([(\[{]) ", r"\1"),
    (r" ?([-/']) ?", r"\1"),
)


def join_pieces(tokens):
    """Pieces, ragged `tf.string` `(B, (T))` -> text `(B,)`: `##` pieces glued to the one
    before, words joined by a space, then the punctuation rules (module docstring)."""
    text = tf.strings.reduce_join(tokens, axis=-1, separator=" ")  # (B,)
    text = tf.strings.regex_replace(text, " " + SUFFIX_INDICATOR, "")
    text = tf.strings.regex_replace(text, "^" + SUFFIX_INDICATOR, "")
    for pattern, rewrite in _DETOKENIZE_RULES:
        text = tf.strings.regex_replace(text, pattern, rewrite)
    return text


def _read_vocabulary_file(path):
    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"vocabulary file not found: {path}")
    lines = path.read_text(encoding="utf-8-sig").split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final newline
    tokens = [line.rstrip("\r") for line in lines]
    if "" in tokens:
        raise ZooError(
            f"{path}: line {tokens.index('') + 1} is empty; a vocabulary file has one token "
            "a line (the line number is the id plus one)"
        )
    return tokens


class WordPieceTokenizer(ListedVocabulary, tf.Module):
    """Strings (B,) <-> WordPiece ids (B, (T)), as exportable `tf.function`s.

    Args:
        vocabulary: list of tokens (id = position), or the path of a
            `vocab.txt` (one token a line). Must start with `[PAD]`, `[UNK]`,
            `[START]`, `[END]`; continuation pieces start with `##`.
        lower_case: lower-case before splitting (see `normalize`).
        normalization_form: "NFKC" (default), "NFC", "NFD", "NFKD" or None.
        max_bytes_per_word: longer words become `[UNK]`.
        name: the module's name.

    Exported functions (they survive `tf.saved_model.save`):
        tokenize(strings): `tf.string` (B,) -> ragged int32 (B, (T)), no
            `[START]`/`[END]`; an empty string gives an empty row.
        detokenize(ids): int32/int64, dense (B, T) or ragged (B, (T)) ->
            `tf.string` (B,). Everything from the first `[END]` on is
            dropped, then `[PAD]` and `[START]`; out-of-range ids read as
            `[UNK]`.
        lookup(ids): the same ids -> their tokens, same shape.
        get_vocab_size(): scalar int32.
    The vocabulary itself is the variable `vocab`, `tf.string` (V,).

    Pass tensors or NumPy arrays to `detokenize`/`lookup` (a Python list
    would trace a new graph per value).

    Example:

    >>> tokenizer = WordPieceTokenizer.from_corpus(["drei vier", "vier"], 30)
    >>> ids = tokenizer.tokenize(["Vier drei"])
    >>> tokenizer.detokenize(ids).numpy()
    array([b'vier drei'], dtype=object)
    """

    def __init__(
        self,
        vocabulary,
        lower_case=True,
        normalization_form="NFKC",
        max_bytes_per_word=100,
        name=None,
    ):
        super().__init__(name=name)
        check_options(lower_case, normalization_form)
        if isinstance(vocabulary, (str, os.PathLike)):
            vocabulary = _read_vocabulary_file(vocabulary)
        vocabulary = list(vocabulary)
        self._check_vocabulary(vocabulary)
        if not isinstance(max_bytes_per_word, int) or max_bytes_per_word < 1:
            raise ZooError(
                f"max_bytes_per_word must be a positive int; received {max_bytes_per_word!r}"
            )
        self._vocabulary = vocabulary
        self.lower_case = lower_case
        self.normalization_form = normalization_form
        self.max_bytes_per_word = max_bytes_per_word

        # Tracked resources: the table lives on the module, so SavedModel
        # export carries it.
        self.vocab = tf.Variable(vocabulary, dtype=tf.string, trainable=False, name="vocab")
        self.table = tf.lookup.StaticVocabularyTable(
            tf.lookup.KeyValueTensorInitializer(
                vocabulary, tf.range(len(vocabulary), dtype=tf.int64)
            ),
            num_oov_buckets=1,
        )
        self.wordpiece = tf_text.WordpieceTokenizer(
            self.table,
            suffix_indicator=SUFFIX_INDICATOR,
            max_bytes_per_word=max_bytes_per_word,
            token_out_type=tf.int64,
            unknown_token=UNK_TOKEN,
            split_unknown_characters=True,
        )
        # `detokenize` and `lookup` take several id types, so they have no
        # input_signature: trace each type (any shape) now, so calls of any
        # shape reuse these traces and a SavedModel export carries them all.
        for spec in ID_SPECS:
            self.detokenize.get_concrete_function(spec)
            self.lookup.get_concrete_function(spec)

    @staticmethod
    def _check_vocabulary(vocabulary):
        if tuple(vocabulary[: len(RESERVED_TOKENS)]) != RESERVED_TOKENS:
            raise ZooError(
                f"vocabulary must start with {list(RESERVED_TOKENS)}; received "
                f"{vocabulary[: len(RESERVED_TOKENS)]}"
            )
        for index, token in enumerate(vocabulary):
            if (
                not isinstance(token, str)
                or not token
                or token != token.strip()
                or any(char.isspace() for char in token)
            ):
                raise ZooError(
                    f"vocabulary tokens must be non-empty str without whitespace; received "
                    f"{token!r} at id {index}"
                )
        if len(set(vocabulary)) != len(vocabulary):
            duplicates = sorted(t for t, c in collections.Counter(vocabulary).items() if c > 1)
            raise ZooError(f"vocabulary has duplicate tokens: {duplicates[:10]}")

    @classmethod
    def from_corpus(
        cls, sentences, vocab_size, lower_case=True, normalization_form="NFKC", **kwargs
    ):
        """Learn a vocabulary (`train_wordpiece_vocabulary`) and build a tokenizer on it.

        `kwargs` go to `train_wordpiece_vocabulary` (e.g. `progress=True`).
        """
        vocabulary = train_wordpiece_vocabulary(
            sentences,
            vocab_size,
            lower_case=lower_case,
            normalization_form=normalization_form,
            **kwargs,
        )
        return cls(vocabulary, lower_case=lower_case, normalization_form=normalization_form)

    # === Exported functions ===

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def tokenize(self, strings):
        words = split_words(strings, self.lower_case, self.normalization_form)  # (B, (W))
        pieces = self.wordpiece.tokenize(words)  # (B, (W), (P)) int64
        ids = pieces.merge_dims(-2, -1)  # (B, (T))
        # An unknown character after a word's first piece comes back as the
        # table's out-of-vocabulary bucket (id V): make it [UNK].
        flat = ids.flat_values
        out_of_vocabulary = flat >= tf.size(self.vocab, out_type=tf.int64)
        flat = tf.where(out_of_vocabulary, tf.constant(UNK_ID, tf.int64), flat)
        return ids.with_flat_values(tf.cast(flat, tf.int32))

    @tf.function(autograph=False)
    def lookup(self, ids):
        """Ids (B, T) or (B, (T)) -> tokens, same shape; no cleaning but out-of-range ids
        read as `[UNK]`."""
        return lookup_ids(self.vocab, ids)

    @tf.function(autograph=False)
    def detokenize(self, ids):
        ids = clean_ids(ids, tf.size(self.vocab))  # (B, (T))
        return join_pieces(tf.gather(self.vocab, ids))

    @tf.function(input_signature=[], autograph=False)
    def get_vocab_size(self):
        return tf.size(self.vocab)

    # === Python-side helpers (and ListedVocabulary's vocab_size, get_vocabulary) ===

    def get_config(self):
        """The options other than the vocabulary, as saved in `tokenizer.json`."""
        return {
            "lower_case": self.lower_case,
            "normalization_form": self.normalization_form,
            "max_bytes_per_word": self.max_bytes_per_word,
        }

    def save(self, directory):
        """Write `vocab.txt` (one token a line) and `tokenizer.json` into `directory`."""
        directory = pathlib.Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        files.write_text(directory / VOCAB_FILENAME, "\n".join(self._vocabulary) + "\n")
        files.write_text(directory / CONFIG_FILENAME,
                         json.dumps({"format_version": 1, **self.get_config()}, indent=2) + "\n")
        return directory

    @classmethod
    def load(cls, directory):
        """Rebuild a tokenizer written by `save`."""
        directory = pathlib.Path(directory)
        config_path = directory / CONFIG_FILENAME
        if not config_path.is_file():
            raise FileNotFoundError(f"tokenizer config not found: {config_path}")
        config = json.loads(config_path.read_text(encoding="utf-8"))
        config.pop("format_version", None)
        return cls(_read_vocabulary_file(directory / VOCAB_FILENAME), **config)

    def __repr__(self):
        return (
            f"WordPieceTokenizer(vocab_size={self.vocab_size}, lower_case={self.lower_case}, "
            f"normalization_form={self.normalization_form!r})"
        )


