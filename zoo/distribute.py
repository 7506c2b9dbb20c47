"""Training on several devices with TensorFlow's own `tf.distribute` strategies.

    import zoo
    from zoo import distribute

    strategy = distribute.get_strategy("mirrored")           # all local GPUs
    batch = distribute.global_batch_size(64, strategy)       # 64 per replica
    model = zoo.get("transformer-tiny", strategy=strategy)   # built in strategy.scope()
    model.fit(distribute.shard_by_data(dataset.batch(batch)), epochs=3)

How the pieces fit with Keras 3 (TensorFlow backend):

- A model built inside `strategy.scope()` remembers the strategy
  (`model.distribute_strategy`); `model.fit` then distributes a `tf.data.Dataset`
  itself (`strategy.experimental_distribute_dataset`): every batch of the
  dataset is one *global* batch, split evenly over the replicas, so batch the
  dataset with `global_batch_size(per_replica, strategy)`. Give `fit` the plain
  dataset, with the auto-shard policy set (`shard_by_data`).
- Gradients are summed over replicas, so each replica's loss must be its share
  of the global-batch loss. Keras' losses divide their per-replica mean by the
  number of replicas, exact when the replicas get batches of equal size (every
  full batch; not the last, smaller batch of an epoch when it does not split
  evenly); `keras_attention.losses.MaskedSparseCategoricalCrossentropy`
  divides the per-replica token sum by the global token count instead, which is
  exactly the single-device token mean whatever the padding on each replica.
- `fit` and `evaluate` compute their logs on each replica and average them
  (the per-step logs); at the end of an epoch, and for `evaluate`'s results
  (so `val_loss`), they read the metrics' variables summed over the replicas.
  Keras' loss tracker adds each replica's loss × R weighted by the replica's
  batch size: right in the sum when each replica's value is its own mean over
  R (Keras' losses), or the global batch's loss over R on every replica (the
  masked loss, whatever the split, an empty replica included); its per-step
  logs are a mean of the replicas' running means, off on a step that does not
  split evenly (the last, partial batch of an epoch or of a length bucket).
  `prepare_model` (`sync_loss_tracker`) makes every replica track the summed
  value, which changes nothing to the sum and makes the per-step logs right.
  `MaskedAccuracy` sums its counts over the replicas itself, so it is right
  whatever the split; Keras' metrics are right in `evaluate` and at the end of
  an epoch, not in the per-step logs of an uneven step. The zoo's recipes (ViT
  included) compile with the `keras_attention` loss and metric.
- Gradient clipping: Keras clips each replica's partial gradient before summing
  them; `sync_gradient_clipping` (applied by `zoo.get`) clips the sum instead.
- Under a strategy Keras builds the model on a first batch it draws from the
  dataset before training, which advances a `shuffle(seed=..,
  reshuffle_each_iteration=True)`: a distributed run sees the shuffles of
  epochs 1, 2, ... where a run without a strategy sees those of 0, 1, ...
  (compare with `"mirrored"` on one device, which does the same). A restarted
  process also starts its shuffles over, so a resumed run sees other batches
  than an uninterrupted one from the restart on.

Strategies (`STRATEGIES`):

- `"default"`: no distribution (`tf.distribute.get_strategy()`), one device.
- `"mirrored"`: `MirroredStrategy` over all local GPUs; without GPUs over all
  logical CPUs when there are several (tests split the CPU in two with
  `tf.config.set_logical_device_configuration`), else over the CPU.
- `"multiworker"`: `MultiWorkerMirroredStrategy`, the cluster read from the
  `TF_CONFIG` environment variable (`{"cluster": {"worker": ["host:port", ...]},
  "task": {"type": "worker", "index": i}}`), one process per machine. Without
  `TF_CONFIG` it is a valid single-worker strategy (as in TensorFlow: the same
  script runs on one machine unchanged); a `TF_CONFIG` that is not JSON, lacks
  `cluster` or `task`, or names a task not in the cluster raises a `ValueError`.
  TensorFlow requires this strategy to be created before any other TF op runs.
- `"tpu"`: `TPUClusterResolver(tpu=NAME)` (`"local"` on a Cloud TPU VM, a TPU
  name, or a `grpc://host:port` address), `tf.config.experimental_connect_to_cluster`,
  `tf.tpu.experimental.initialize_tpu_system`, `TPUStrategy`. Without a TPU it
  raises a one-line `ValueError` (`zoo train` prints it and exits with code 2).
  `default_policy` gives `"mixed_bfloat16"` for it.

XLA: a train step distributed over several CPU replicas cannot be compiled
(`jit_compile=True`): TensorFlow has no XLA all-reduce for CPU devices.
`check_jit_compile` (called by `zoo.get` and `zoo train`) refuses it with a
one-line `ValueError` before any work; GPU and TPU replicas compile fine.

Multi-worker files: every worker runs the same `fit`, including the callbacks
that save (TensorFlow needs every worker in a save, whose reads of distributed
variables may be collective ops); only the chief's files are kept.
`worker_dir` / `worker_path` give the chief the real location and the other
workers a fresh temporary one, which `cleanup_worker_dir` removes afterwards;
`worker_backup_dir` gives each worker its own `BackupAndRestore` directory.

Fault tolerance: a `MultiWorkerMirroredStrategy` job cannot go on when a worker
dies (the others block in, or fail out of, the next collective op); restart
every worker with the same command and `BackupAndRestore` resumes all of them
from the last completed epoch: only the interrupted epoch is redone.
"""

import json
import os
import shutil
import socket
import tempfile
import urllib.parse

import tensorflow as tf
from keras.src.backend.tensorflow import trainer

from keras_attention.checks import check_positive_int

STRATEGIES = ("default", "mirrored", "multiworker", "tpu")

# Temporary directories made by `worker_dir` / `worker_path` in this process.
_TEMP_DIRS = set()


# === Strategies ===


def get_strategy(name="default", tpu=None, *, connect_timeout=10.0):
    """The `tf.distribute.Strategy` called `name`.

    Args:
        name: one of `STRATEGIES` (`"default"`, `"mirrored"`, `"multiworker"`,
            `"tpu"`), or a `tf.distribute.Strategy`, returned as is.
        tpu: for `"tpu"`: `"local"` (Cloud TPU VM), a Cloud TPU name or a
            `grpc://host:port` address; None lets the resolver look in the
            `TPU_NAME` environment variable.
        connect_timeout: seconds to wait for a `grpc://` TPU address to accept
            a connection before giving up (TensorFlow itself would wait forever).

    Returns:
        A `tf.distribute.Strategy`.

    Raises:
        ValueError: an unknown name, a malformed `TF_CONFIG`, or no TPU found
            (a one-line message).
    """
    if isinstance(name, tf.distribute.Strategy):
        return name
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        return _mirrored()
    if name == "multiworker":
        _check_tf_config()
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "tpu":
        return _tpu_strategy(tpu, connect_timeout)
    raise ValueError(
        f"Unknown strategy {name!r}; `strategy` must be one of {', '.join(STRATEGIES)} "
        "or a tf.distribute.Strategy."
    )


def _mirrored():
    gpus = tf.config.list_logical_devices("GPU")
    if gpus:
        return tf.distribute.MirroredStrategy([device.name for device in gpus])
    cpus = tf.config.list_logical_devices("CPU")
    # Several CPU devices only exist if the user split the CPU on purpose.
    devices = [device.name for device in cpus] if len(cpus) > 1 else ["/cpu:0"]
    return tf.distribute.MirroredStrategy(devices)


def _check_tf_config():
    raw = os.environ.get("TF_CONFIG", "").strip()
    if not raw:
        return  # A single worker, as TensorFlow allows.
    try:
        config = json.loads(raw)
    except json.JSONDecodeError as error:
        raise ValueError(f"TF_CONFIG is not valid JSON ({error}); received {raw!r}.") from None
    if not isinstance(config, dict) or "cluster" not in config or "task" not in config:
        raise ValueError(
            "TF_CONFIG must have a 'cluster' and a 'task' entry, e.g. "
            '{"cluster": {"worker": ["host1:port", "host2:port"]}, '
            f'"task": {{"type": "worker", "index": 0}}}}; received {raw!r}.'
        )
    cluster, task = config["cluster"], config["task"]
    if not isinstance(cluster, dict) or not isinstance(task, dict):
        raise ValueError(f"TF_CONFIG 'cluster' and 'task' must be objects; received {raw!r}.")
    task_type, index = task.get("type"), task.get("index")
    members = cluster.get(task_type)
    if (
        not isinstance(members, list)
        or isinstance(index, bool)
        or not isinstance(index, int)
        or not 0 <= index < len(members)
    ):
        raise ValueError(
            f"TF_CONFIG task {task!r} is not in its cluster {cluster!r}: 'type' must be a key "
            "of 'cluster' and 'index' a position in its list."
        )


def _tpu_strategy(tpu, connect_timeout):
    where = f"--tpu {tpu!r}" if tpu is not None else "TPU_NAME / --tpu"
    if isinstance(tpu, str) and tpu.startswith("grpc://"):
        _check_reachable(tpu, connect_timeout, where)
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    except ValueError as error:
        raise ValueError(f"No TPU found ({where}): {_one_line(error)}") from None
    except Exception as error:  # noqa: BLE001 - URLError, NotFoundError, ... all mean "no TPU"
        raise ValueError(
            f"No TPU found ({where}): {type(error).__name__}: {_one_line(error)}"
        ) from None


def _check_reachable(address, timeout, where):
    parsed = urllib.parse.urlparse(address)
    try:
        with socket.create_connection((parsed.hostname, parsed.port), timeout=timeout):
            pass
    except (OSError, ValueError, TypeError) as error:
        raise ValueError(
            f"No TPU found ({where}): {address} does not answer ({_one_line(error)})."
        ) from None


def _one_line(error, limit=200):
    text = " ".join(str(error).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_jit_compile(strategy, jit_compile):
    """Refuse XLA (`jit_compile=True`) for training over several CPU replicas.

    TensorFlow cannot compile such a train step: under
    `MultiWorkerMirroredStrategy` the gradient all-reduce fails ("Collectives
    are not yet implemented for CPU devices when compiling with XLA", and the
    process then aborts), and under `MirroredStrategy` over logical CPUs a
    replica's XLA computation cannot read its variables on another CPU device.
    Both fail at the first step, after the data is loaded; this fails before.
    GPU and TPU replicas are not concerned.

    Args:
        strategy: a `tf.distribute.Strategy`; None for the current one
            (`tf.distribute.get_strategy()`, e.g. inside `strategy.scope()`).
        jit_compile: the model config's `jit_compile`.

    Raises:
        ValueError: `jit_compile` is true and the strategy has several
            replicas on CPU devices (a one-line message).
    """
    if strategy is None:
        strategy = tf.distribute.get_strategy()
    if not jit_compile or strategy.num_replicas_in_sync < 2:
        return
    devices = strategy.extended.worker_devices
    if any(tf.DeviceSpec.from_string(device).device_type != "CPU" for device in devices):
        return
    kind = type(strategy).__name__
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        kind = "MultiWorkerMirroredStrategy"  # not its implementation's name
    raise ValueError(
        f"XLA (--jit / jit_compile=True) cannot compile a train step distributed over "
        f"{strategy.num_replicas_in_sync} CPU replicas ({kind}): TensorFlow "
        "has no XLA all-reduce for CPU devices; train without --jit (or on GPUs / TPUs)."
    )


def default_policy(strategy):
    """The mixed-precision policy to train with: `"mixed_bfloat16"` on TPU, else None."""
    return "mixed_bfloat16" if isinstance(strategy, tf.distribute.TPUStrategy) else None


def global_batch_size(per_replica, strategy):
    """`per_replica × strategy.num_replicas_in_sync`: the batch size to give the dataset."""
    check_positive_int("per_replica", per_replica)
    return per_replica * strategy.num_replicas_in_sync


def prepare_model(model):
    """Fix, on a compiled model, what Keras 3.15 gets wrong under a strategy.

    `zoo.get` calls it on every model it builds; call it yourself on a model you
    compiled or loaded under a strategy's scope. Does nothing harmful on one
    device. The fixes, on the instance unless said otherwise:

    - `sync_gradient_clipping(model.optimizer)` (clip the summed gradient).
    - `sync_loss_tracker(model)` (the per-step `loss` logs are those of the
      global batches, however they split over the replicas).
    - Before training, Keras builds the model on a first batch, reduced over the
      replicas with `strategy.reduce(..)` applied to the whole batch structure,
      which fails under `MultiWorkerMirroredStrategy` when the inputs are a dict
      (keras-team/keras#20329), as the translation models' `{"source", "target"}`
      are. The batch is only used for its shapes: take this worker's first
      replica's part of each tensor instead (no collective op).
    - Under `MultiWorkerMirroredStrategy`, the reduction of `fit`'s scalar logs
      over the workers (`_patch_multi_worker_logs`, process-wide).

    Returns:
        `model`.
    """
    if getattr(model, "optimizer", None) is not None:
        sync_gradient_clipping(model.optimizer)
    sync_loss_tracker(model)
    if isinstance(getattr(model, "_distribute_strategy", None), tf.distribute.MultiWorkerMirroredStrategy):
        _patch_multi_worker_logs()
    build = getattr(model, "_maybe_symbolic_build", None)
    if build is None or getattr(model, "_zoo_prepared", False):
        return model

    def _maybe_symbolic_build(iterator=None, data_batch=None):
        strategy = getattr(model, "_distribute_strategy", None)
        if strategy is None or iterator is None:
            return build(iterator=iterator, data_batch=data_batch)
        for _, _, batches in iterator:  # As Keras does: peek at the first batch.
            data_batch = next(batches)
            break
        data_batch = tf.nest.map_structure(
            lambda value: strategy.experimental_local_results(value)[0]
            if isinstance(value, tf.distribute.DistributedValues)
            else value,
            data_batch,
        )
        return build(data_batch=data_batch)

    model._maybe_symbolic_build = _maybe_symbolic_build
    model._zoo_prepared = True
    return model


def _patch_multi_worker_logs():
    """Let `fit` reduce its scalar logs over the workers of a multi-worker job.

    Keras 3.15 reduces each log of a train step with `strategy.reduce("MEAN",
    value, axis=0)` under `MultiWorkerMirroredStrategy`, which fails for the
    scalar losses and metrics ("Invalid reduction dimension 0 for input with 0
    dimensions", tensorflow/tensorflow#72388). Scalars are reduced with
    `axis=None` (the mean over the replicas) instead; everything else is left
    to Keras. Installed once, process-wide, only when a multi-worker model is
    prepared.
    """
    if getattr(trainer.reduce_per_replica, "_zoo_patched", False):
        return
    original = trainer.reduce_per_replica

    def reduce_per_replica(values, strategy, reduction):
        multi_worker = isinstance(
            strategy, tf.distribute.MultiWorkerMirroredStrategy
        ) and strategy.extended._in_multi_worker_mode()
        if not multi_worker or reduction not in ("auto", "mean"):
            return original(values, strategy, reduction)

        def reduce(value):
            parts = (
                strategy.experimental_local_results(value)
                if isinstance(value, tf.distribute.DistributedValues)
                else (value,)
            )
            if all(isinstance(p, tf.Tensor) and p.shape.rank == 0 for p in parts):
                return strategy.reduce(tf.distribute.ReduceOp.MEAN, value, axis=None)
            return original(value, strategy, reduction)

        return tf.nest.map_structure(reduce, values)

    reduce_per_replica._zoo_patched = True
    trainer.reduce_per_replica = reduce_per_replica


def sync_loss_tracker(model):
    """Make the per-step `loss` that `fit` logs under a strategy the one Keras
    reports at the end of the epoch, however the global batches split over the
    replicas.

    Keras 3.15's `train_step` / `test_step` (TensorFlow backend) update the loss
    tracker (`model._loss_tracker`, a `keras.metrics.Mean`; private) on each
    replica r with `v_r = R × loss_r` (`unscale_loss_for_distribution`)
    weighted by the replica's batch size `b_r`. The end-of-epoch and `evaluate`
    results read the tracker's variables summed over the replicas:
    `Σ_s Σ_r v_r b_r / Σ_s B_s` (B the global batch size), the single-device
    value when `v_r` is the replica's own mean (Keras' losses) or the global
    batch's loss on every replica (`MaskedSparseCategoricalCrossentropy`). The
    per-step logs are instead the mean over the replicas of each replica's
    running mean `Σ_s v_r b_r / Σ_s b_r`, which differs as soon as one step
    does not split evenly (e.g. a last batch of 5 split 4 / 1). Patched here on
    the tracker instance: each replica all-reduces `(v_r b_r, b_r)` and adds
    the global batch's value `Σ_r v_r b_r / B` weighted by `B / R`. Every
    replica then holds the same running mean, whose variables sum to exactly
    what Keras' would (so the end-of-epoch and `evaluate` values do not
    change), and the per-step logs equal it. Nothing changes on one replica or
    outside `strategy.run`.

    `compile` makes a new tracker: call again (`prepare_model`) after a
    recompile. Relies on Keras' private `_loss_tracker` attribute and on the
    tracker being updated with a scalar loss and a scalar batch size; anything
    else is passed to Keras unchanged.

    Args:
        model: a compiled `keras.Model` (without a tracker, nothing is done).

    Returns:
        `model`.
    """
    tracker = getattr(model, "_loss_tracker", None)
    if tracker is None or getattr(tracker, "_zoo_synced", False):
        return model
    update = tracker.update_state

    def update_state(values, sample_weight=None):
        context = tf.distribute.get_replica_context()
        if (
            context is None
            or context.num_replicas_in_sync == 1
            or sample_weight is None
            or tf.convert_to_tensor(values).shape.rank != 0
            or tf.convert_to_tensor(sample_weight).shape.rank != 0
        ):
            return update(values, sample_weight=sample_weight)
        values = tf.stop_gradient(tf.cast(values, "float32"))
        weight = tf.cast(sample_weight, "float32")
        total, count = context.all_reduce(tf.distribute.ReduceOp.SUM, [values * weight, weight])
        replicas = float(context.num_replicas_in_sync)
        return update(tf.math.divide_no_nan(total, count), sample_weight=count / replicas)

    tracker.update_state = update_state
    tracker._zoo_synced = True
    return model


def sync_gradient_clipping(optimizer):
    """Make the optimizer's `clipnorm` / `global_clipnorm` / `clipvalue` clip the
    gradient of the global batch under a strategy, as on one device.

    Keras 3 (TensorFlow backend) clips each replica's partial gradient and only
    then sums the replicas' gradients, so a clipped run on N replicas differs
    from the same run on one device whenever clipping is active (the RNNsearch
    and ViT recipes clip). Patched here on the instance: `_clip_gradients` first
    sums the gradients over the replicas (the all-reduce Keras would do anyway)
    and clips the sum; the later all-reduce is then skipped. Nothing changes on
    a single replica, without clipping, or with gradient accumulation (left as
    Keras does it). `zoo.get` applies it (through `prepare_model`) to every
    model it compiles.

    Args:
        optimizer: a `keras.optimizers.Optimizer` (a `LossScaleOptimizer` is
            handled through its inner optimizer).

    Returns:
        `optimizer`, patched in place.
    """
    inner = getattr(optimizer, "inner_optimizer", None)
    if inner is not None:
        sync_gradient_clipping(inner)
        return optimizer
    if (
        getattr(optimizer, "_zoo_synced_clipping", False)
        or not (optimizer.clipnorm or optimizer.global_clipnorm or optimizer.clipvalue)
        or optimizer.gradient_accumulation_steps
        or not hasattr(optimizer, "_all_reduce_sum_gradients")
    ):
        return optimizer
    clip = optimizer._clip_gradients
    all_reduce = optimizer._all_reduce_sum_gradients

    def _replicas():
        context = tf.distribute.get_replica_context()
        return context if context is not None and context.num_replicas_in_sync > 1 else None

    def _clip_gradients(grads):
        context = _replicas()
        if context is not None:
            present = [g for g in grads if g is not None]
            summed = iter(context.all_reduce(tf.distribute.ReduceOp.SUM, present))
            grads = [None if g is None else next(summed) for g in grads]
        return clip(grads)

    def _all_reduce_sum_gradients(grads_and_vars):
        if _replicas() is not None:
            return list(grads_and_vars)  # Already summed by `_clip_gradients`.
        return all_reduce(grads_and_vars)

    optimizer._clip_gradients = _clip_gradients
    optimizer._all_reduce_sum_gradients = _all_reduce_sum_gradients
    optimizer._zoo_synced_clipping = True
    return optimizer


# === Datasets ===


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


# === Chief and workers ===


def _task(strategy):
    """`(task_type, task_id)` of this process in a multi-worker cluster, else `(None, None)`."""
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return None, None
    resolver = strategy.cluster_resolver
    if resolver is None or not resolver.task_type:
        return None, None
    return resolver.task_type, resolver.task_id


def is_chief(strategy):
    """Whether this process keeps the files: always, except for the non-chief workers
    of a `MultiWorkerMirroredStrategy` cluster (the chief is the `"chief"` task, or
    worker 0 when the cluster has no chief)."""
    task_type, task_id = _task(strategy)
    if task_type is None or task_type == "chief":
        return True
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


__all__ = [
    "STRATEGIES",
    "check_jit_compile",
    "cleanup_worker_dir",
    "dataset_options",
    "default_policy",
    "get_strategy",
    "global_batch_size",
    "is_chief",
    "prepare_model",
    "shard_by_data",
    "sync_gradient_clipping",
    "sync_loss_tracker",
    "worker_backup_dir",
    "worker_dir",
    "worker_path",
]
