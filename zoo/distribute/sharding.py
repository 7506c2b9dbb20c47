"""Datasets under a strategy: the auto-shard policy each worker keeps its share by, and batches
that split evenly over the devices of a `keras.distribution` (`even_batches`)."""

import tensorflow as tf


def dataset_options(policy=None):
    """`tf.data.Options` with the auto-shard policy (default `AutoShardPolicy.DATA`).

    DATA, not FILE (nor AUTO, which tries FILE first): the zoo's datasets are
    generated in memory or read from one file, so there are no files to hand
    out one per worker (FILE would fail or give a worker nothing). With DATA
    every worker builds the whole (small) pipeline and keeps its share of the
    elements, which needs a deterministic element order: shuffle with a seed.
    """
    if policy is None:
        policy = tf.data.experimental.AutoShardPolicy.DATA
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = policy
    return options


def shard_by_data(dataset, policy=None):
    """`dataset` with `dataset_options(policy)`: what to give `model.fit` under a strategy."""
    if not isinstance(dataset, tf.data.Dataset):
        raise ValueError(
            f"`dataset` must be a tf.data.Dataset; received {type(dataset).__name__}."
        )
    return dataset.with_options(dataset_options(policy))


def even_batches(dataset, multiple, pad_id=None):
    """The batches `(x, y)` of `dataset` padded to a multiple of `multiple` examples with
    copies of their first example that count for nothing: for a `keras.distribution`, which
    splits each batch in `multiple` equal parts (`tf.distribute` splits any batch itself).

    Args:
        dataset: a `tf.data.Dataset` of batches `(x, y)`, `x` a tensor or a structure of them.
        multiple: the devices a batch is split over.
        pad_id: translation: the copies' labels are all `pad_id`, which the zoo's masked
            losses and metrics skip (`keras_attention.losses`, `.metrics`); the batches stay
            `(x, y)`. None (images): the batches become `(x, y, sample_weight)`, 0 for the
            copies, which the zoo's loss (a weighted mean) and its gradient skip; Keras gives
            the compiled `metrics` no weights, so an epoch's accuracy counts the copies (at
            most `multiple - 1`, in the last batch of the epoch).
    """

    def pad(x, y):
        size = tf.shape(y)[0]
        extra = (-size) % multiple

        def grow(tensor, fill=None):
            copies = tf.repeat(tensor[:1], extra, axis=0)
            if fill is not None:
                copies = tf.fill(tf.shape(copies), tf.cast(fill, tensor.dtype))
            return tf.concat([tensor, copies], axis=0)

        x = tf.nest.map_structure(grow, x)
        if pad_id is not None:
            return x, grow(y, pad_id)
        weight = tf.concat([tf.ones([size]), tf.zeros([extra])], axis=0)
        return x, grow(y), weight

    return dataset.map(pad)


def process_share(dataset, count, index):
    """Process `index`'s share of each batch of `dataset`, one of `count` equal parts (the
    batches split evenly: `even_batches`), in order: what a JAX job of `count` processes
    gives `fit`, which joins the shares into the global batch, process 0's first
    (`jax.make_array_from_process_local_data`). Keras's own `distribute_dataset` does the
    same only for batches of one known size, which length buckets are not.
    """

    def share(*batch):
        size = tf.shape(batch[1])[0] // count
        return tuple(tf.nest.map_structure(lambda t: t[index * size:(index + 1) * size], part)
                     for part in batch)

    return dataset.map(share)
