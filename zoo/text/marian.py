"""Marian's (OPUS-MT's) tokenizer inside the TensorFlow graph: SentencePiece pieces -> vocab.json ids.

Hugging Face's `MarianTokenizer` splits text with the folder's SentencePiece
model (`source.spm` for the source, `target.spm` for the target) into
pieces and maps each piece through `vocab.json` (Marian's ids are the
vocab.json ids, not the SentencePiece ids); a piece missing from vocab.json
becomes `<unk>`. A leading language code such as `>>fr<<` (multi-target
models) is one piece of its own. `</s>` is appended by the caller (the
export and the pipeline), as Hugging Face's tokenizer does.

Detokenization follows `batch_decode(skip_special_tokens=True)`: cut at the
first `</s>`, drop `<pad>`, `</s>` and `<unk>`, concatenate the pieces,
turn `▁` into spaces and strip the ends. Nothing is lower-cased; case and
punctuation are kept.

tensorflow-text's `SentencepieceTokenizer` is made inside each traced
function, as in `zoo.text.sentencepiece` (its resource is kernel-owned:
made eagerly, it would die when `tf.random.set_seed` clears the eager kernel
cache). Shape legend: B strings, T tokens (ragged).
"""

import json
import pathlib

import tensorflow as tf
import tensorflow_text as tf_text

from zoo import files, text
from zoo.errors import ZooError
from zoo.text.listed_vocabulary import ListedVocabulary

TYPE = "marian"
SPM_FILENAME = "marian.spm"
VOCAB_FILENAME = "vocab.json"
UNDERLINE = "\u2581"  # SentencePiece's word-boundary mark ▁


class MarianTokenizer(ListedVocabulary, tf.Module):
    """Strings (B,) <-> Marian ids (B, (T)), as exportable `tf.function`s.

    Args:
        spm_model: serialized SentencePiece model (bytes) or a `.spm` path.
        vocab: `{piece: id}` (vocab.json) or its path.
        pad_id, end_id: Marian's `<pad>` (also the decoder start) and `</s>` ids
            (config.json's `pad_token_id`, `eos_token_id`); `<unk>` comes from vocab.json.
        start_id: the decoder start id; default `pad_id`.

    Exported functions, as the zoo's other tokenizers:
        tokenize(strings): `tf.string` (B,) -> ragged int32 (B, (T)), no `</s>`.
        detokenize(ids): int32/int64 (B, T) or (B, (T)) -> `tf.string` (B,).
        lookup(ids): ids -> their pieces, same shape.
    """

    vocabulary_attribute = "_pieces"  # the pieces of vocab.json, id = position

    def __init__(self, spm_model, vocab, pad_id, end_id, start_id=None, name=None):
        super().__init__(name=name)
        if isinstance(spm_model, (str, pathlib.Path)):
            spm_model = _read_bytes(spm_model)
        self.vocab_file = "vocab.json"
        if isinstance(vocab, (str, pathlib.Path)):
            self.vocab_file = str(vocab)
            vocab = read_vocab(vocab)
        if "<unk>" not in vocab:
            raise ZooError(f"{self.vocab_file}: has no <unk> piece")
        self._model = spm_model
        self._vocab = dict(vocab)
        size = max(vocab.values()) + 1
        pieces = [""] * size
        for piece, index in vocab.items():
            pieces[index] = piece
        self._pieces = pieces
        self.pad_id, self.end_id = int(pad_id), int(end_id)
        self.start_id = self.pad_id if start_id is None else int(start_id)
        self.unk_id = int(vocab["<unk>"])
        for name_, value in (("pad_id", self.pad_id), ("end_id", self.end_id)):
            if not 0 <= value < size:
                raise ZooError(f"{self.vocab_file}: {name_}={value} is not an id of its {size} pieces")
        self.vocab = tf.Variable(pieces, dtype=tf.string, trainable=False, name="vocab")
        self.table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(list(vocab.keys()), tf.string),
                tf.constant(list(vocab.values()), tf.int32),
            ),
            default_value=self.unk_id,
        )
        for spec in text.ID_SPECS:  # trace every id type now (see zoo.text)
            self.detokenize.get_concrete_function(spec)
            self.lookup.get_concrete_function(spec)

    @property
    def special_ids(self):
        """`{"pad", "start", "end", "unk"}`: what the decoders and the export take."""
        return {"pad": self.pad_id, "start": self.start_id, "end": self.end_id, "unk": self.unk_id}

    # === Exported functions ===

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def tokenize(self, strings):
        strings = tf.strings.unicode_transcode(
            strings, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD)
        # A leading language code `>>xx<<` is a piece of its own (MarianTokenizer.remove_language_code).
        has_code = tf.strings.regex_full_match(strings, r"(?s)>>.*?<<.*")
        code = tf.where(has_code, tf.strings.regex_replace(strings, r"(?s)^(>>.*?<<).*$", r"\1"), "")
        rest = tf.where(has_code, tf.strings.regex_replace(strings, r"(?s)^>>.*?<<", ""), strings)
        pieces = self._sentencepiece().tokenize(rest)  # (B, (T)) tf.string
        code = tf.ragged.boolean_mask(code[:, None], tf.not_equal(code, "")[:, None])  # (B, (0|1))
        pieces = tf.concat([code, pieces], axis=1)
        return tf.ragged.map_flat_values(self.table.lookup, pieces)  # (B, (T)) int32

    @tf.function(autograph=False)
    def lookup(self, ids):
        unk = tf.constant(self.unk_id, ids.dtype)

        def gather(flat):
            in_range = (flat >= 0) & (flat < tf.cast(tf.size(self.vocab), flat.dtype))
            return tf.gather(self.vocab, tf.where(in_range, flat, unk))

        if isinstance(ids, tf.RaggedTensor):
            return tf.ragged.map_flat_values(gather, ids)
        return gather(ids)

    @tf.function(autograph=False)
    def detokenize(self, ids):
        if isinstance(ids, tf.RaggedTensor):
            ids = ids.to_tensor(default_value=self.pad_id)
        ids = tf.cast(ids, tf.int32)  # (B, T)
        before_end = tf.equal(tf.cumsum(tf.cast(tf.equal(ids, self.end_id), tf.int32), axis=1), 0)
        in_range = (ids >= 0) & (ids < tf.size(self.vocab))
        keep = before_end & in_range & tf.not_equal(ids, self.pad_id) & tf.not_equal(ids, self.unk_id)
        pieces = tf.gather(self.vocab, tf.ragged.boolean_mask(ids, keep))  # (B, (T))
        joined = tf.strings.reduce_join(pieces, axis=1)  # (B,)
        return tf.strings.strip(tf.strings.regex_replace(joined, UNDERLINE, " "))

    @tf.function(input_signature=[], autograph=False)
    def get_vocab_size(self):
        return tf.size(self.vocab)

    def _sentencepiece(self):
        """tensorflow-text's op, made inside the graph being traced (see the module docstring)."""
        return tf_text.SentencepieceTokenizer(model=self._model, out_type=tf.string)

    # === Python-side helpers (and ListedVocabulary's vocab_size, get_vocabulary) ===

    def get_config(self):
        return {"type": TYPE, "model_file": SPM_FILENAME, "vocab_file": VOCAB_FILENAME,
                "pad_id": self.pad_id, "start_id": self.start_id, "end_id": self.end_id}

    def save(self, directory):
        """Write `marian.spm`, `vocab.json` and `tokenizer.json` into `directory`."""
        directory = pathlib.Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        files.replace(directory / SPM_FILENAME, lambda path: path.write_bytes(self._model))
        files.write_text(directory / VOCAB_FILENAME,
                         json.dumps(self._vocab, ensure_ascii=False, indent=1) + "\n")
        files.write_text(directory / text.CONFIG_FILENAME,
                         json.dumps({"format_version": 1, **self.get_config()}, indent=2) + "\n")
        return directory

    @classmethod
    def load(cls, directory):
        """Rebuild a tokenizer written by `save`."""
        directory = pathlib.Path(directory)
        config = json.loads((directory / text.CONFIG_FILENAME).read_text(encoding="utf-8"))
        return cls(directory / config["model_file"], directory / config["vocab_file"],
                   config["pad_id"], config["end_id"], config["start_id"])

    def __repr__(self):
        return f"MarianTokenizer(vocab_size={self.vocab_size}, special_ids={self.special_ids})"


def _read_bytes(path):
    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found (a Marian folder has source.spm and target.spm)")
    return path.read_bytes()


def read_vocab(path):
    """`vocab.json` as `{piece: id}`, checked: a JSON object of distinct non-negative int ids."""
    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found (a Marian folder has vocab.json)")
    try:
        vocab = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ZooError(f"{path}: not valid JSON ({error})") from None
    if not isinstance(vocab, dict) or not vocab or not all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in vocab.values()
    ):
        raise ZooError(f"{path}: must be a JSON object of piece -> non-negative int id")
    if len(set(vocab.values())) != len(vocab):
        raise ZooError(f"{path}: two pieces share an id")
    return vocab
