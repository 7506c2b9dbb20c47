"""The chief and the other workers of a multi-worker cluster: who keeps the files, and
where the others write theirs (`worker_dir`, `worker_path`, `worker_backup_dir`)."""

import os
import shutil
import tempfile

import tensorflow as tf

from keras_attention import backends

# Temporary directories made by `worker_dir` / `worker_path` in this process.
_TEMP_DIRS = set()


def _task(strategy):
    """`(task_type, task_id)` of this process in a multi-worker cluster, else `(None, None)`:
    a `MultiWorkerMirroredStrategy`'s task, or on JAX (no strategy) `("worker", process
    index)` in a job of several processes (`keras.distribution.initialize`)."""
    if strategy is None and backends.process_count() > 1:
        return "worker", backends.process_index()
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return None, None
    resolver = strategy.cluster_resolver
    if resolver is None or not resolver.task_type:
        return None, None
    return resolver.task_type, resolver.task_id


def is_chief(strategy):
    """Whether this process keeps the files: always, except for the non-chief workers
    of a `MultiWorkerMirroredStrategy` cluster (the chief is the `"chief"` task, or
    worker 0 when the cluster has no chief) and, on JAX (`strategy` None), the processes
    of a job but process 0."""
    task_type, task_id = _task(strategy)
    if task_type is None or task_type == "chief":
        return True
    if strategy is None:  # a JAX job: process 0
        return task_id == 0
    cluster = strategy.cluster_resolver.cluster_spec().as_dict()
    return task_type == "worker" and task_id == 0 and "chief" not in cluster


def worker_dir(path, strategy):
    """`path` on the chief; on other workers a fresh temporary directory.

    The temporary directory's name holds the task type and id and `path`'s
    base name (e.g. `/tmp/checkpoints-worker-1-x8d2k`); remove it with
    `cleanup_worker_dir`.
    """
    if is_chief(strategy):
        return path
    task_type, task_id = _task(strategy)
    base = os.path.basename(os.path.normpath(str(path))) or "output"
    directory = tempfile.mkdtemp(prefix=f"{base}-{task_type}-{task_id}-")
    _TEMP_DIRS.add(directory)
    return directory


def worker_backup_dir(path, strategy):
    """The `keras.callbacks.BackupAndRestore` directory of this worker.

    Keras' `BackupAndRestore` is not multi-worker aware: every worker saves its
    (identical) weights to `backup_dir` and deletes it at the end of `fit`, so
    workers sharing a file system would overwrite each other's backups. The
    chief gets `path`; another worker `"<path>-<task type>-<task id>"` beside it,
    which it restores from when the job restarts and which `fit` removes when
    training completes.
    """
    if is_chief(strategy):
        return path
    task_type, task_id = _task(strategy)
    return f"{os.path.normpath(str(path))}-{task_type}-{task_id}"


def worker_path(path, strategy):
    """A file path: `path` on the chief; on other workers the same base name inside
    a fresh temporary directory (`worker_dir`)."""
    if is_chief(strategy):
        return path
    return os.path.join(worker_dir(path, strategy), os.path.basename(str(path)))


def cleanup_worker_dir(path, strategy):
    """Remove what `worker_dir` / `worker_path` made on a non-chief worker.

    Does nothing on the chief (its `path` is the real output) nor for paths this
    process did not create.
    """
    if is_chief(strategy) or path is None:
        return
    path = os.path.normpath(str(path))
    for directory in sorted(_TEMP_DIRS):
        if path == directory or path.startswith(directory + os.sep):
            shutil.rmtree(directory, ignore_errors=True)
            _TEMP_DIRS.discard(directory)


