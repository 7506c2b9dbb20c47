"""tf.data pipelines that feed the seq2seq models with teacher forcing.

Convention (the decoding code relies on it). For a pair whose source text
tokenizes to `x` and target text to `y` (`WordPieceTokenizer.tokenize`, no
reserved tokens), one example is:

    source = x[:max_length - 1] + [END]       # encoder input, S <= max_length
    target = [START] + y[:max_length - 1]     # decoder input, T <= max_length
    labels = y[:max_length - 1] + [END]       # what the decoder must predict

so `target` and `labels` have the same length and `labels[t] ==
target[t + 1]`: at step t the decoder has seen `[START], y_0 .. y_{t-1}` and
predicts `y_t`, and after the last target token it predicts `[END]`.
Greedy or beam decoding therefore starts from `[START]` alone and stops at
`[END]`. The source also ends with `[END]` and never has `[START]`.
Over-long texts are truncated (the `[END]` is kept), not dropped.

Batches are padded with `PAD_ID` = 0 (in `source`, `target` and `labels`
alike), so `source != 0` is the encoder's padding mask, and padded label
positions must be masked out of the loss (e.g.
`keras.losses.SparseCategoricalCrossentropy(ignore_class=0)`).

Elements: `({"source": int32 (B, S), "target": int32 (B, T)}, labels int32
(B, T))`, with S and T the longest in the batch, or with `pad_to_bucket_boundary` the
longest its length bucket admits.

A target tokenizer with its own `special_ids` (an imported Marian model's,
`zoo.text.marian`) replaces `[START]`, `[END]` and the padding by its
ids: for OPUS-MT, `source = x + [</s>]` (the source tokenizer's end id),
`target = [<pad>] + y`, `labels = y + [</s>]`, padded with `<pad>` (the
model's `pad_id`, which its loss ignores).
"""

import tensorflow as tf

from keras_attention.checks import check_int
from zoo.datasets.copy_examples import copy_teacher_forcing
from zoo.text.ids import encode_sources
from zoo.text.special import special_ids


def _check_pairs(pairs):
    if isinstance(pairs, (str, bytes)) or not hasattr(pairs, "__len__"):
        raise ValueError(
            f"pairs must be a list of (source, target) strings; received {type(pairs).__name__}"
        )
    if len(pairs) == 0:
        raise ValueError("pairs is empty; need at least one (source, target) pair")
    sources, targets = [], []
    for index, pair in enumerate(pairs):
        if (
            not isinstance(pair, (tuple, list))
            or len(pair) != 2
            or not all(isinstance(text, (str, bytes)) for text in pair)
        ):
            raise ValueError(
                f"pairs must hold (source, target) str tuples; received {pair!r} at index {index}"
            )
        sources.append(pair[0])
        targets.append(pair[1])
    return sources, targets


def _check_bucket_boundaries(bucket_boundaries, max_length):
    boundaries = list(bucket_boundaries)
    if (
        not boundaries
        or any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in boundaries)
        or any(a >= b for a, b in zip(boundaries, boundaries[1:]))
    ):
        raise ValueError(
            "bucket_boundaries must be a non-empty, strictly increasing list of positive "
            f"ints; received {bucket_boundaries!r}"
        )
    if boundaries[0] > max_length:
        raise ValueError(
            f"bucket_boundaries start above max_length={max_length}; every example would fall "
            f"in the last bucket; received {boundaries}"
        )
    return boundaries


def make_translation_dataset(
    pairs,
    source_tokenizer,
    target_tokenizer,
    batch_size,
    max_length=128,
    shuffle=True,
    seed=0,
    bucket_boundaries=None,
    drop_remainder=False,
    shuffle_buffer_size=None,
    tokenize_batch_size=1024,
    batch_tokens=None,
    copy=False,
    pad_to_bucket_boundary=False,
):
    """Pairs of strings -> padded teacher-forcing batches (see the module docstring).

    Tokenization runs inside the tf.data graph. Steps: shuffle the pairs
    (each epoch anew), tokenize, add `[START]`/`[END]` and truncate, bucket
    by length (optional), pad with 0, batch, prefetch.

    Args:
        pairs: list of `(source, target)` str tuples (e.g.
            `TranslationData.train_pairs`).
        source_tokenizer, target_tokenizer: `zoo.text.WordPieceTokenizer`s
            (or anything with a `tokenize` taking `tf.string` (B,) and
            returning ragged ids (B, (T))); may be the same object.
        batch_size: examples per batch (ignored with `batch_tokens`; may be None then).
        max_length: longest `source`, `target` and `labels` (>= 2).
        shuffle: shuffle the pairs every epoch. Order is deterministic given
            `seed` (and TensorFlow's global seed, which tf.data combines
            with it: `keras.utils.set_random_seed` fixes both).
        seed: shuffle seed.
        bucket_boundaries: e.g. `[8, 16, 32]`: batch examples of similar
            length together (`tf.data.Dataset.bucket_by_sequence_length` on
            `max(len(source), len(target))`), so less padding. Each bucket
            yields batches of `batch_size`. None: plain padded batches.
        drop_remainder: drop the last, smaller batch (of each bucket).
        shuffle_buffer_size: default: all pairs (a full shuffle).
        tokenize_batch_size: strings tokenized per call (speed only).
        batch_tokens: batches by tokens instead of examples (fairseq's `--max-tokens`,
            tensor2tensor's token batch size): each bucket's batches hold
            `batch_tokens // n` examples (at least one), n the longest length the
            bucket admits (the last bucket: `max_length`), so no padded batch has
            more than `batch_tokens` positions in `source` or `target`. Short
            sentences come in large batches, long ones in small. Needs
            `bucket_boundaries`.
        copy: for a copying model (pointer-generator): the inputs also hold
            `"source_extended"` int32 (B, S), the source's ids in the extended
            target vocabulary, and `labels` (and `target`, shifted) ask for a copy
            with a source token's temporary id `V + k` (`zoo.text.copying`).
        pad_to_bucket_boundary: pad each batch to the longest length its bucket admits
            (`boundary - 1`, at most `max_length`; without `bucket_boundaries`, to
            `max_length`) instead of the longest in the batch, so that batches come in a few
            fixed shapes: one per bucket, and the last, smaller batch of each. A compiler
            that builds one program per input shape (`jax.jit`, XLA) then compiles each once.

    Returns:
        `tf.data.Dataset` of `({"source": int32 (B, S), "target": int32
        (B, T)}, labels int32 (B, T))` (with `copy`, also `"source_extended"`).
    """
    sources, targets = _check_pairs(pairs)
    _check_options(source_tokenizer, target_tokenizer, batch_size, max_length,
                   tokenize_batch_size, shuffle_buffer_size, batch_tokens)
    if bucket_boundaries is not None:
        bucket_boundaries = _check_bucket_boundaries(bucket_boundaries, max_length)
    if batch_tokens is not None and bucket_boundaries is None:
        raise ValueError("batch_tokens needs bucket_boundaries (batches by length bucket)")
    ids = special_ids(target_tokenizer)
    dataset = tf.data.Dataset.from_tensor_slices(
        (tf.constant(sources, tf.string), tf.constant(targets, tf.string))
    )
    if shuffle:
        dataset = dataset.shuffle(
            shuffle_buffer_size or len(sources), seed=seed, reshuffle_each_iteration=True
        )
    teacher_forcing = copy_teacher_forcing if copy else _teacher_forcing
    dataset = teacher_forcing(dataset, source_tokenizer, target_tokenizer, ids, max_length,
                              tokenize_batch_size)
    # unbatch hides the size; restore it so padded batches have a known count.
    dataset = dataset.apply(tf.data.experimental.assert_cardinality(len(sources)))
    # (S,), (T,), (T,) per example
    sizes = None
    if bucket_boundaries is not None:
        sizes = bucket_batch_sizes(bucket_boundaries, max_length, batch_size, batch_tokens)
    dataset = _padded_batches(dataset, batch_size, bucket_boundaries, sizes, ids["pad"],
                              drop_remainder, max_length if pad_to_bucket_boundary else None)
    dataset = dataset.map(_inputs_and_labels, num_parallel_calls=tf.data.AUTOTUNE)
    options = tf.data.Options()
    options.deterministic = True
    return dataset.with_options(options).prefetch(tf.data.AUTOTUNE)


def _inputs_and_labels(source, *rest):
    """`(source, [source_extended,] target, labels)` -> `(inputs, labels)`."""
    inputs = {"source": source, "target": rest[-2]}
    if len(rest) == 3:
        inputs["source_extended"] = rest[0]
    return inputs, rest[-1]


def _check_options(source_tokenizer, target_tokenizer, batch_size, max_length,
                   tokenize_batch_size, shuffle_buffer_size, batch_tokens):
    for name, value, minimum in (
        ("max_length", max_length, 2),
        ("tokenize_batch_size", tokenize_batch_size, 1),
    ):
        check_int(name, value, minimum)
    if batch_tokens is None:
        check_int("batch_size", batch_size, 1)
    else:
        check_int("batch_tokens", batch_tokens, 1)
    if shuffle_buffer_size is not None and (
        not isinstance(shuffle_buffer_size, int) or shuffle_buffer_size < 1
    ):
        raise ValueError(
            f"shuffle_buffer_size must be a positive int or None; received {shuffle_buffer_size!r}"
        )
    for name, tokenizer in (
        ("source_tokenizer", source_tokenizer),
        ("target_tokenizer", target_tokenizer),
    ):
        if not callable(getattr(tokenizer, "tokenize", None)):
            raise ValueError(f"{name} must have a tokenize method; received {tokenizer!r}")


def _teacher_forcing(dataset, source_tokenizer, target_tokenizer, ids, max_length,
                     tokenize_batch_size):
    """String pairs -> `(source, target, labels)` int32 rows, tokenized in batches."""
    source_end = special_ids(source_tokenizer)["end"]

    def encode(source_text, target_text):  # (b,) strings each
        words = target_tokenizer.tokenize(target_text)[:, : max_length - 1]  # (b, (T-1))
        words = tf.cast(words, tf.int32)
        rows = tf.shape(source_text)[0]
        start = tf.fill([rows, 1], tf.constant(ids["start"], tf.int32))
        end = tf.fill([rows, 1], tf.constant(ids["end"], tf.int32))
        return (
            encode_sources(source_tokenizer, source_text, max_length, source_end),  # (b, (S))
            tf.concat([start, words], axis=1),  # (b, (T))
            tf.concat([words, end], axis=1),  # (b, (T))
        )

    dataset = dataset.batch(tokenize_batch_size).map(encode, num_parallel_calls=tf.data.AUTOTUNE)
    # Unbatched rows are rank-0 RaggedTensorSpecs; an identity map makes them
    # plain tensors, which padded_batch requires.
    return dataset.unbatch().map(lambda source, target, labels: (source, target, labels))


def bucket_batch_sizes(bucket_boundaries, max_length, batch_size, batch_tokens=None):
    """Examples per batch of each length bucket: `batch_size` for every bucket, or with
    `batch_tokens`, `batch_tokens // n` (at least 1) where n is the longest length the
    bucket admits: `boundary - 1`, and `max_length` for the last bucket."""
    if batch_tokens is None:
        return [batch_size] * (len(bucket_boundaries) + 1)
    longest = [boundary - 1 for boundary in bucket_boundaries] + [max_length]
    return [max(1, batch_tokens // n) for n in longest]


def _closed_buckets(bucket_boundaries, sizes, max_length):
    """`(boundaries, sizes)` for tf.data to pad every bucket to its boundary: it pads to
    `boundary - 1` and needs every example below the last boundary. The boundaries above
    `max_length` go (their buckets are empty, as no example is longer), and `max_length + 1`
    closes the last bucket, which then pads to `max_length`. The bucket past it stays empty;
    its size (1) is never used."""
    kept = [boundary for boundary in bucket_boundaries if boundary <= max_length]
    return kept + [max_length + 1], sizes[: len(kept) + 1] + [1]


def _padded_batches(dataset, batch_size, bucket_boundaries, sizes, pad_id, drop_remainder,
                    fixed_length=None):
    """Examples -> batches padded with `pad_id`, by length bucket (of `sizes` examples)
    when there are boundaries, to the longest in the batch; with `fixed_length` (the
    `max_length`), to the bucket's longest admitted length, or to `fixed_length` without
    buckets."""
    size = len(dataset.element_spec)  # (source, [source_extended,] target, labels)
    padding_values = (tf.constant(pad_id, tf.int32),) * size
    if bucket_boundaries is None:
        return dataset.padded_batch(
            batch_size, ([fixed_length],) * size, padding_values, drop_remainder=drop_remainder
        )
    if fixed_length is not None:
        bucket_boundaries, sizes = _closed_buckets(bucket_boundaries, sizes, fixed_length)
    return dataset.bucket_by_sequence_length(
        element_length_func=lambda source, *rest: tf.maximum(
            tf.shape(source)[0], tf.shape(rest[-2])[0]
        ),
        bucket_boundaries=bucket_boundaries,
        bucket_batch_sizes=sizes,
        padded_shapes=([None],) * size,
        padding_values=padding_values,
        pad_to_bucket_boundary=fixed_length is not None,
        drop_remainder=drop_remainder,
    )
