"""The extended vocabulary of the copy mechanism (pointer-generator, See et al. 2017).

A copying model's output distribution covers the target vocabulary `0 … V-1` and
temporary ids `V + k`, one per distinct source token that the target vocabulary
lacks, numbered per example in order of first occurrence
(docs/math.md#the-pointer-generator). This module builds those ids from text,
inside the TensorFlow graph (the `tf.data` pipeline and the SavedModel both run it),
and turns generated ids back into text.

What counts as a token the target vocabulary lacks, and how two of them are told
apart:

* every source piece is mapped to the target piece with the same string
  (`copy_table`): for a shared tokenizer, the identity; for separate
  vocabularies, by string, so `▁Paris` in both maps across;
* `[UNK]` never maps: the tokenizers turn characters they do not know into
  `[UNK]` (SentencePiece merges a run of them into one `[UNK]`; WordPiece makes
  one per character), and a source piece missing from the target vocabulary
  does not map either; these pieces are *out of vocabulary* (OOV);
* OOV pieces are told apart by their surface text (`piece_texts`: the piece's
  span of the input, from the tokenizer's offsets), so `[UNK]` for "Ω" and
  `[UNK]` for "Ж" get different ids, and "Ω" twice gets one;
* a target piece is copied from slot k when it is `[UNK]` and its surface text is
  slot k's (`extend_targets`), so the labels ask for the copy.

With the zoo's default tokenizer (a shared SentencePiece vocabulary with byte
fallback, from 1024 pieces on) there is no `[UNK]`: every source piece maps, the
extended ids are never used, and copying means pointing at source pieces the
generator would rarely produce. With a smaller SentencePiece vocabulary (no byte
fallback) or WordPiece, characters never seen in training are `[UNK]`, and only the
copy can write them. Limits: with separate WordPiece vocabularies, a copied `##`
piece that the target lacks comes back as a word of its own; an imported Marian
tokenizer is not supported.

Back to text (`detokenize_extended`): the generated ids are detokenized with every
copied id and every `[UNK]` read as the tokenizer's own rendering of `[UNK]`
(SentencePiece's " ⁇ ", which NFKC-normalised text cannot contain; WordPiece's
"[UNK]"), and each such mark is replaced, in order, by the copied slot's text
(nothing for a real `[UNK]`, as `detokenize` does for SentencePiece; "[UNK]" itself
for WordPiece). A row whose marks cannot be matched up falls back to `detokenize`.

Shapes: B batch, S source tokens, T target tokens, L generated tokens; dense
tensors are padded with 0 (ids) and "" (texts).
"""

import numpy as np
import tensorflow as tf

from zoo.errors import ZooError
from zoo.text.normalization import split_words
from zoo.text.special import END_ID, PAD_ID, START_ID, UNK_ID
from zoo.text.wordpiece import join_pieces
from zoo.text.wordpiece_bpe import SUFFIX_INDICATOR

SENTENCEPIECE_UNKNOWN = " \u2047 "  # how SentencePiece writes [UNK] (its unk_surface)


def copy_table(source_tokenizer, target_tokenizer):
    """int32 `(V_src,)`: the target id of each source piece with the same string, -1 for
    `[UNK]` and for the pieces the target vocabulary lacks (the OOV pieces)."""
    _check_tokenizer(source_tokenizer)
    _check_tokenizer(target_tokenizer)
    target = {piece: index for index, piece in enumerate(target_tokenizer.get_vocabulary())}
    table = np.array([target.get(piece, -1) for piece in source_tokenizer.get_vocabulary()],
                     np.int32)
    table[UNK_ID] = -1
    return table


def _check_tokenizer(tokenizer):
    if not hasattr(tokenizer, "wordpiece") and not hasattr(tokenizer, "_sentencepiece"):
        raise ZooError(
            f"the copy mechanism needs the zoo's SentencePiece or WordPiece tokenizers; "
            f"received {tokenizer!r}"
        )


def piece_texts(tokenizer, strings):
    """Strings `(B,)` -> `(ids, texts)`, ragged `(B, (T))` each: `tokenizer.tokenize`'s ids
    and the span of (normalised) text each piece covers (SentencePiece: of the input,
    its leading space included; WordPiece: of the normalised, lower-cased word, without
    `##`)."""
    _check_tokenizer(tokenizer)
    if hasattr(tokenizer, "wordpiece"):
        return _wordpiece_texts(tokenizer, strings)
    strings = tf.strings.unicode_transcode(  # as SentencePieceTokenizer.tokenize
        strings, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD)
    strings = tf.strings.strip(strings)
    ids, starts, ends = tokenizer._sentencepiece().tokenize_with_offsets(strings)
    return tf.cast(ids, tf.int32), _spans(strings, starts, ends)


def _spans(strings, starts, ends):
    """`strings` `(N,)`, byte offsets ragged `(N, (P))` -> the substrings, ragged `(N, (P))`."""
    owners = tf.repeat(strings, starts.row_lengths())
    texts = tf.strings.substr(owners, starts.flat_values, ends.flat_values - starts.flat_values)
    return starts.with_flat_values(texts)


def _wordpiece_texts(tokenizer, strings):
    words = split_words(strings, tokenizer.lower_case, tokenizer.normalization_form)  # (B, (W))
    ids, starts, ends = tokenizer.wordpiece.tokenize_with_offsets(words)  # (B, (W), (P))
    texts = _spans(words.flat_values, starts.values, ends.values)  # (ΣW, (P))
    # A piece inside its word is written as in the vocabulary, `##` first, so that it
    # glues to the piece before it when detokenized.
    inside = starts.values.flat_values > 0
    texts = texts.with_flat_values(tf.where(
        inside, tf.strings.join([SUFFIX_INDICATOR, texts.flat_values]), texts.flat_values))
    flat = ids.flat_values  # the table's out-of-vocabulary bucket is [UNK], as in tokenize
    flat = tf.where(flat >= tf.cast(tokenizer.vocab_size, flat.dtype),
                    tf.constant(UNK_ID, flat.dtype), flat)
    ids = ids.with_flat_values(tf.cast(flat, tf.int32)).merge_dims(-2, -1)
    return ids, words.with_values(texts).merge_dims(-2, -1)


def extend_sources(source, texts, table, target_size):
    """The source's ids in the extended target vocabulary, and its OOV slots' texts.

    Args:
        source: source ids, int32 `(B, S)`, 0 = padding.
        texts: their surface texts, string `(B, S)`.
        table: `copy_table`, int32 `(V_src,)`.
        target_size: V, the target vocabulary size.

    Returns:
        `(extended, slots)`: int32 `(B, S)`, each position's target id, or `V + k` for
        the k-th distinct OOV text of its row; string `(B, S)`, slot k's text in
        column k ("" after the last slot).
    """
    source = tf.cast(source, tf.int32)
    known = tf.gather(tf.constant(table, tf.int32), source)  # (B, S)
    oov = known < 0
    length = tf.shape(source)[1]
    same = tf.equal(texts[:, :, None], texts[:, None, :]) & oov[:, None, :]  # (B, S, S)
    first = tf.argmax(tf.cast(same, tf.int32), axis=2, output_type=tf.int32)  # first j ≡ i
    is_first = oov & tf.equal(first, tf.range(length)[None, :])
    order = tf.cumsum(tf.cast(is_first, tf.int32), axis=1) - 1  # slot k at first positions
    slot = tf.gather(order, first, batch_dims=1)
    extended = tf.where(oov, target_size + slot, known)
    slots = tf.ragged.boolean_mask(texts, is_first).to_tensor(
        default_value="", shape=tf.shape(source, out_type=tf.int64))
    return extended, slots


def extend_targets(labels, texts, slots, target_size):
    """int32 `(B, T)`: `labels` with each `[UNK]` whose text is slot k's made `V + k`.

    Args:
        labels: target ids, int32 `(B, T)`.
        texts: their surface texts, string `(B, T)`.
        slots: `extend_sources`'s, string `(B, S)`.
        target_size: V.
    """
    match = tf.equal(texts[:, :, None], slots[:, None, :]) & tf.not_equal(slots, "")[:, None, :]
    found = tf.reduce_any(match, axis=-1) & tf.equal(labels, UNK_ID)
    slot = tf.argmax(tf.cast(match, tf.int32), axis=-1, output_type=tf.int32)
    return tf.where(found, target_size + slot, tf.cast(labels, tf.int32))


def encode_copy_sources(tokenizer, table, target_size, strings, max_length, end_id=END_ID):
    """Strings `(B,)` -> `(source, extended, slots)`, dense `(B, S)` each, `S <= max_length`.

    The source ids as `zoo.text.ids.encode_sources` makes them (tokens cut to
    `max_length - 1`, then `end_id`, padded with 0), their extended ids and the OOV
    slots' texts (`extend_sources`).
    """
    ids, texts = piece_texts(tokenizer, strings)
    ids, texts = ids[:, : max_length - 1], texts[:, : max_length - 1]
    rows = tf.shape(strings)[0]
    ids = tf.concat([ids, tf.fill([rows, 1], tf.constant(end_id, tf.int32))], axis=1)
    texts = tf.concat([texts, tf.fill([rows, 1], "")], axis=1)
    source = ids.to_tensor(default_value=PAD_ID)
    extended, slots = extend_sources(source, texts.to_tensor(default_value=""), table,
                                     target_size)
    return source, extended, slots


def encode_copy_labels(tokenizer, strings, slots, max_length):
    """Target strings `(B,)` -> their ids with copies made extended ids (`extend_targets`),
    cut to `max_length - 1`, ragged `(B, (T))`, no `[START]`/`[END]`."""
    ids, texts = piece_texts(tokenizer, strings)
    ids, texts = ids[:, : max_length - 1], texts[:, : max_length - 1]
    extended = extend_targets(ids.to_tensor(default_value=PAD_ID),
                              texts.to_tensor(default_value=""), slots, tokenizer.vocab_size)
    return tf.RaggedTensor.from_tensor(extended, lengths=ids.row_lengths())


def detokenize_extended(tokenizer, tokens, slots):
    """Generated ids `(B, L)` (extended ids included) -> strings `(B,)`.

    Cut at `[END]`, without `[PAD]`/`[START]`, as `tokenizer.detokenize`; an id `V + k`
    reads as slot k's text (see the module docstring).
    """
    size = tokenizer.vocab_size
    tokens = tf.cast(tokens, tf.int32)
    before_end = tf.equal(tf.cumsum(tf.cast(tf.equal(tokens, END_ID), tf.int32), axis=1), 0)
    keep = before_end & tf.not_equal(tokens, PAD_ID) & tf.not_equal(tokens, START_ID)
    marked = keep & ((tokens >= size) | tf.equal(tokens, UNK_ID) | (tokens < 0))
    copied = tf.gather(slots, tf.clip_by_value(tokens - size, 0, tf.shape(slots)[1] - 1),
                       batch_dims=1)
    if hasattr(tokenizer, "wordpiece"):  # the pieces, copies as their texts, joined
        pieces = tf.where(tokens >= size, copied, tokenizer.lookup(tokens))
        return join_pieces(tf.ragged.boolean_mask(pieces, keep))
    ids = tf.ragged.boolean_mask(tf.where(marked, UNK_ID, tokens), keep)
    text = tokenizer._sentencepiece().detokenize(ids)  # [UNK] as " ⁇ "
    replacements = tf.ragged.boolean_mask(tf.where(tokens >= size, copied, ""), marked)
    parts = tf.strings.split(text, sep=SENTENCEPIECE_UNKNOWN)  # (B, (n + 1))
    matched = tf.equal(parts.row_lengths(), replacements.row_lengths() + 1)
    # Part 0, replacement 0, part 1, …: dense, padded with "" (which joins to nothing).
    width = tf.maximum(tf.reduce_max(parts.row_lengths()), 1)
    shape = tf.stack([tf.shape(text, out_type=tf.int64)[0], width])
    woven = tf.stack([parts.to_tensor("", shape=shape), replacements.to_tensor("", shape=shape)],
                     axis=2)  # (B, n + 1, 2)
    joined = tf.strings.reduce_join(tf.reshape(woven, [shape[0], -1]), axis=1)
    # SentencePiece drops the spaces a text starts with; so does this.
    joined = tf.strings.regex_replace(joined, "^ +", "")
    return tf.where(matched, joined, tokenizer.detokenize(tokens))


def canonical_texts(tokenizer, strings):
    """Strings `(B,)` -> `(B,)` as `tokenizer` writes them back, each `[UNK]` piece with its
    own text: the form a copying model's output is compared in (what it would write if it
    copied every unknown piece)."""
    ids, texts = piece_texts(tokenizer, strings)
    ids, texts = ids.to_tensor(default_value=PAD_ID), texts.to_tensor(default_value="")
    positions = tf.range(tf.shape(ids)[1])[None, :]
    own = tf.where(tf.equal(ids, UNK_ID), tokenizer.vocab_size + positions, ids)
    return detokenize_extended(tokenizer, own, texts)
