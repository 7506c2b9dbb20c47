"""Tests for zoo/distribute/sharding.py: the auto-shard policy."""


import pytest
import tensorflow as tf

from zoo import distribute


def test_shard_by_data_sets_the_auto_shard_policy():
    dataset = distribute.shard_by_data(tf.data.Dataset.range(8).batch(4))
    policy = dataset.options().experimental_distribute.auto_shard_policy
    assert policy == tf.data.experimental.AutoShardPolicy.DATA
    with pytest.raises(ValueError, match="dataset"):
        distribute.shard_by_data([1, 2, 3])


