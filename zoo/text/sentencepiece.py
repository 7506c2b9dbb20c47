"""Cased, reversible subword tokenization: SentencePiece inside the TensorFlow graph.

SentencePiece (Kudo & Richardson 2018, "SentencePiece: A simple and language
independent subword tokenizer and detokenizer for Neural Text Processing";
the unigram model of Kudo 2018, "Subword Regularization") treats the text as
a sequence of characters in which the space is a symbol of its own (`▁`), so
detokenization is exact: pieces are concatenated and `▁` becomes a space
again. Nothing is lower-cased, and the text's own spacing and punctuation
come back.

The model is learned with the `sentencepiece` package (`from_corpus`) and
run with tensorflow-text's `SentencepieceTokenizer`, made inside each traced
function so that its `SentencepieceOp` resource belongs to that graph: the
SavedModel carries it, and loads with `import tensorflow_text` and nothing
from this package (keras-hub's issue #1629 was an untracked
`SentencepieceOp` resource; see `_sentencepiece` for the other trap).

Choices made when learning a model:

* normalisation NFKC (`normalization_rule_name="nfkc"`), with runs of
  spaces kept (`remove_extra_whitespaces=False`): `detokenize(tokenize(s))
  == NFKC(s).strip()` for any valid UTF-8 `s` (spaces and tabs inside the
  text come back as they were; leading and trailing ones do not);
* byte fallback (from a vocabulary of 1024 on): a character the model never
  saw is spelled as its UTF-8 bytes (`<0xC3>`...), never `[UNK]`; digits
  are split one by one;
* the same reserved ids as `zoo.text`: `[PAD]`=0, `[UNK]`=1, `[START]`=2,
  `[END]`=3 (SentencePiece's pad, unk, bos and eos pieces), so the pipeline,
  the decoders and the exports treat both tokenizers alike.

Invalid UTF-8 in the input becomes U+FFFD before tokenization, as in
`zoo.text`. Shape legend: B batch (number of strings), T tokens (ragged).
"""

import io
import pathlib
import re

import sentencepiece as spm
import tensorflow as tf
import tensorflow_text as tf_text

from zoo import files, text
from zoo.errors import ZooError
from zoo.text.listed_vocabulary import ListedVocabulary

MODEL_FILENAME = "sentencepiece.model"
MODEL_TYPES = ("unigram", "bpe")


BYTE_FALLBACK_MIN_VOCAB = 1024  # below this, 256 byte pieces would crowd out the subwords


def train_sentencepiece_model(sentences, vocab_size, model_type="unigram", seed=0,
                              max_sentences=1_000_000):
    """Learn a SentencePiece model on `sentences`; returns its serialized proto (bytes).

    `vocab_size` is an upper bound: a small corpus gives fewer pieces; it
    must leave room for the 4 reserved pieces and the text's characters (a
    `ValueError` says how many). Byte fallback needs 256 pieces of its own,
    so it is on from `vocab_size` 1024 (`BYTE_FALLBACK_MIN_VOCAB`): below,
    a character never seen in training reads as `[UNK]` and detokenizes to
    nothing. The reserved pieces and
    options are those of the module docstring.
    """
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 8:
        raise ZooError(f"vocab_size must be an int >= 8; received vocab_size={vocab_size!r}")
    if model_type not in MODEL_TYPES:
        raise ZooError(f"model_type must be one of {MODEL_TYPES}; received {model_type!r}")
    sentences = [s for s in sentences if isinstance(s, str) and s.strip()]
    if not sentences:
        raise ZooError("cannot learn a SentencePiece model from no text")
    spm.set_random_generator_seed(seed)
    model = io.BytesIO()
    try:
        _train(sentences, model, vocab_size, model_type, max_sentences,
               byte_fallback=vocab_size >= BYTE_FALLBACK_MIN_VOCAB)
    except RuntimeError as error:
        needed = re.search(r"smaller than required_chars\. \d+ vs (\d+)", str(error))
        if needed is None:
            raise
        raise ZooError(
            f"vocab_size={vocab_size} is too small for this text: SentencePiece needs at "
            f"least {needed.group(1)} pieces (4 reserved, every frequent character, and the "
            f"256 bytes from vocab_size {BYTE_FALLBACK_MIN_VOCAB} on)"
        ) from None
    return model.getvalue()


def _train(sentences, model, vocab_size, model_type, max_sentences, byte_fallback):
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences), model_writer=model, vocab_size=vocab_size,
        model_type=model_type, hard_vocab_limit=False, character_coverage=0.9995,
        normalization_rule_name="nfkc", remove_extra_whitespaces=False,
        byte_fallback=byte_fallback, split_digits=True, input_sentence_size=max_sentences,
        shuffle_input_sentence=True, num_threads=2, minloglevel=2,
        pad_id=text.PAD_ID, unk_id=text.UNK_ID, bos_id=text.START_ID, eos_id=text.END_ID,
        pad_piece=text.PAD_TOKEN, unk_piece=text.UNK_TOKEN,
        bos_piece=text.START_TOKEN, eos_piece=text.END_TOKEN,
    )


class SentencePieceTokenizer(ListedVocabulary, tf.Module):
    """Strings (B,) <-> SentencePiece ids (B, (T)), as exportable `tf.function`s.

    Args:
        model: a serialized SentencePiece model (bytes) or the path of a
            `.model` file. Its ids 0-3 must be `[PAD]`, `[UNK]`, `[START]`,
            `[END]` (what `train_sentencepiece_model` writes).
        name: the module's name.

    Exported functions, as `zoo.text.WordPieceTokenizer`'s:
        tokenize(strings): `tf.string` (B,) -> ragged int32 (B, (T)), no
            `[START]`/`[END]`.
        detokenize(ids): int32/int64, dense (B, T) or ragged (B, (T)) ->
            `tf.string` (B,): cut at the first `[END]`, without `[PAD]` and
            `[START]`; out-of-range ids read as `[UNK]` (which reads as "").
        lookup(ids): ids -> their pieces, same shape.
        get_vocab_size(): scalar int32.

    Example:

    >>> tokenizer = SentencePieceTokenizer.from_corpus(["Hola, Mundo."] * 50, 40)
    >>> tokenizer.detokenize(tokenizer.tokenize(["Hola, Mundo."])).numpy()
    array([b'Hola, Mundo.'], dtype=object)
    """

    def __init__(self, model, name=None):
        super().__init__(name=name)
        if isinstance(model, (str, pathlib.Path)):
            path = pathlib.Path(model)
            if not path.is_file():
                raise FileNotFoundError(f"SentencePiece model not found: {path}")
            model = path.read_bytes()
        if not isinstance(model, bytes):
            raise ZooError(f"model must be bytes or a path; received {type(model).__name__}")
        self._model = model
        self._vocabulary = _read_pieces(model)
        self.vocab = tf.Variable(self._vocabulary, dtype=tf.string, trainable=False, name="vocab")
        for spec in text.ID_SPECS:  # trace every id type now (see zoo.text)
            self.detokenize.get_concrete_function(spec)
            self.lookup.get_concrete_function(spec)

    @classmethod
    def from_corpus(cls, sentences, vocab_size, model_type="unigram", seed=0):
        """Learn a model (`train_sentencepiece_model`) and build a tokenizer on it."""
        return cls(train_sentencepiece_model(sentences, vocab_size, model_type, seed))

    # === Exported functions ===

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def tokenize(self, strings):
        strings = tf.strings.unicode_transcode(
            strings, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD)
        strings = tf.strings.strip(strings)  # SentencePiece drops leading spaces anyway
        return self._sentencepiece().tokenize(strings)  # (B, (T)) int32

    @tf.function(autograph=False)
    def lookup(self, ids):
        return text.lookup_ids(self.vocab, ids)

    @tf.function(autograph=False)
    def detokenize(self, ids):
        ids = text.clean_ids(ids, tf.size(self.vocab))  # (B, (T))
        # [UNK] reads as "" (SentencePiece would write " ⁇ "): byte fallback
        # means it only comes from out-of-range ids.
        ids = tf.ragged.boolean_mask(ids, tf.not_equal(ids, text.UNK_ID))
        return self._sentencepiece().detokenize(ids)

    @tf.function(input_signature=[], autograph=False)
    def get_vocab_size(self):
        return tf.size(self.vocab)

    def _sentencepiece(self):
        """tensorflow-text's op, made inside the graph being traced.

        Its resource is owned by the kernel that creates it. Made once,
        eagerly, it would die with TensorFlow's eager kernel cache, which
        `tf.random.set_seed` (and so `keras.utils.set_random_seed`) clears:
        every later call would fail with "Resource ... does not exist". Made
        in each traced function, it lives as long as that function, in this
        process and in a loaded SavedModel alike; the model proto is an
        attribute of the op, so the SavedModel carries it.
        """
        return tf_text.SentencepieceTokenizer(model=self._model, out_type=tf.int32)

    # === Python-side helpers (and ListedVocabulary's vocab_size, get_vocabulary) ===

    def get_config(self):
        """What `tokenizer.json` records besides the model file."""
        return {"type": "sentencepiece", "model_file": MODEL_FILENAME}

    def save(self, directory):
        """Write `sentencepiece.model` and `tokenizer.json` into `directory`, each atomically."""
        directory = pathlib.Path(directory)
        files.replace(directory / MODEL_FILENAME, lambda path: path.write_bytes(self._model))
        files.write_json(directory / text.CONFIG_FILENAME,
                         {"format_version": 1, **self.get_config()})
        return directory

    @classmethod
    def load(cls, directory):
        """Rebuild a tokenizer written by `save`."""
        return cls(pathlib.Path(directory) / MODEL_FILENAME)

    def __repr__(self):
        return f"SentencePieceTokenizer(vocab_size={self.vocab_size})"


def _read_pieces(model):
    """The model's pieces, id = position; checks the reserved ids."""
    processor = spm.SentencePieceProcessor()
    try:
        processor.LoadFromSerializedProto(model)
    except RuntimeError as error:
        raise ZooError(f"not a SentencePiece model ({error})") from None
    pieces = [processor.IdToPiece(i) for i in range(processor.GetPieceSize())]
    if tuple(pieces[: len(text.RESERVED_TOKENS)]) != text.RESERVED_TOKENS:
        raise ZooError(
            f"the SentencePiece model's first pieces must be {list(text.RESERVED_TOKENS)}; "
            f"received {pieces[: len(text.RESERVED_TOKENS)]}"
        )
    return pieces
