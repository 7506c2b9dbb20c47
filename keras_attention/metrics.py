"""Metrics for sequence outputs with padding."""

import keras
from keras import ops

from keras_attention import backends
from keras_attention.losses import _squeeze_labels


@keras.saving.register_keras_serializable(package="keras_attention")
class MaskedAccuracy(keras.metrics.Metric):
    """Token accuracy over the positions whose label is not `pad_id` (every
    position when `pad_id` is None: the sparse categorical accuracy of a
    classifier, labels `(B,)` and scores `(B, V)`).

    Accumulates correct and counted tokens across batches (and replicas), so the
    result is the accuracy over all real tokens seen, not a mean of batch means
    (nor, under a `tf.distribute` strategy, a mean of per-replica accuracies).

    Inputs:
        y_true: int labels `(B, T)` (or any shape `S`; `(B, 1)` labels for
            `(B, V)` scores are squeezed).
        y_pred: scores `(B, T, V)` (`S + (V,)`; logits or probabilities).
    """

    def __init__(self, pad_id=0, name="masked_accuracy", dtype=None):
        super().__init__(name=name, dtype=dtype)
        self.pad_id = pad_id
        self.correct = self.add_variable(shape=(), initializer="zeros", name="correct")
        self.count = self.add_variable(shape=(), initializer="zeros", name="count")

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true = _squeeze_labels(ops.cast(y_true, "int32"), y_pred)
        predicted = ops.cast(ops.argmax(y_pred, axis=-1), "int32")
        if self.pad_id is None:
            mask = ops.ones(ops.shape(y_true), "float32")
        else:
            mask = ops.cast(ops.not_equal(y_true, self.pad_id), "float32")
        if sample_weight is not None:
            weight = ops.cast(sample_weight, "float32")
            while len(weight.shape) < len(mask.shape):
                weight = ops.expand_dims(weight, -1)
            mask = mask * weight
        hits = ops.cast(ops.equal(predicted, y_true), "float32") * mask
        correct, count = ops.sum(hits), ops.sum(mask)
        # Under a tf.distribute strategy (`model.fit` computes its logs inside
        # `strategy.run`, on each replica, and averages them over the replicas),
        # a per-replica ratio averaged over replicas is a mean of ratios, wrong
        # when the replicas hold different numbers of tokens. Add the global
        # batch's counts divided by the number of replicas R instead: every
        # replica then holds the same global ratio, and the variables' sum over
        # the replicas (how they read outside `strategy.run`) holds the global
        # counts.
        context = backends.replica_context()
        if context is not None and context.num_replicas_in_sync > 1:
            correct, count = backends.all_reduce_sum(context, [correct, count])
            replicas = float(context.num_replicas_in_sync)
            correct, count = correct / replicas, count / replicas
        self.correct.assign_add(correct)
        self.count.assign_add(count)

    def result(self):
        return ops.divide_no_nan(self.correct, self.count)

    def reset_state(self):
        self.correct.assign(0.0)
        self.count.assign(0.0)

    def get_config(self):
        config = super().get_config()
        config.update({"pad_id": self.pad_id})
        return config
