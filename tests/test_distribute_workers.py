"""Tests for zoo/distribute/workers.py: who keeps the files, and where the others write.

A `MultiWorkerMirroredStrategy` cannot be made in a process that has already
run TensorFlow ops, so the cluster is a subclass that only carries its resolver
(all `workers` reads); the real two-worker run is in tests/test_distribute.py.
"""

import os

import tensorflow as tf

from zoo import distribute


def cluster_member(task_type, task_id, cluster):
    class Member(tf.distribute.MultiWorkerMirroredStrategy):
        def __init__(self):  # no collective setup: only the resolver is read
            pass

        cluster_resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
            tf.train.ClusterSpec(cluster), task_type=task_type, task_id=task_id
        )

    return Member()


WORKERS = {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}


def test_the_chief_keeps_its_paths(tmp_path):
    for strategy in (tf.distribute.get_strategy(), cluster_member("worker", 0, WORKERS),
                     cluster_member("chief", 0, {"chief": ["h:1"], **WORKERS})):
        assert distribute.is_chief(strategy)
        assert distribute.worker_dir(tmp_path / "out", strategy) == tmp_path / "out"
        assert distribute.worker_path(tmp_path / "a.keras", strategy) == tmp_path / "a.keras"
        assert distribute.worker_backup_dir(tmp_path / "b", strategy) == tmp_path / "b"
        distribute.cleanup_worker_dir(tmp_path, strategy)
        assert tmp_path.is_dir()
    # With a chief task, worker 0 is not the chief.
    assert not distribute.is_chief(cluster_member("worker", 0, {"chief": ["h:1"], **WORKERS}))


def test_another_worker_writes_to_a_temporary_directory_it_removes(tmp_path):
    strategy = cluster_member("worker", 1, WORKERS)
    assert not distribute.is_chief(strategy)
    directory = distribute.worker_dir(tmp_path / "checkpoints", strategy)
    assert os.path.basename(directory).startswith("checkpoints-worker-1-")
    assert os.path.isdir(directory) and not str(directory).startswith(str(tmp_path))
    path = distribute.worker_path(tmp_path / "model.keras", strategy)
    assert os.path.basename(path) == "model.keras"
    assert distribute.worker_backup_dir(tmp_path / "backup", strategy) == (
        f"{tmp_path / 'backup'}-worker-1"
    )
    distribute.cleanup_worker_dir(directory, strategy)
    distribute.cleanup_worker_dir(path, strategy)
    assert not os.path.exists(directory) and not os.path.exists(os.path.dirname(path))
    distribute.cleanup_worker_dir(tmp_path, strategy)  # not made here: left alone
    assert tmp_path.is_dir()
