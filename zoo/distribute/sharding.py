"""Datasets under a strategy: the auto-shard policy each worker keeps its share by."""

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


