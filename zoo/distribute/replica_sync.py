"""What Keras 3.15 gets wrong under a strategy, fixed on a compiled model: `prepare_model`.

The gradient is clipped after the replicas' sum (`sync_gradient_clipping`), the
per-step `loss` logs are those of the global batch (`sync_loss_tracker`), the
first build batch is one replica's, and `fit`'s scalar logs reduce over the
workers of a multi-worker job.
"""

import tensorflow as tf
from keras.src.backend.tensorflow import trainer


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
    from the same run on one device whenever clipping is active (the RNNsearch,
    ConvS2S and ViT recipes clip the global norm). Patched here on the instance:
    `_clip_gradients` first sums the gradients of every variable over the
    replicas (the all-reduce Keras would do anyway) and clips the sums, so
    `global_clipnorm`'s norm is that of the whole summed gradient
    (docs/math.md#gradient-clipping); the later all-reduce is then skipped.
    Nothing changes on a single replica, without clipping, or with gradient
    accumulation (left as Keras does it). `zoo.get` applies it (through
    `prepare_model`) to every model it compiles.

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


