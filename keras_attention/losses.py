"""Losses for sequence outputs with padding (docs/math.md#label-smoothing)."""

import keras
from keras import ops

from keras_attention import backends
from keras_attention.checks import check_rate


@keras.saving.register_keras_serializable(package="keras_attention")
class MaskedSparseCategoricalCrossentropy(keras.losses.Loss):
    """Cross-entropy over tokens, ignoring padding, with optional label smoothing.

    Per token with label `y` and predicted log-probabilities `log p`:
    `-(1 - ε) log p_y - (ε / V) Σ_k log p_k` (the smoothed target puts `1 - ε + ε/V`
    on the label and `ε/V` on every other class, as `keras.losses.CategoricalCrossentropy`
    does). The batch loss is the mean over the tokens whose label is not `pad_id`
    (a token-level mean, not a mean of per-sentence means). With `pad_id=None`
    nothing is ignored: the sparse categorical cross-entropy of a classifier
    (labels `(B,)`, scores `(B, V)`), the mean over the examples.

    Under a `tf.distribute` strategy (inside `strategy.run`, as in `model.fit`),
    the gradient of each replica's loss is that of its token-loss sum divided
    by the token count of the whole global batch (an all-reduce of the counts),
    so that the gradients Keras sums over the replicas are those of the
    single-device loss, whatever the number of tokens (or examples: the last
    batch of an epoch may not split evenly, or leave a replica empty) on each
    replica; Keras' own losses divide each replica's mean by the number of
    replicas R instead, only right when the replicas' counts are equal. Its
    value is the global batch's loss over R on every replica (what Keras'
    losses give on an even split), so the replicas' values sum to the global
    loss and the `loss` / `val_loss` Keras reports is the single-device one.

    Args:
        pad_id: the label id to ignore, or None to ignore none.
        label_smoothing: ε in [0, 1) (0.1 in the paper).
        from_logits: `y_pred` are logits (True) or probabilities.
        reduction: `"sum_over_batch_size"` (the masked mean), `"sum"` or `None`
            (per-token losses, zero at padding).

    Inputs:
        y_true: int labels `(B, T)` (or any shape `S`; a trailing axis of size 1
            that `y_pred` lacks, as in `(B, 1)` labels for `(B, V)` scores, is
            dropped, as Keras' sparse losses do).
        y_pred: `(B, T, V)` (`S + (V,)`).
    """

    def __init__(
        self,
        pad_id=0,
        label_smoothing=0.0,
        from_logits=True,
        reduction="sum_over_batch_size",
        name="masked_sparse_categorical_crossentropy",
        dtype=None,
    ):
        super().__init__(name=name, reduction=reduction, dtype=dtype)
        check_rate("label_smoothing", label_smoothing)
        self.pad_id = pad_id
        self.label_smoothing = label_smoothing
        self.from_logits = from_logits

    def call(self, y_true, y_pred):
        """Per-token losses `(B, T)`, 0 at padding."""
        y_true = _squeeze_labels(ops.cast(y_true, "int32"), y_pred)
        y_pred = ops.cast(y_pred, "float32")
        if len(y_pred.shape) != len(y_true.shape) + 1:
            raise ValueError(
                "y_pred must have one more axis (the classes) than y_true; received "
                f"y_true.shape={tuple(y_true.shape)}, y_pred.shape={tuple(y_pred.shape)}."
            )
        if self.from_logits:
            log_probs = ops.log_softmax(y_pred, axis=-1)
        else:
            log_probs = ops.log(ops.clip(y_pred, 1e-7, 1.0))
        nll = -ops.take_along_axis(log_probs, ops.expand_dims(y_true, -1), axis=-1)[..., 0]
        if self.label_smoothing:
            smooth = -ops.mean(log_probs, axis=-1)
            losses = (1.0 - self.label_smoothing) * nll + self.label_smoothing * smooth
        else:
            losses = nll
        return losses * self._mask(y_true, losses.dtype)

    def _mask(self, y_true, dtype):
        """1 where the label counts, 0 at padding (all ones when `pad_id` is None)."""
        if self.pad_id is None:
            return ops.ones(ops.shape(y_true), dtype)
        return ops.cast(ops.not_equal(ops.cast(y_true, "int32"), self.pad_id), dtype)

    def __call__(self, y_true, y_pred, sample_weight=None):
        with keras.name_scope(self.name):
            y_true = _squeeze_labels(y_true, y_pred)
            losses = self.call(y_true, y_pred)  # (B, T)
            mask = self._mask(y_true, losses.dtype)
            if sample_weight is not None:
                weight = ops.cast(sample_weight, losses.dtype)
                while len(weight.shape) < len(losses.shape):
                    weight = ops.expand_dims(weight, -1)
                losses = losses * weight
                mask = mask * weight
            if self.reduction in (None, "none"):
                return losses
            total = ops.sum(losses)
            if self.reduction == "sum":
                return total
            count = ops.sum(mask)
            context = backends.replica_context()
            if context is None or context.num_replicas_in_sync == 1:
                return ops.divide_no_nan(total, count)
            # Under a tf.distribute strategy each replica holds part of the global
            # batch and Keras sums the replicas' gradients: the gradient of each
            # replica's loss is that of its token sum over the *global* token
            # count, so that the sum over replicas is exactly the gradient of the
            # token mean of the global batch (dividing the per-replica mean by the
            # number of replicas, as Keras' own losses do, is only right when every
            # replica has the same number of tokens). The value is the global
            # mean over the number of replicas R, the same on every replica (the
            # replicas' values still sum to the global mean): Keras reports the
            # `loss` as if each replica's value were its own mean over R (it
            # weights R × value by the replica's batch size), which this makes
            # exact for any split of the batch, an empty replica included.
            replicas = float(context.num_replicas_in_sync)
            global_total, global_count = backends.all_reduce_sum(context, [total, count])
            share = ops.divide_no_nan(total, global_count)
            mean = ops.divide_no_nan(global_total, global_count) / replicas
            return share + ops.stop_gradient(mean - share)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "pad_id": self.pad_id,
                "label_smoothing": self.label_smoothing,
                "from_logits": self.from_logits,
            }
        )
        return config


def _squeeze_labels(y_true, y_pred):
    """`y_true` without a trailing axis of size 1 when `y_pred` has as many axes
    (`(B, 1)` labels for `(B, V)` scores), as Keras' sparse losses allow."""
    if len(y_true.shape) == len(y_pred.shape) and y_true.shape[-1] == 1:
        return ops.squeeze(y_true, axis=-1)
    return y_true


@keras.saving.register_keras_serializable(package="keras_attention")
class PointerGeneratorCrossentropy(MaskedSparseCategoricalCrossentropy):
    """The negative log-likelihood of a pointer-generator's mixture, ignoring padding.

    `y_pred` are the log-probabilities `log P` over the extended vocabulary
    (`ka.PointerGenerator`'s output, `(B, T, V + S)`), used as they are: the
    loss of a label `y` is `-log P(y)`, where `y` may be a source token's
    temporary id `V + k` (See et al. 2017, eq. 6). With label smoothing ε the
    target puts `1 - ε` on the label and spreads ε evenly over the fixed
    vocabulary only, `-(1 - ε) log P(y) - (ε / V) Σ_{w < V} log P(w)`: the
    extended ids are the source's own, most of them empty (`log P` = -1e9), so
    smoothing onto them would be meaningless. The reduction and the
    distributed scaling are `MaskedSparseCategoricalCrossentropy`'s.

    Args:
        vocabulary_size: V, the size of the fixed vocabulary.
        pad_id: the label id to ignore.
        label_smoothing: ε in [0, 1).
        reduction: as in `MaskedSparseCategoricalCrossentropy`.

    Inputs:
        y_true: int labels `(B, T)`, in `[0, V + S)`.
        y_pred: log-probabilities `(B, T, V + S)`.
    """

    def __init__(self, vocabulary_size, pad_id=0, label_smoothing=0.0,
                 reduction="sum_over_batch_size", name="pointer_generator_crossentropy",
                 dtype=None):
        super().__init__(pad_id=pad_id, label_smoothing=label_smoothing, from_logits=True,
                         reduction=reduction, name=name, dtype=dtype)
        self.vocabulary_size = vocabulary_size

    def call(self, y_true, y_pred):
        """Per-token losses `(B, T)`, 0 at padding."""
        y_true = _squeeze_labels(ops.cast(y_true, "int32"), y_pred)
        log_probs = ops.cast(y_pred, "float32")
        nll = -ops.take_along_axis(log_probs, ops.expand_dims(y_true, -1), axis=-1)[..., 0]
        losses = nll
        if self.label_smoothing:  # a mask, not a slice: the slice's gradient is slow on CPU
            in_vocabulary = ops.arange(ops.shape(log_probs)[-1]) < self.vocabulary_size
            smooth = -ops.sum(ops.where(in_vocabulary, log_probs, 0.0), axis=-1)
            smooth = smooth / self.vocabulary_size
            losses = (1.0 - self.label_smoothing) * nll + self.label_smoothing * smooth
        return losses * self._mask(y_true, losses.dtype)

    def get_config(self):
        config = super().get_config()
        config.pop("from_logits")
        config["vocabulary_size"] = self.vocabulary_size
        return config
