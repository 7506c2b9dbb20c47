"""WordPiece tokenization on tensorflow-text, exportable as a SavedModel.

A `WordPieceTokenizer` turns a batch of strings into ragged integer ids and
back, entirely with TensorFlow ops, so it can run inside a `tf.data` pipeline
and be exported next to a model (Schuster & Nakajima 2012, "Japanese and
Korean voice search"; Wu et al. 2016, "Google's Neural Machine Translation
System", section 4.1).

Text goes through these steps (`normalize` and `split_words`):

1. invalid UTF-8 bytes are replaced by U+FFFD (`tf.strings.unicode_transcode`
   with `errors="replace"`), so broken input never crashes;
2. Unicode normalisation, NFKC by default (`tensorflow_text.normalize_utf8`);
3. control and format characters (`\\p{Cc}`, `\\p{Cf}`, NUL included) become
   spaces;
4. optional lower-casing (`tf.strings.lower(..., encoding="utf-8")`, which
   keeps accents and "ß": German number words stay readable);
5. splitting on whitespace, keeping punctuation and symbols (BERT's
   delimiters plus `\\p{S}`, so emoji and currency signs are words of their
   own) as separate words (`tensorflow_text.regex_split`);
6. WordPiece, greedy longest-match-first (`tensorflow_text.WordpieceTokenizer`):
   a word is split into a first piece and `##`-prefixed continuation pieces.
   A character the vocabulary does not know becomes `[UNK]`, the rest of its
   word is still split into pieces.

Only ops that TF Serving's bundled tensorflow-text registers are used
(`NormalizeUTF8`, `RegexSplitWithOffsets`, `WordpieceTokenizeWithOffsets`,
plus core TensorFlow ops), so a SavedModel of the tokenizer loads with
`import tensorflow_text; tf.saved_model.load(path)` and nothing from this
package.

Reserved tokens, ids fixed: `[PAD]`=0, `[UNK]`=1, `[START]`=2, `[END]`=3.
`tokenize` never emits `[PAD]`, `[START]` or `[END]` (the text "[START]" is
split like any other text); adding them is `zoo.pipeline`'s job.

Detokenization joins pieces: `##` pieces are glued to the previous piece,
words are separated by one space, then punctuation spacing is restored by
fixed rules: no space before `, . ! ? ; : % ) ] }`, none after `( [ {`, none
around `- / '`, and none around `.` or `,` between two digits. Text written
that way (e.g. "one thousand, two hundred and thirty-four", "5. märz 2024",
"2024-03-05") comes back exactly, after normalisation.

Shape legend: B batch (number of strings), W words, T tokens (ragged).
"""

import collections
import heapq
import json
import os
import pathlib

import tensorflow as tf
import tensorflow_text as tf_text

from zoo import files
from zoo.progress import progress_bar
from zoo.tokens import (  # noqa: F401 - part of this module's API
    END_ID,
    END_TOKEN,
    PAD_ID,
    PAD_TOKEN,
    RESERVED_TOKENS,
    START_ID,
    START_TOKEN,
    UNK_ID,
    UNK_TOKEN,
)

SUFFIX_INDICATOR = "##"
NORMALIZATION_FORMS = ("NFC", "NFKC", "NFD", "NFKD")
VOCAB_FILENAME = "vocab.txt"
CONFIG_FILENAME = "tokenizer.json"

# BERT's word delimiters (tensorflow_text/python/ops/bert_tokenizer.py:
# whitespace, ASCII punctuation and symbols, \p{P}, CJK ideographs) plus every
# Unicode symbol (\p{S}: emoji, currency, maths).
_PUNCTUATION_PATTERN = "|".join(
    [
        r"[!-/]",
        r"[:-@]",
        r"[\[-`]",
        r"[{-~]",
        r"[\p{P}]",
        r"[\p{S}]",
        r"[\x{4E00}-\x{9FFF}]",
        r"[\x{3400}-\x{4DBF}]",
        r"[\x{20000}-\x{2A6DF}]",
        r"[\x{2A700}-\x{2B73F}]",
        r"[\x{2B740}-\x{2B81F}]",
        r"[\x{2B820}-\x{2CEAF}]",
        r"[\x{F900}-\x{FAFF}]",
        r"[\x{2F800}-\x{2FA1F}]",
    ]
)
_DELIMITER_PATTERN = r"\s+|" + _PUNCTUATION_PATTERN

# (pattern, rewrite) pairs applied in order by `detokenize` to the pieces
# joined with single spaces.
_DETOKENIZE_RULES = (
    (r"(\d) ([.,]) (\d)", r"\1\2\3"),  # 1 , 234 -> 1,234 ; 3 . 14 -> 3.14
    (r"(\d) ([.,]) (\d)", r"\1\2\3"),  # again, for overlapping matches: 1 . 2 . 3
    (r" ([,.!?;:%)\]}])", r"\1"),
    (r"([(\[{]) ", r"\1"),
    (r" ?([-/']) ?", r"\1"),
)


def _check_options(lower_case, normalization_form):
    if not isinstance(lower_case, bool):
        raise ValueError(f"lower_case must be a bool; received lower_case={lower_case!r}")
    if normalization_form is not None and normalization_form not in NORMALIZATION_FORMS:
        raise ValueError(
            f"normalization_form must be one of {NORMALIZATION_FORMS} or None; "
            f"received normalization_form={normalization_form!r}"
        )


def normalize(strings, lower_case=True, normalization_form="NFKC"):
    """Repair, normalise and optionally lower-case UTF-8 strings (steps 1-4).

    Args:
        strings: `tf.string` tensor of any shape.
        lower_case: lower-case with `tf.strings.lower(encoding="utf-8")`.
        normalization_form: "NFKC" (default), "NFC", "NFD", "NFKD" or None.

    Returns:
        `tf.string` tensor of the same shape.
    """
    _check_options(lower_case, normalization_form)
    strings = tf.strings.unicode_transcode(
        strings, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD
    )
    if normalization_form is not None:
        strings = tf_text.normalize_utf8(strings, normalization_form)
    # Before lower-casing: tf.strings.lower stops at a NUL byte.
    strings = tf.strings.regex_replace(strings, r"\p{Cc}|\p{Cf}", " ")
    if lower_case:
        strings = tf.strings.lower(strings, encoding="utf-8")
    return strings


def split_words(strings, lower_case=True, normalization_form="NFKC"):
    """Normalise `strings` (B,) and split them into words (B, (W)).

    Whitespace is dropped; every punctuation mark or symbol is a word of its
    own. This is the pre-tokenization both `train_wordpiece_vocabulary` and
    `WordPieceTokenizer.tokenize` use.
    """
    strings = normalize(strings, lower_case, normalization_form)
    return tf_text.regex_split(strings, _DELIMITER_PATTERN, _PUNCTUATION_PATTERN)


# === Vocabulary learning ===


def _check_reserved_tokens(reserved_tokens):
    reserved_tokens = list(reserved_tokens)
    if tuple(reserved_tokens[: len(RESERVED_TOKENS)]) != RESERVED_TOKENS:
        raise ValueError(
            f"reserved_tokens must start with {list(RESERVED_TOKENS)} (ids 0-3 are fixed); "
            f"received reserved_tokens={reserved_tokens}"
        )
    if len(set(reserved_tokens)) != len(reserved_tokens):
        raise ValueError(f"reserved_tokens has duplicates; received {reserved_tokens}")
    return reserved_tokens


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
    _check_options(lower_case, normalization_form)
    if isinstance(sentences, tf.data.Dataset):
        if sentences.element_spec != tf.TensorSpec([], tf.string):
            raise ValueError(
                "sentences must be a dataset of scalar tf.string; received element_spec="
                f"{sentences.element_spec}"
            )
        dataset = sentences
        total = int(dataset.cardinality())
        total = total if total >= 0 else None  # unknown or infinite
    else:
        if isinstance(sentences, (str, bytes)):
            raise ValueError(
                "sentences must be an iterable of strings, not a single string; "
                f"received {sentences[:50]!r}"
            )
        sentences = list(sentences)
        for sentence in sentences:
            if not isinstance(sentence, (str, bytes)):
                raise ValueError(
                    "sentences must contain str or bytes; received an element of type "
                    f"{type(sentence).__name__}: {sentence!r}"
                )
        dataset = tf.data.Dataset.from_tensor_slices(tf.constant(sentences, tf.string))
        total = len(sentences)
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


def _learn_wordpiece_bpe(  # noqa: C901 - the learning loop of one algorithm, kept whole
    word_counts, vocab_size, reserved_tokens, min_frequency, max_unique_chars, progress=False
):
    """WordPiece vocabulary from pair merges, most frequent pair first.

    Sennrich et al. 2016 ("Neural Machine Translation of Rare Words with
    Subword Units") merge procedure, written in WordPiece form: a word starts
    as its first character followed by `##`-prefixed characters, and merging
    `a` with `##b` gives `ab`. Every kept character enters the vocabulary in
    both forms (`c`, `##c`; a character only ever seen as a one-character word,
    such as punctuation, only as `c`) so any word made of known characters can
    be split.
    Ties are broken by the pair's text, so the result is deterministic.

    With `progress`, a bar (unit "token") counts the vocabulary up to
    `vocab_size`, moved every 100 tokens; when merging stops earlier (no pair
    is seen `min_frequency` times) it ends at the size reached.
    """
    char_counts = collections.Counter()
    inside_words = set()  # characters seen in words of two or more characters
    for word, count in word_counts.items():
        for char in word:
            char_counts[char] += count
        if len(word) > 1:
            inside_words.update(word)
    max_chars = min(max_unique_chars, (vocab_size - len(reserved_tokens)) // 2)
    alphabet = sorted(char_counts, key=lambda char: (-char_counts[char], char))[:max_chars]
    allowed = set(alphabet)

    vocabulary = list(reserved_tokens)
    seen = set(vocabulary)
    for char in sorted(alphabet):
        # Punctuation is always a word of its own: it needs no `##` form.
        forms = (char, SUFFIX_INDICATOR + char) if char in inside_words else (char,)
        for token in forms:
            if token not in seen:
                seen.add(token)
                vocabulary.append(token)
    bar = progress_bar(vocab_size, "token", progress)
    if bar is not None and len(vocabulary) < vocab_size:
        bar.update(len(vocabulary))

    words, counts = [], []
    for word, count in sorted(word_counts.items()):
        if len(word) < 2 or any(char not in allowed for char in word):
            continue
        words.append([word[0]] + [SUFFIX_INDICATOR + char for char in word[1:]])
        counts.append(count)

    pair_counts = collections.Counter()
    words_with_pair = collections.defaultdict(set)
    for index, symbols in enumerate(words):
        for pair in zip(symbols, symbols[1:]):
            pair_counts[pair] += counts[index]
            words_with_pair[pair].add(index)
    heap = [(-count, pair) for pair, count in pair_counts.items()]
    heapq.heapify(heap)

    cut = len(SUFFIX_INDICATOR)
    while len(vocabulary) < vocab_size and heap:
        negative_count, pair = heapq.heappop(heap)
        if pair_counts.get(pair, 0) != -negative_count:
            continue  # stale heap entry
        if -negative_count < min_frequency:
            break
        left, right = pair
        merged = left + right[cut:]
        if merged not in seen:
            seen.add(merged)
            vocabulary.append(merged)
            if bar is not None and len(vocabulary) % 100 == 0 and len(vocabulary) < vocab_size:
                bar.update(len(vocabulary))
        changes = collections.Counter()
        for index in sorted(words_with_pair.pop(pair, ())):
            symbols, count = words[index], counts[index]
            position = 0
            while True:
                try:
                    position = symbols.index(left, position)
                except ValueError:
                    break
                if position + 1 < len(symbols) and symbols[position + 1] == right:
                    if position > 0:
                        before = symbols[position - 1]
                        changes[(before, left)] -= count
                        changes[(before, merged)] += count
                        words_with_pair[(before, merged)].add(index)
                    if position + 2 < len(symbols):
                        after = symbols[position + 2]
                        changes[(right, after)] -= count
                        changes[(merged, after)] += count
                        words_with_pair[(merged, after)].add(index)
                    symbols[position : position + 2] = [merged]
                position += 1
        del pair_counts[pair]
        for changed_pair, delta in changes.items():
            if delta == 0:
                continue
            count = pair_counts[changed_pair] + delta
            if count <= 0:
                pair_counts.pop(changed_pair, None)
            else:
                pair_counts[changed_pair] = count
                heapq.heappush(heap, (-count, changed_pair))
    if bar is not None:
        bar.target = len(vocabulary)  # below vocab_size when merging stopped early
        bar.update(len(vocabulary), finalize=True)
    return vocabulary


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
      `_learn_wordpiece_bpe`); 2-3 s for 20,000 German number words.
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
        raise ValueError(
            f"vocab_size must be an int of at least len(reserved_tokens) + 2 = "
            f"{len(reserved_tokens) + 2}; received vocab_size={vocab_size!r}"
        )
    if algorithm not in ("bpe", "tensorflow_text"):
        raise ValueError(
            f"algorithm must be 'bpe' or 'tensorflow_text'; received algorithm={algorithm!r}"
        )
    if learn_params is not None and algorithm != "tensorflow_text":
        raise ValueError(
            f"learn_params is only used with algorithm='tensorflow_text'; received "
            f"algorithm={algorithm!r}, learn_params={learn_params!r}"
        )
    if not isinstance(min_frequency, int) or min_frequency < 1:
        raise ValueError(f"min_frequency must be an int >= 1; received {min_frequency!r}")
    if not isinstance(max_unique_chars, int) or max_unique_chars < 1:
        raise ValueError(f"max_unique_chars must be an int >= 1; received {max_unique_chars!r}")

    word_counts = count_words(sentences, lower_case, normalization_form, progress=progress)
    for token in reserved_tokens:
        word_counts.pop(token, None)
    if not word_counts:
        raise ValueError("sentences contain no words; cannot learn a vocabulary")

    if algorithm == "bpe":
        return _learn_wordpiece_bpe(
            word_counts, vocab_size, reserved_tokens, min_frequency, max_unique_chars, progress
        )

    # The learner's library is loaded only when a vocabulary is learned.
    from tensorflow_text.tools.wordpiece_vocab import (  # noqa: PLC0415
        wordpiece_tokenizer_learner_lib,
    )

    # The learner `bert_vocab_from_dataset` calls, fed with our own word counts
    # (its own counting would split words the BERT way, not ours).
    return wordpiece_tokenizer_learner_lib.learn(
        dict(sorted(word_counts.items())),
        vocab_size,
        reserved_tokens,
        **{"max_unique_chars": max_unique_chars, **(learn_params or {})},
    )


# === Tokenizer ===


def _read_vocabulary_file(path):
    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"vocabulary file not found: {path}")
    lines = path.read_text(encoding="utf-8-sig").split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final newline
    tokens = [line.rstrip("\r") for line in lines]
    if "" in tokens:
        raise ValueError(
            f"{path}: line {tokens.index('') + 1} is empty; a vocabulary file has one token "
            "a line (the line number is the id plus one)"
        )
    return tokens


# The id types `detokenize` and `lookup` take, traced when a tokenizer is made.
ID_SPECS = [
    tf.TensorSpec([None, None], tf.int32),
    tf.TensorSpec([None, None], tf.int64),
    tf.RaggedTensorSpec([None, None], tf.int32, ragged_rank=1),
    tf.RaggedTensorSpec([None, None], tf.int64, ragged_rank=1),
]


def clean_ids(ids, vocab_size):
    """Ids (B, T) dense or ragged -> ragged int32 (B, (T)) ready to detokenize.

    Cut at the first `[END]`, without `[PAD]` and `[START]`; ids outside
    `[0, vocab_size)` become `[UNK]`. Shared by every tokenizer of the zoo.
    """
    if isinstance(ids, tf.RaggedTensor):
        ids = ids.to_tensor(default_value=PAD_ID)
    ids = tf.cast(ids, tf.int32)  # (B, T)
    before_end = tf.equal(tf.cumsum(tf.cast(tf.equal(ids, END_ID), tf.int32), axis=1), 0)
    keep = before_end & tf.not_equal(ids, PAD_ID) & tf.not_equal(ids, START_ID)
    in_range = (ids >= 0) & (ids < tf.cast(vocab_size, tf.int32))
    ids = tf.where(in_range, ids, tf.constant(UNK_ID, tf.int32))
    return tf.ragged.boolean_mask(ids, keep)  # (B, (T))


def lookup_ids(vocab, ids):
    """Ids (B, T) or (B, (T)) -> `vocab`'s tokens, same shape; out-of-range ids read `[UNK]`."""
    unk = tf.constant(UNK_ID, ids.dtype)

    def gather(flat):
        in_range = tf.logical_and(flat >= 0, flat < tf.cast(tf.size(vocab), flat.dtype))
        return tf.gather(vocab, tf.where(in_range, flat, unk))

    if isinstance(ids, tf.RaggedTensor):
        return tf.ragged.map_flat_values(gather, ids)
    return gather(ids)


class WordPieceTokenizer(tf.Module):
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
        _check_options(lower_case, normalization_form)
        if isinstance(vocabulary, (str, os.PathLike)):
            vocabulary = _read_vocabulary_file(vocabulary)
        vocabulary = list(vocabulary)
        self._check_vocabulary(vocabulary)
        if not isinstance(max_bytes_per_word, int) or max_bytes_per_word < 1:
            raise ValueError(
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
            raise ValueError(
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
                raise ValueError(
                    f"vocabulary tokens must be non-empty str without whitespace; received "
                    f"{token!r} at id {index}"
                )
        if len(set(vocabulary)) != len(vocabulary):
            duplicates = sorted(t for t, c in collections.Counter(vocabulary).items() if c > 1)
            raise ValueError(f"vocabulary has duplicate tokens: {duplicates[:10]}")

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
        tokens = tf.gather(self.vocab, ids)
        text = tf.strings.reduce_join(tokens, axis=-1, separator=" ")  # (B,)
        text = tf.strings.regex_replace(text, " " + SUFFIX_INDICATOR, "")
        text = tf.strings.regex_replace(text, "^" + SUFFIX_INDICATOR, "")
        for pattern, rewrite in _DETOKENIZE_RULES:
            text = tf.strings.regex_replace(text, pattern, rewrite)
        return text

    @tf.function(input_signature=[], autograph=False)
    def get_vocab_size(self):
        return tf.size(self.vocab)

    # === Python-side helpers ===

    @property
    def vocab_size(self):
        """Number of tokens V (ids run from 0 to V - 1)."""
        return len(self._vocabulary)

    def get_vocabulary(self):
        """The tokens as a list of `str`, id = position."""
        return list(self._vocabulary)

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
