"""Token ids from and back to text, shared by every tokenizer of the zoo.

`encode_sources` makes a sentence's source ids: its tokens, cut to `max_length - 1`,
then `[END]` (`zoo.datasets.pipeline` in training, `zoo.export` in the SavedModel,
`zoo.runs` in `translate`). `clean_ids` cuts generated ids at `[END]` and drops
`[PAD]`/`[START]`; `lookup_ids` reads ids as a vocabulary's tokens. `ID_SPECS` are
the id types `detokenize` and `lookup` take.
"""

import tensorflow as tf

from zoo.text.special import END_ID, PAD_ID, START_ID, UNK_ID

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


def encode_sources(tokenizer, text, max_length, end_id=END_ID):
    """Strings `(B,)` -> source ids, ragged int32 `(B, (S))`, `S <= max_length`.

    The tokens of each string, cut to `max_length - 1`, then `[END]` (or the
    tokenizer's own end id, e.g. Marian's `</s>`); `.to_tensor()` (0 =
    `[PAD]`, or the tokenizer's pad id) makes the `(B, S)` encoder input, as
    `zoo.runs.padded_sources` does.
    """
    ids = tf.cast(tokenizer.tokenize(text), tf.int32)[:, : max_length - 1]  # (B, (S - 1))
    end = tf.fill([tf.shape(text)[0], 1], tf.constant(end_id, tf.int32))
    return tf.concat([ids, end], axis=1)  # (B, (S))
