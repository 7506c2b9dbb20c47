"""Tests for zoo/pipeline.py: teacher-forcing batches from string pairs."""

import collections

import numpy as np
import pytest
import tensorflow as tf

from zoo import datasets, text
from zoo.datasets import pipeline
from zoo.text import END_ID, PAD_ID, START_ID


@pytest.fixture(scope="module")
def data():
    return datasets.numbers(num_train=400, num_test=20, seed=7)


@pytest.fixture(scope="module")
def tokenizers(data):
    source = text.WordPieceTokenizer.from_corpus(data.train_sources, 120)
    target = text.WordPieceTokenizer.from_corpus(data.train_targets, 120)
    return source, target


def batches(dataset):
    return [(x["source"].numpy(), x["target"].numpy(), labels.numpy()) for x, labels in dataset]


def rows(dataset):
    """Every example, padding removed: (source, target, labels) tuples of ints."""
    examples = []
    for source, target, labels in batches(dataset):
        for s, t, y in zip(source, target, labels):
            examples.append((tuple(s[s != PAD_ID]), tuple(t[t != PAD_ID]), tuple(y[y != PAD_ID])))
    return examples


def test_element_spec_shapes_and_dtypes(data, tokenizers):
    dataset = pipeline.make_translation_dataset(data.train_pairs, *tokenizers, batch_size=32)
    spec_x, spec_y = dataset.element_spec
    assert set(spec_x) == {"source", "target"}
    for spec in (spec_x["source"], spec_x["target"], spec_y):
        assert spec.dtype == tf.int32 and spec.shape.as_list() == [None, None]
    for source, target, labels in batches(dataset):
        assert source.shape[0] == target.shape[0] == labels.shape[0] <= 32
        assert target.shape == labels.shape


def test_convention_source_end_target_start_labels_shifted(data, tokenizers):
    source_tokenizer, target_tokenizer = tokenizers
    dataset = pipeline.make_translation_dataset(
        data.train_pairs, source_tokenizer, target_tokenizer, batch_size=50, shuffle=False
    )
    examples = rows(dataset)
    assert len(examples) == len(data.train_pairs)
    source_ids = source_tokenizer.tokenize(data.train_sources).to_list()
    target_ids = target_tokenizer.tokenize(data.train_targets).to_list()
    for (source, target, labels), x, y in zip(examples, source_ids, target_ids):
        assert source == tuple(x) + (END_ID,)
        assert target == (START_ID,) + tuple(y)
        assert labels == tuple(y) + (END_ID,)
        assert labels[:-1] == target[1:]


def test_padding_is_zero_and_only_at_the_end(data, tokenizers):
    dataset = pipeline.make_translation_dataset(data.train_pairs, *tokenizers, batch_size=64)
    saw_padding = False
    for source, target, labels in batches(dataset):
        for array in (source, target, labels):
            is_pad = array == PAD_ID
            saw_padding |= bool(is_pad.any())
            # once padding starts in a row, it continues to the end
            assert np.all(np.cumsum(~is_pad[:, ::-1], axis=1)[:, ::-1][is_pad] == 0)
        assert np.all((target == PAD_ID) == (labels == PAD_ID))
        lengths = (source != PAD_ID).sum(axis=1)
        assert np.all(source[np.arange(len(source)), lengths - 1] == END_ID)
        assert lengths.max() == source.shape[1]  # padded to the longest in the batch
    assert saw_padding


def test_truncation_keeps_end_token(data, tokenizers):
    dataset = pipeline.make_translation_dataset(
        data.train_pairs, *tokenizers, batch_size=64, max_length=5, shuffle=False
    )
    _, target_tokenizer = tokenizers
    full = target_tokenizer.tokenize(data.train_targets).to_list()
    examples = rows(dataset)
    for (source, target, labels), y in zip(examples, full):
        assert len(source) <= 5 and len(target) <= 5 and len(labels) <= 5
        assert source[-1] == END_ID and labels[-1] == END_ID and target[0] == START_ID
        assert labels[:-1] == tuple(y[:4])
    assert max(len(y) for y in full) > 4  # truncation happened


def test_bucketing_keeps_every_example_once(data, tokenizers):
    plain = pipeline.make_translation_dataset(
        data.train_pairs, *tokenizers, batch_size=16, shuffle=False
    )
    bucketed = pipeline.make_translation_dataset(
        data.train_pairs, *tokenizers, batch_size=16, bucket_boundaries=[8, 12], seed=3
    )
    assert collections.Counter(rows(bucketed)) == collections.Counter(rows(plain))
    for source, target, _ in batches(bucketed):
        assert len(source) <= 16
        longest = np.maximum((source != 0).sum(1), (target != 0).sum(1))
        # a batch holds one bucket: lengths [1, 8), [8, 12) or [12, inf)
        assert len({int(np.searchsorted([8, 12], n, side="right")) for n in longest}) == 1


def test_token_batches_hold_at_most_batch_tokens(data, tokenizers):
    plain = pipeline.make_translation_dataset(
        data.train_pairs, *tokenizers, batch_size=16, shuffle=False
    )
    boundaries, budget = [8, 12], 100
    by_tokens = pipeline.make_translation_dataset(
        data.train_pairs, *tokenizers, batch_size=None, bucket_boundaries=boundaries,
        batch_tokens=budget, max_length=20, seed=3,
    )
    assert pipeline.bucket_batch_sizes(boundaries, 20, None, budget) == [14, 9, 5]
    assert collections.Counter(rows(by_tokens)) == collections.Counter(rows(plain))
    full = collections.Counter()
    for source, target, _ in batches(by_tokens):
        assert source.size <= budget and target.size <= budget
        longest = np.maximum((source != 0).sum(1), (target != 0).sum(1))
        (bucket,) = {int(np.searchsorted(boundaries, n, side="right")) for n in longest}
        full[bucket, len(source)] += 1
    # Every bucket's batches are full but the last one: 14, 9, 5 examples.
    for bucket, size in enumerate([14, 9, 5]):
        assert {n for b, n in full if b == bucket} - {size} == {
            n for b, n in full if b == bucket and n < size}
        assert sum(count for (b, n), count in full.items() if b == bucket and n < size) <= 1
    with pytest.raises(ValueError, match="bucket_boundaries"):
        pipeline.make_translation_dataset(data.train_pairs, *tokenizers, batch_size=None,
                                          batch_tokens=100)
    with pytest.raises(ValueError, match="batch_tokens"):
        pipeline.make_translation_dataset(data.train_pairs, *tokenizers, batch_size=None,
                                          bucket_boundaries=[8], batch_tokens=0)


def _widths(dataset):
    """`{(bucket of the batch, S, T, labels' T)}` of every batch: the bucket by the longest
    unpadded source or target in it, under boundaries [8, 12]."""
    shapes = set()
    for source, target, labels in batches(dataset):
        longest = np.maximum((source != PAD_ID).sum(1), (target != PAD_ID).sum(1))
        (bucket,) = {int(np.searchsorted([8, 12], n, side="right")) for n in longest}
        shapes.add((bucket, source.shape[1], target.shape[1], labels.shape[1]))
    return shapes


def test_padding_to_the_bucket_boundary_gives_each_bucket_one_length(data, tokenizers):
    """Padded to the longest length a bucket admits (7, 11, then max_length=20), the batches
    hold the same examples as padded to the longest in each batch, in as many batches, and
    come in one length per bucket: what a compiler of one program per shape (jax.jit) wants."""
    common = dict(batch_size=16, bucket_boundaries=[8, 12], max_length=20, shuffle=False)
    longest = pipeline.make_translation_dataset(data.train_pairs, *tokenizers, **common)
    fixed = pipeline.make_translation_dataset(data.train_pairs, *tokenizers, **common,
                                              pad_to_bucket_boundary=True)
    assert rows(fixed) == rows(longest)
    assert [len(x) for x, _, _ in batches(fixed)] == [len(x) for x, _, _ in batches(longest)]
    assert int(fixed.cardinality()) == int(longest.cardinality())
    widths = _widths(fixed)
    assert {bucket for bucket, *_ in widths} == {0, 1, 2}  # the data fills every bucket
    assert widths == {(bucket, n, n, n) for bucket, n in enumerate([7, 11, 20])}
    assert len({shape[1:] for shape in _widths(longest)}) > 3  # what padding saves compiling
    for _, target, labels in batches(fixed):
        assert np.all((target == PAD_ID) == (labels == PAD_ID))


def test_padding_to_the_bucket_boundary_stops_at_max_length(data, tokenizers):
    """Boundaries above `max_length` pad no further than it, and token batches stay within
    their budget; without boundaries every batch is `max_length` long."""
    clipped = pipeline.make_translation_dataset(
        data.train_pairs, *tokenizers, batch_size=None, bucket_boundaries=[8, 12, 100],
        batch_tokens=120, max_length=16, shuffle=False, pad_to_bucket_boundary=True)
    sizes = pipeline.bucket_batch_sizes([8, 12, 100], 16, None, 120)
    assert sizes == [17, 10, 1, 7]  # the [12, 100) bucket sized for 99 tokens, padded to 16
    for source, target, _ in batches(clipped):
        assert source.shape[1] == target.shape[1] in (7, 11, 16)
        assert source.size <= 120 and target.size <= 120
    assert {source.shape[1] for source, _, _ in batches(clipped)} == {7, 11, 16}
    unbucketed = pipeline.make_translation_dataset(
        data.train_pairs, *tokenizers, batch_size=64, max_length=16, pad_to_bucket_boundary=True)
    assert {x.shape[1:] + t.shape[1:] + y.shape[1:] for x, t, y in batches(unbucketed)} == {
        (16, 16, 16)}
    assert collections.Counter(rows(unbucketed)) == collections.Counter(rows(clipped))


@pytest.mark.parametrize("backend, padded", [("jax", True), ("tensorflow", False),
                                             ("torch", False)])
def test_zoo_runs_pad_to_the_bucket_boundary_on_jax(data, tokenizers, monkeypatch, backend,
                                                    padded):
    """`zoo train`'s pipelines (`translation_datasets`) pad to the bucket boundary on JAX,
    whose `jax.jit` compiles the train step for each shape, and to the longest in each batch
    where the backend takes any shape (TensorFlow's `tf.function`, PyTorch)."""
    from keras_attention import backends
    from zoo.datasets import preparation

    monkeypatch.setattr(backends, "backend", lambda: backend)
    train, val, _, _ = preparation.translation_datasets(
        data.train_pairs, *tokenizers, 16, 20, 0.1, 0)
    for dataset in (train, val):
        shapes = {source.shape[1] for source, _, _ in batches(dataset)}
        assert (shapes <= {7, 11, 15, 20}) == padded, shapes  # boundaries 8, 12, 16 (< 20)


def test_drop_remainder(data, tokenizers):
    dataset = pipeline.make_translation_dataset(
        data.train_pairs, *tokenizers, batch_size=64, drop_remainder=True
    )
    sizes = [len(source) for source, _, _ in batches(dataset)]
    assert sizes == [64] * (len(data.train_pairs) // 64)
    assert int(dataset.cardinality()) == len(sizes)
    dataset = pipeline.make_translation_dataset(data.train_pairs, *tokenizers, batch_size=64)
    assert int(dataset.cardinality()) == -(-len(data.train_pairs) // 64)


@pytest.mark.large
def test_deterministic_with_a_seed(data, tokenizers):
    def epochs(seed, count=1, bucket_boundaries=None):
        tf.random.set_seed(1)
        dataset = pipeline.make_translation_dataset(
            data.train_pairs[:200],
            *tokenizers,
            batch_size=40,
            seed=seed,
            bucket_boundaries=bucket_boundaries,
        )
        return [batches(dataset) for _ in range(count)]

    def same(a, b):
        return len(a) == len(b) and all(
            all(np.array_equal(u, v) for u, v in zip(x, y)) for x, y in zip(a, b)
        )

    first, second = epochs(0, count=2)
    (again,), (other,) = epochs(0), epochs(1)
    assert same(first, again)
    assert not same(first, second)  # reshuffled every epoch
    assert not same(first, other)
    (bucketed,), (bucketed_again,) = (
        epochs(0, bucket_boundaries=[8, 12]),
        epochs(0, bucket_boundaries=[8, 12]),
    )
    assert same(bucketed, bucketed_again)


def test_rejects_bad_arguments(data, tokenizers):
    pairs = data.train_pairs
    cases = [
        (dict(pairs=[]), "empty"),
        (dict(pairs=[("a", "b", "c")]), "index 0"),
        (dict(pairs=[("a", 3)]), "index 0"),
        (dict(pairs="a\tb"), "list"),
        (dict(pairs=pairs, batch_size=0), "batch_size"),
        (dict(pairs=pairs, max_length=1), "max_length"),
        (dict(pairs=pairs, bucket_boundaries=[8, 8]), "strictly increasing"),
        (dict(pairs=pairs, bucket_boundaries=[200], max_length=50), "max_length"),
        (dict(pairs=pairs, shuffle_buffer_size=0), "shuffle_buffer_size"),
    ]
    for kwargs, message in cases:
        kwargs = {
            "source_tokenizer": tokenizers[0],
            "target_tokenizer": tokenizers[1],
            "batch_size": 8,
            **kwargs,
        }
        with pytest.raises(ValueError, match=message):
            pipeline.make_translation_dataset(**kwargs)
    with pytest.raises(ValueError, match="tokenize"):
        pipeline.make_translation_dataset(pairs, object(), tokenizers[1], batch_size=8)


def test_feeds_a_keras_model(data, tokenizers):
    import keras

    source_tokenizer, target_tokenizer = tokenizers
    source = keras.Input((None,), dtype="int32", name="source")
    target = keras.Input((None,), dtype="int32", name="target")
    embedded = keras.layers.Embedding(target_tokenizer.vocab_size, 8)(target)
    context = keras.ops.mean(keras.layers.Embedding(source_tokenizer.vocab_size, 8)(source), 1)
    logits = keras.layers.Dense(target_tokenizer.vocab_size)(
        embedded + keras.ops.expand_dims(context, 1)
    )  # (B, T, V)
    model = keras.Model({"source": source, "target": target}, logits)
    model.compile(
        "adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0)
    )
    dataset = pipeline.make_translation_dataset(data.train_pairs, *tokenizers, batch_size=64)
    history = model.fit(dataset, epochs=1, verbose=0, shuffle=False)
    assert np.isfinite(history.history["loss"][0])
