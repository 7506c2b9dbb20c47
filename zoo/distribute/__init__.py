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

On JAX, `zoo train` trains under `keras.distribution` instead: `place` resolves a
strategy name on the backend in use (`"mirrored"`: `DataParallel` over the local
devices; `"multiworker"`: over every device of a job of several processes, `Processes`,
process 0 keeping the files), and `scope(model)` is the strategy's scope on TensorFlow, a null context
elsewhere (`placement`).

The modules, one concern each: `strategies` (`get_strategy`, `check_jit_compile`,
`default_policy`, `global_batch_size`), `placement` (`place`, `Placement`, `scope`,
`fit_data`: the backend in use), `replica_sync` (`prepare_model` and the fixes it
applies), `sharding` (`shard_by_data`, `dataset_options`, `even_batches`) and `workers`
(the chief and the other workers' files). Their public names are importable from `zoo.distribute`.
"""

from zoo.distribute.placement import (
    Placement,
    Processes,
    fit_data,
    place,
    scope,
)
from zoo.distribute.replica_sync import (
    prepare_model,
    sync_gradient_clipping,
    sync_loss_tracker,
)
from zoo.distribute.sharding import (
    dataset_options,
    even_batches,
    shard_by_data,
)
from zoo.distribute.strategies import (
    STRATEGIES,
    check_jit_compile,
    default_policy,
    get_strategy,
    global_batch_size,
)
from zoo.distribute.workers import (
    cleanup_worker_dir,
    is_chief,
    worker_backup_dir,
    worker_dir,
    worker_path,
)

__all__ = [
    "STRATEGIES",
    "Placement",
    "Processes",
    "check_jit_compile",
    "cleanup_worker_dir",
    "dataset_options",
    "default_policy",
    "even_batches",
    "fit_data",
    "get_strategy",
    "global_batch_size",
    "is_chief",
    "place",
    "prepare_model",
    "scope",
    "shard_by_data",
    "sync_gradient_clipping",
    "sync_loss_tracker",
    "worker_backup_dir",
    "worker_dir",
    "worker_path",
]
