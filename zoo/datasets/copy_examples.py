"""Teacher-forcing examples for a copying model (pointer-generator): `zoo.datasets.pipeline`
with `copy=True`.

Each example is `(source, source_extended, target, labels)`: `source` and the
`[START]`/`[END]` layout as in `zoo.datasets.pipeline`; `source_extended` holds each
source token's id in the extended target vocabulary (its target id, or `V + k` for the
k-th distinct token the target vocabulary lacks); `labels` are the target's ids with
each `[UNK]` that copies such a token made `V + k`, and `target` is `[START]` then
`labels` but the last (so a copied token is also the next step's input; the model
reads ids `>= V` as `[UNK]`). How the ids are built: `zoo.text.copying`.
"""

import tensorflow as tf

from zoo.text import copying
from zoo.text.special import special_ids


def copy_teacher_forcing(dataset, source_tokenizer, target_tokenizer, ids, max_length,
                         tokenize_batch_size):
    """String pairs -> `(source, source_extended, target, labels)` int32 rows."""
    table = copying.copy_table(source_tokenizer, target_tokenizer)
    size = target_tokenizer.vocab_size
    source_end = special_ids(source_tokenizer)["end"]

    def encode(source_text, target_text):  # (b,) strings each
        source, extended, slots = copying.encode_copy_sources(
            source_tokenizer, table, size, source_text, max_length, source_end)  # (b, S)
        words = copying.encode_copy_labels(target_tokenizer, target_text, slots, max_length)
        rows = tf.shape(source_text)[0]
        start = tf.fill([rows, 1], tf.constant(ids["start"], tf.int32))
        end = tf.fill([rows, 1], tf.constant(ids["end"], tf.int32))
        lengths = tf.reduce_sum(tf.cast(tf.not_equal(source, 0), tf.int64), axis=1)
        return (
            tf.RaggedTensor.from_tensor(source, lengths=lengths),  # (b, (S))
            tf.RaggedTensor.from_tensor(extended, lengths=lengths),
            tf.concat([start, words], axis=1),  # (b, (T))
            tf.concat([words, end], axis=1),  # (b, (T))
        )

    dataset = dataset.batch(tokenize_batch_size).map(encode, num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.unbatch().map(lambda *row: row)
