"""Learning-rate schedules (docs/math.md#the-inverse-square-root-schedule)."""

import keras
from keras import ops

from keras_attention.checks import check_positive_int


@keras.saving.register_keras_serializable(package="keras_attention")
class TransformerSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """`lrate = scale · d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5)`.

    Linear warm-up for `warmup_steps`, then decay with the inverse square root
    of the step ("Attention Is All You Need", eq. 3). `step` counts from 1: the
    optimizer's iteration `i` (0 for the first update) uses `step = i + 1`, so
    the first update does not have a zero learning rate.

    Args:
        d_model: the model width.
        warmup_steps: 4000 in the paper.
        scale: a constant factor (1.0 in the paper).
    """

    def __init__(self, d_model, warmup_steps=4000, scale=1.0):
        check_positive_int("d_model", d_model)
        check_positive_int("warmup_steps", warmup_steps)
        if not scale > 0:
            raise ValueError(f"`scale` must be positive; received scale={scale!r}.")
        self.d_model = d_model
        self.warmup_steps = warmup_steps
        self.scale = scale

    def __call__(self, step):
        step = ops.cast(step, "float32") + 1.0
        warmup = ops.cast(self.warmup_steps, "float32")
        rate = ops.minimum(ops.rsqrt(step), step * ops.power(warmup, -1.5))
        return self.scale * (self.d_model**-0.5) * rate

    def get_config(self):
        return {"d_model": self.d_model, "warmup_steps": self.warmup_steps, "scale": self.scale}
