"""Where a run trains on the Keras backend in use: a `tf.distribute` strategy on TensorFlow,
a `keras.distribution` on JAX.

    placement = distribute.place("mirrored")     # before any TF op (multiworker needs it)
    with placement.active():                     # JAX: the distribution is Keras' current one
        model = zoo.get(name, strategy=placement.strategy)
        with distribute.scope(model):            # variables made later, laid out as the model's
            model.optimizer.build(model.trainable_variables)

`--strategy NAME` on each backend:

- TensorFlow: `get_strategy(NAME)`; the model is built in its scope and remembers it
  (`model.distribute_strategy`), by which `fit` splits each batch over the replicas.
- JAX: `"default"` is the distribution already current (`keras.distribution.distribution()`),
  else none: one device. `"mirrored"` is `keras.distribution.DataParallel` over the local
  devices (`keras.distribution.list_devices()`): the variables replicated on each, each batch
  split over them. It is Keras' current distribution while the model is built and trained
  (`Placement.active`), which is all `fit` needs; `zoo.get` takes no strategy there.
  It splits a batch in equal parts only: `fit_data` pads each batch to a multiple of the
  devices with examples that count for nothing (`even_batches`).
  `"multiworker"` is several processes (hosts), one command each: `keras.distribution.initialize`
  with `processes` (`Processes`: the coordinator's address, the number of processes, this
  one's index), else Keras's `KERAS_DISTRIBUTION_JOB_ADDRESSES`,
  `KERAS_DISTRIBUTION_NUM_PROCESSES` and `KERAS_DISTRIBUTION_PROCESS_ID`, else what JAX finds
  of its cluster (a Cloud TPU VM, SLURM); then `DataParallel` over every process's devices.
  Keras gives each process its share of every global batch (`distribute_dataset`), and
  process 0 keeps the files (`zoo.distribute.is_chief`).
  `"tpu"` (and on PyTorch `"mirrored"` and `"multiworker"` too) is TensorFlow's:
  `BackendError`, one line naming the backend it needs.
"""

import contextlib
import dataclasses
import os

import keras
import tensorflow as tf

from keras_attention import backends
from zoo.distribute import sharding, strategies
from zoo.errors import ZooError

# Keras's variables for `keras.distribution.initialize`'s arguments.
PROCESS_VARIABLES = ("KERAS_DISTRIBUTION_JOB_ADDRESSES", "KERAS_DISTRIBUTION_NUM_PROCESSES",
                     "KERAS_DISTRIBUTION_PROCESS_ID")


@dataclasses.dataclass(frozen=True)
class Processes:
    """A JAX job of several processes (`--strategy multiworker` on JAX): the arguments of
    `keras.distribution.initialize`. None: Keras's environment variable, else JAX's own
    detection of its cluster.

    Attributes:
        coordinator: `host:port` of process 0 (or Keras's comma-separated job addresses).
        num_processes: how many processes the job has.
        process_id: this process's index, 0 to `num_processes - 1`.
    """

    coordinator: str | None = None
    num_processes: int | None = None
    process_id: int | None = None

    def given(self):
        """Whether any setting is given here or in Keras's environment variables."""
        return any(value is not None for value in dataclasses.astuple(self)) or any(
            os.environ.get(name) for name in PROCESS_VARIABLES)


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where a run's model is built and trained (`place`).

    Attributes:
        name: what config.json's `training.strategy` records: the name given, else the class
            name of the strategy or distribution.
        num_replicas_in_sync: the devices each batch is split over (named as a
            `tf.distribute.Strategy`'s: `global_batch_size` takes a `Placement` too).
        strategy: the `tf.distribute.Strategy` on TensorFlow; None on other backends.
        distribution: the `keras.distribution` distribution on JAX, or None (one device).
    """

    name: str
    num_replicas_in_sync: int
    strategy: object = None
    distribution: object = None

    def active(self):
        """A context in which `distribution` is Keras' current one; a null one without it."""
        if self.distribution is None:
            return contextlib.nullcontext()
        return self.distribution.scope()


def place(strategy=None, tpu=None, processes=None):
    """The `Placement` of `strategy` on the Keras backend in use.

    Args:
        strategy: one of `STRATEGIES`, None (`"default"`), or a `tf.distribute.Strategy`
            (TensorFlow only).
        tpu: the TPU of `strategy="tpu"` (`get_strategy`).
        processes: `Processes` of `"multiworker"` on JAX (TensorFlow reads `TF_CONFIG`).

    Raises:
        BackendError: a `tf.distribute`-only strategy (`"multiworker"`, `"tpu"`, a
            `tf.distribute.Strategy`) under another backend.
        ValueError: an unknown strategy name (`get_strategy`'s message).
    """
    if processes is not None and processes != Processes() and not (
            strategy == "multiworker" and backends.backend() == "jax"):
        raise ZooError("--coordinator, --num-processes and --process-id are for --strategy "
                       "multiworker on JAX (TensorFlow's workers read TF_CONFIG)")
    if backends.is_tensorflow():
        resolved = strategies.get_strategy(strategy or "default", tpu=tpu)
        name = strategy if isinstance(strategy, str) else type(resolved).__name__
        return Placement(name, resolved.num_replicas_in_sync, strategy=resolved)
    if strategy in (None, "default"):
        current = keras.distribution.distribution()
        if current is None:
            return Placement("default", 1)
        return Placement(type(current).__name__, _batch_devices(current), distribution=current)
    jax = backends.backend() == "jax"
    if strategy == "mirrored" and jax:
        devices = keras.distribution.list_devices()
        return Placement("mirrored", len(devices),
                         distribution=keras.distribution.DataParallel(devices=devices))
    if strategy == "multiworker" and jax:
        initialize_processes(processes or Processes())
        devices = keras.distribution.list_devices()  # every process's
        # Each process gives `fit` its share of every batch (`fit_data`), not Keras's
        # automatic split, which needs batches of one known size.
        distribution = keras.distribution.DataParallel(devices=devices, auto_shard_dataset=False)
        return Placement("multiworker", len(devices), distribution=distribution)
    if strategy in strategies.STRATEGIES or isinstance(strategy, tf.distribute.Strategy):
        what = strategy if isinstance(strategy, str) else type(strategy).__name__
        backends.require_tensorflow(
            f"the {what} strategy (tf.distribute)",
            "on JAX, mirrored trains over the local devices and multiworker over several "
            "processes (keras.distribution.DataParallel)" if jax else None,
        )
    raise ZooError(f"Unknown strategy {strategy!r}; `strategy` must be one of "
                   f"{', '.join(strategies.STRATEGIES)}.")


_initialized = []  # the `Processes` this process's JAX job was started with


def initialize_processes(processes):
    """`keras.distribution.initialize` with `processes` (once per process: JAX allows one
    start, before it computes anything); without settings, JAX's detection of its cluster.

    Raises:
        ZooError: no settings and no cluster JAX knows, or a second, different start.
    """
    if _initialized:
        if _initialized[0] != processes:
            raise ZooError(f"this process already joined a JAX job ({_initialized[0]}); "
                           "start a new process for another")
        return
    try:
        keras.distribution.initialize(processes.coordinator, processes.num_processes,
                                      processes.process_id)
    except (ValueError, RuntimeError) as error:
        if processes.given():
            raise
        raise ZooError(
            "--strategy multiworker on JAX needs the job's processes: --coordinator HOST:PORT "
            "--num-processes N --process-id I, or Keras's " + ", ".join(PROCESS_VARIABLES)
            + f" (JAX found no cluster: {str(error).splitlines()[0]})") from None
    _initialized.append(processes)


def _batch_devices(distribution):
    """The devices a batch is split over: the size of the mesh's batch axis."""
    mesh = distribution.device_mesh
    return int(mesh.shape[mesh.axis_names.index(distribution.batch_dim_name)])


def fit_data(dataset, placement, pad_id=None):
    """`dataset` as `fit` takes it under `placement`: with `tf.distribute`'s auto-shard policy
    (`shard_by_data`), and under a distribution over several devices, which splits a batch
    in equal parts only, each batch padded to a multiple of them (`even_batches`: `pad_id` is
    the labels' padding, for translation); in a JAX job of several processes, this process's
    share of each batch (`process_share`)."""
    dataset = sharding.shard_by_data(dataset)
    if placement.distribution is not None and placement.num_replicas_in_sync > 1:
        dataset = sharding.even_batches(dataset, placement.num_replicas_in_sync, pad_id)
    if backends.process_count() > 1:  # a JAX job: this process's part of each batch
        dataset = sharding.process_share(dataset, backends.process_count(),
                                         backends.process_index())
    return dataset


def scope(model):
    """`model.distribute_strategy.scope()` on TensorFlow, where variables made in it (the
    optimizer's, a schedule's) are laid out as the model's; a null context on other backends,
    where Keras' current distribution lays them out itself."""
    if backends.is_tensorflow():
        return model.distribute_strategy.scope()
    return contextlib.nullcontext()
