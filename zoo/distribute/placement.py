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
  `"multiworker"` and `"tpu"` (and on PyTorch `"mirrored"` too) are TensorFlow's:
  `BackendError`, one line naming the backend they need.
"""

import contextlib
import dataclasses

import keras
import tensorflow as tf

from keras_attention import backends
from zoo.distribute import sharding, strategies
from zoo.errors import ZooError


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


def place(strategy=None, tpu=None):
    """The `Placement` of `strategy` on the Keras backend in use.

    Args:
        strategy: one of `STRATEGIES`, None (`"default"`), or a `tf.distribute.Strategy`
            (TensorFlow only).
        tpu: the TPU of `strategy="tpu"` (`get_strategy`).

    Raises:
        BackendError: a `tf.distribute`-only strategy (`"multiworker"`, `"tpu"`, a
            `tf.distribute.Strategy`) under another backend.
        ValueError: an unknown strategy name (`get_strategy`'s message).
    """
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
    if strategy in strategies.STRATEGIES or isinstance(strategy, tf.distribute.Strategy):
        what = strategy if isinstance(strategy, str) else type(strategy).__name__
        backends.require_tensorflow(
            f"the {what} strategy (tf.distribute)",
            "on JAX, mirrored trains over the local devices (keras.distribution.DataParallel)"
            if jax else None,
        )
    raise ZooError(f"Unknown strategy {strategy!r}; `strategy` must be one of "
                   f"{', '.join(strategies.STRATEGIES)}.")


def _batch_devices(distribution):
    """The devices a batch is split over: the size of the mesh's batch axis."""
    mesh = distribution.device_mesh
    return int(mesh.shape[mesh.axis_names.index(distribution.batch_dim_name)])


def fit_data(dataset, placement, pad_id=None):
    """`dataset` as `fit` takes it under `placement`: with `tf.distribute`'s auto-shard policy
    (`shard_by_data`), and under a distribution over several devices, which splits a batch
    in equal parts only, each batch padded to a multiple of them (`even_batches`: `pad_id` is
    the labels' padding, for translation)."""
    dataset = sharding.shard_by_data(dataset)
    if placement.distribution is not None and placement.num_replicas_in_sync > 1:
        dataset = sharding.even_batches(dataset, placement.num_replicas_in_sync, pad_id)
    return dataset


def scope(model):
    """`model.distribute_strategy.scope()` on TensorFlow, where variables made in it (the
    optimizer's, a schedule's) are laid out as the model's; a null context on other backends,
    where Keras' current distribution lays them out itself."""
    if backends.is_tensorflow():
        return model.distribute_strategy.scope()
    return contextlib.nullcontext()
