"""Learning-rate schedules (docs/math.md#the-inverse-square-root-schedule,
docs/math.md#the-budgeted-schedule)."""

import contextlib
import math
import warnings

import keras
from keras import ops

from keras_attention import backends
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

    @property
    def peak(self):
        """The highest rate, reached at step `warmup_steps`: `scale · (d_model · warmup_steps)^-0.5`."""
        return self.scale * (self.d_model * self.warmup_steps) ** -0.5


SHAPES = ("linear", "cosine")


@keras.saving.register_keras_serializable(package="keras_attention")
class BudgetSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up to `peak`, then decay to zero at step `total_steps` (a fixed budget).

    With `i` the optimizer's iteration (0 for the first update), `W` the
    warm-up and `T` the total:

        i < W:       peak · (i + 1) / W
        W <= i:      peak · max(0, (T - i) / (T - W))                 (linear)
                     peak · (1 + cos(π · min(1, (i - W) / (T - W)))) / 2   (cosine)

    so the last update of the budget (`i = T - 1`) uses `peak / (T - W)` and
    any later one a zero rate. Li, Yumer & Ramanan 2020 ("Budgeted Training")
    found linear decay to zero the best schedule under a fixed budget
    (docs/math.md#the-budgeted-schedule).

    `total_steps` and `warmup_steps` are non-trainable variables: a training
    loop that predicts its budget as it goes (a time limit) corrects them with
    `set_budget` while the optimizer keeps using the same schedule. Give the
    schedule to an optimizer with `attach`, which also makes the two variables
    part of the optimizer's state: a compiled training step reads a correction
    only from its state (on JAX, `jax.jit` takes no other).

    Args:
        peak: the highest rate.
        warmup_steps: W >= 1.
        total_steps: T > W.
        shape: `"linear"` or `"cosine"`.
    """

    def __init__(self, peak, warmup_steps, total_steps, shape="linear"):
        if not peak > 0:
            raise ValueError(f"`peak` must be positive; received peak={peak!r}.")
        if shape not in SHAPES:
            raise ValueError(f"`shape` must be one of {SHAPES}; received shape={shape!r}.")
        _check_budget(warmup_steps, total_steps)
        self.peak = float(peak)
        self.shape = shape
        self.warmup_steps = keras.Variable(float(warmup_steps), dtype="float32",
                                           trainable=False, name="budget_warmup_steps")
        self.total_steps = keras.Variable(float(total_steps), dtype="float32",
                                          trainable=False, name="budget_total_steps")

    def attach(self, optimizer):
        """Make `optimizer` follow this schedule, its budget among `optimizer.variables`.

        A compiled training step gets the optimizer's variables as its state. On
        JAX, `jax.jit` reads anything else once, as a constant, when it traces the
        step, so a budget held only by this schedule would keep its first values
        there whatever `set_budget` assigns. Inside `fit` on JAX, a callback calls
        `model.jax_state_sync()` before `set_budget` (the state is then read anew at
        the next step), as for any variable it changes mid-epoch.

        Attach after `optimizer.build`: the two variables then come last among the
        optimizer's, in the same order in every process, so the optimizer state a
        run saves (`model.save_weights`) loads into the next one. Save a `.keras`
        file inside `detached(optimizer)`: `keras.saving.load_model` rebuilds the
        optimizer from its config, the schedule's budget included, without the two
        variables, and loads its state only where the counts agree.

        Args:
            optimizer: a Keras optimizer (the inner one of a `LossScaleOptimizer`).
        """
        optimizer.learning_rate = self
        tracked = {id(variable) for variable in optimizer.variables}
        for variable in (self.warmup_steps, self.total_steps):
            if id(variable) not in tracked:
                optimizer._track_variable(variable)  # Keras's tracker of optimizer variables

    def set_budget(self, warmup_steps, total_steps):
        """Assign a corrected warm-up and total (ints, `1 <= warmup_steps < total_steps`)."""
        _check_budget(warmup_steps, total_steps)
        self.warmup_steps.assign(float(warmup_steps))
        self.total_steps.assign(float(total_steps))

    def __call__(self, step):
        step = ops.cast(step, "float32")
        warmup = ops.convert_to_tensor(self.warmup_steps)
        total = ops.convert_to_tensor(self.total_steps)
        if backends.is_traced(step) and not backends.is_traced(total):
            warnings.warn("BudgetSchedule: this compiled step holds the budget as a constant, "
                          "and set_budget will not reach it; give the schedule to the "
                          "optimizer with schedule.attach(optimizer).", stacklevel=2)
        rising = (step + 1.0) / warmup
        progress = ops.clip((step - warmup) / ops.maximum(total - warmup, 1.0), 0.0, 1.0)
        if self.shape == "linear":
            falling = 1.0 - progress
        else:
            falling = 0.5 * (1.0 + ops.cos(math.pi * progress))
        return self.peak * ops.where(step < warmup, rising, falling)

    def get_config(self):
        return {"peak": self.peak, "warmup_steps": int(ops.convert_to_numpy(self.warmup_steps)),
                "total_steps": int(ops.convert_to_numpy(self.total_steps)), "shape": self.shape}


@contextlib.contextmanager
def detached(optimizer):
    """`optimizer` (or a `LossScaleOptimizer`'s inner one) without an attached
    `BudgetSchedule`'s two variables while the block runs, then with them again, last as
    before: for `model.save`, whose `.keras` file then loads with its optimizer state
    (`BudgetSchedule.attach`). Nothing changes for another schedule or none."""
    optimizer = getattr(optimizer, "inner_optimizer", None) or optimizer
    schedule = getattr(optimizer, "_learning_rate", None)
    tracked = {id(variable) for variable in getattr(optimizer, "variables", [])}
    budget = [variable for variable in (getattr(schedule, "warmup_steps", None),
                                        getattr(schedule, "total_steps", None))
              if isinstance(schedule, BudgetSchedule) and id(variable) in tracked]
    for variable in budget:
        optimizer._untrack_variable(variable)
    try:
        yield optimizer
    finally:
        for variable in budget:
            optimizer._track_variable(variable)


def _check_budget(warmup_steps, total_steps):
    check_positive_int("warmup_steps", warmup_steps)
    check_positive_int("total_steps", total_steps)
    if total_steps <= warmup_steps:
        raise ValueError(f"`total_steps` must exceed `warmup_steps`; received "
                         f"warmup_steps={warmup_steps}, total_steps={total_steps}.")
