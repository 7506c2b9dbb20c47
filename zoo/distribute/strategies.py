"""Strategy resolution: a name (`STRATEGIES`) -> a `tf.distribute.Strategy`, and what
follows from the strategy (the XLA check, the mixed-precision policy, the global batch)."""

import json
import os
import socket
import urllib.parse

import tensorflow as tf

from keras_attention import backends
from keras_attention.checks import check_positive_int
from zoo.errors import ZooError

STRATEGIES = ("default", "mirrored", "multiworker", "tpu")


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
    raise ZooError(
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
        raise ZooError(f"TF_CONFIG is not valid JSON ({error}); received {raw!r}.") from None
    if not isinstance(config, dict) or "cluster" not in config or "task" not in config:
        raise ZooError(
            "TF_CONFIG must have a 'cluster' and a 'task' entry, e.g. "
            '{"cluster": {"worker": ["host1:port", "host2:port"]}, '
            f'"task": {{"type": "worker", "index": 0}}}}; received {raw!r}.'
        )
    cluster, task = config["cluster"], config["task"]
    if not isinstance(cluster, dict) or not isinstance(task, dict):
        raise ZooError(f"TF_CONFIG 'cluster' and 'task' must be objects; received {raw!r}.")
    task_type, index = task.get("type"), task.get("index")
    members = cluster.get(task_type)
    if (
        not isinstance(members, list)
        or isinstance(index, bool)
        or not isinstance(index, int)
        or not 0 <= index < len(members)
    ):
        raise ZooError(
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
        raise ZooError(f"No TPU found ({where}): {_one_line(error)}") from None
    except Exception as error:  # noqa: BLE001 - URLError, NotFoundError, ... all mean "no TPU"
        raise ZooError(
            f"No TPU found ({where}): {type(error).__name__}: {_one_line(error)}"
        ) from None


def _check_reachable(address, timeout, where):
    parsed = urllib.parse.urlparse(address)
    try:
        with socket.create_connection((parsed.hostname, parsed.port), timeout=timeout):
            pass
    except (OSError, ValueError, TypeError) as error:
        raise ZooError(
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
    GPU and TPU replicas are not concerned, nor other Keras backends (JAX compiles
    a step over several CPU devices).

    Args:
        strategy: a `tf.distribute.Strategy`; None for the current one
            (`tf.distribute.get_strategy()`, e.g. inside `strategy.scope()`).
        jit_compile: the model config's `jit_compile`.

    Raises:
        ValueError: `jit_compile` is true and the strategy has several
            replicas on CPU devices (a one-line message).
    """
    if not backends.is_tensorflow():
        return
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
    raise ZooError(
        f"XLA (--jit / jit_compile=True) cannot compile a train step distributed over "
        f"{strategy.num_replicas_in_sync} CPU replicas ({kind}): TensorFlow "
        "has no XLA all-reduce for CPU devices; train without --jit (or on GPUs / TPUs)."
    )


def default_policy(strategy):
    """The mixed-precision policy to train with: `"mixed_bfloat16"` on TPU, else None."""
    return "mixed_bfloat16" if isinstance(strategy, tf.distribute.TPUStrategy) else None


def global_batch_size(per_replica, strategy):
    """`per_replica × strategy.num_replicas_in_sync`: the batch size to give the dataset
    (`strategy`: a `tf.distribute.Strategy` or a `zoo.distribute.Placement`)."""
    check_positive_int("per_replica", per_replica)
    return per_replica * strategy.num_replicas_in_sync


