"""A training budget (`max_steps`, `time_limit`) and the learning-rate schedule that ends with it.

With a budget, `train` replaces the family's schedule by
`keras_attention.BudgetSchedule` ("budget-linear"): a warm-up over 5% of the
steps the budget affords (at most the family's own warm-up), then a linear
decay to zero when the budget ends, from the peak of the family's own
schedule (docs/math.md#the-budgeted-schedule). Without one, each family
keeps its paper's schedule ("paper").

    name, reason = choose_schedule(None, training)        # "budget-linear", why
    plan = plan_budget(name, reason, optimizer, training, bound, rate, warmup_cap)
    plan.as_config()                                       # config.json "budget"

A time limit counts training time, not wall time: the time in `fit` (steps,
the first step's tracing in each process, validation, the epoch end's writes)
of the epochs a run kept, carried across restarts by the backup's
`train_seconds` (`zoo.runs.callbacks.TimeLimit`). A process's start-up and the
part of an epoch a kill loses are not counted
(docs/reliability.md#repeated-kills).

A time limit is turned into steps by `StepPredictor`: the rate measured
over the first steps (the compiling step left out) times the time left,
corrected every 30 seconds (5% of a short budget) while training runs. `BudgetCallback` applies
each correction to the schedule's variables, logs `predicted_steps` in
`history.csv` and hands what a resumed run needs to the backup.
"""

import dataclasses
import math

import keras

from keras_attention.backends import sync_training_state
from keras_attention.schedules import BudgetSchedule, TransformerSchedule
from zoo import distribute
from zoo.errors import ZooError
from zoo.runs.callbacks import build_optimizer

SCHEDULES = ("auto", "paper", "budget-linear", "budget-cosine")
WARMUP_FRACTION = 0.05
WARMUP_CAP = 1000  # for families whose own recipe has no warm-up


def choose_schedule(requested, training):
    """`(name, reason)`: the schedule a run trains with.

    `requested` None or "auto": "budget-linear" when `training` has a
    `time_limit` or `max_steps`, else "paper" (the family's own).
    """
    budget = _budget_words(training)
    if requested in (None, "auto"):
        if budget:
            return "budget-linear", (f"a budget ({budget}): warm-up, then linear decay to zero "
                                     "when it ends (Li, Yumer & Ramanan 2020)")
        return "paper", "no --time-limit or --max-steps: the family's own schedule"
    if requested not in SCHEDULES:
        raise ZooError(f"schedule must be one of {', '.join(SCHEDULES)}; received {requested!r}")
    if requested != "paper" and not budget:
        raise ZooError(f"schedule {requested!r} needs a budget: give --time-limit or --max-steps")
    return requested, "asked for" + (f" ({budget})" if budget else "")


def check_options(training):
    """`(name, reason)` of `choose_schedule`, after refusing options that need a budget."""
    name, reason = choose_schedule(training.get("schedule"), training)
    if training.get("warmup_ratio") and name == "paper":
        raise ZooError("warmup_ratio needs a budgeted schedule: give --time-limit or "
                       "--max-steps (and no --schedule paper)")
    if training.get("average_checkpoints") and name == "paper":
        raise ZooError("average_checkpoints needs a budgeted schedule: give --time-limit or "
                       "--max-steps (and no --schedule paper)")
    return name, reason


def _budget_words(training):
    words = []
    if training.get("time_limit"):
        words.append(f"time_limit {training['time_limit']:g} min")
    if training.get("max_steps"):
        words.append(f"max_steps {training['max_steps']}")
    return ", ".join(words)


def peak_learning_rate(learning_rate):
    """The highest rate of an optimizer's `learning_rate` (a schedule or a number), or None
    for a schedule this function does not know."""
    if isinstance(learning_rate, TransformerSchedule):
        return float(learning_rate.peak)
    if isinstance(learning_rate, keras.optimizers.schedules.CosineDecay):
        return float(learning_rate.warmup_target or learning_rate.initial_learning_rate)
    if isinstance(learning_rate, keras.optimizers.schedules.LearningRateSchedule):
        return None
    try:
        return float(keras.ops.convert_to_numpy(learning_rate))
    except (TypeError, ValueError):
        return None


def warmup_for(total, cap, ratio=WARMUP_FRACTION):
    """The warm-up of a budget of `total` steps: `ratio` of it (5%), at least 1, at most
    `cap` and below `total`."""
    return max(1, min(int(cap), round(ratio * total), int(total) - 1))


@dataclasses.dataclass
class BudgetPlan:
    """What a budgeted schedule starts with (config.json's "budget").

    Attributes:
        schedule: "budget-linear" or "budget-cosine".
        reason: why (the budget given).
        peak_learning_rate: the family's own highest rate.
        warmup_cap: the longest warm-up (the family's own, else `WARMUP_CAP`).
        warmup_steps, predicted_steps: the first warm-up and total.
        predicted_from: how `predicted_steps` was found.
        bound: the steps `max_steps` or `epochs` allow (None: no bound known).
        warmup_ratio: the share of the predicted steps spent warming up.
    """

    schedule: str
    reason: str
    peak_learning_rate: float
    warmup_cap: int
    warmup_steps: int
    predicted_steps: int
    predicted_from: str
    bound: int | None = None
    warmup_ratio: float = WARMUP_FRACTION

    @property
    def shape(self):
        return self.schedule.removeprefix("budget-")

    def as_config(self):
        return dataclasses.asdict(self)


def plan_budget(schedule, reason, learning_rate, training, bound, rate, warmup_cap):
    """The `BudgetPlan` of a new run, or None when `learning_rate` has no known peak.

    Args:
        schedule, reason: from `choose_schedule` ("budget-linear" or "budget-cosine").
        learning_rate: the family's compiled `optimizer.learning_rate` schedule or value.
        training: the run's options (`time_limit`, `max_steps`).
        bound: the most steps `max_steps` and `epochs` allow, or None.
        rate: steps per second measured before training, or None.
        warmup_cap: the family's own warm-up, or None.
    """
    peak = peak_learning_rate(learning_rate)
    if peak is None:
        return None
    cap = int(warmup_cap) if warmup_cap else WARMUP_CAP
    ratio = training.get("warmup_ratio") or WARMUP_FRACTION
    if training.get("time_limit"):
        if rate:
            total = rate * 60.0 * training["time_limit"]
            how = (f"{rate:.3g} steps/s measured before training × "
                   f"{training['time_limit']:g} min; corrected while training")
        else:  # until the first measurement in training: a long provisional budget
            total, how = 100 * cap, "provisional until the first steps are timed"
        if bound:
            total = min(total, bound)
    else:
        total, how = bound, "max_steps" if bound == training.get("max_steps") else "epochs"
    total = max(2, int(total))
    return BudgetPlan(schedule, reason, peak, cap, warmup_for(total, cap, ratio), total, how,
                      bound, ratio)


def install(model, plan, warmup_steps=None, total_steps=None):
    """Replace `model.optimizer`'s rate by the plan's `BudgetSchedule` (made under the model's
    strategy, attached to the built optimizer, its budget in the optimizer's state); returns
    the schedule.

    `warmup_steps`, `total_steps`: corrected values a resumed run continues from.
    """
    build_optimizer(model)  # the schedule's variables come after the optimizer's own
    with distribute.scope(model):
        schedule = BudgetSchedule(plan.peak_learning_rate, warmup_steps or plan.warmup_steps,
                                  total_steps or plan.predicted_steps, shape=plan.shape)
    optimizer = model.optimizer
    schedule.attach(getattr(optimizer, "inner_optimizer", None) or optimizer)  # a LossScale's
    # A training step traced before (`interval.measure_step_rate` times the model's own)
    # holds the old rate as constants of its graph, and `fit` would reuse it: a new
    # function traces the step with this schedule.
    model.make_train_function(force=True)
    return schedule


class StepPredictor:
    """The steps a time budget affords: steps so far + measured rate × time left.

    The rate is measured from the end of this call's `settle_steps`-th step
    (the first one compiles) to now, pauses for validation and checkpoints
    included. The first prediction comes once `first_after` steps are timed,
    later ones every `every_seconds` (default: 5% of the budget, at most 30 s),
    and after every step in the budget's last `every_seconds`: there the total
    closes in on the steps taken, so the schedule reaches zero where the time
    ends (the total is the steps taken once the budget is spent).

    Args:
        budget_seconds: the time limit.
        elapsed: a function returning the seconds of the budget spent so far (earlier
            calls of a resumed run included).
        bound: the most steps the run may take anyway (`max_steps`, `epochs`), or None.
    """

    def __init__(self, budget_seconds, elapsed, *, bound=None, settle_steps=1, first_after=10,
                 every_seconds=None):
        self.budget_seconds = budget_seconds
        self.elapsed = elapsed
        self.bound = bound
        self.settle_steps = settle_steps
        self.first_after = first_after
        self.every_seconds = (min(30.0, 0.05 * budget_seconds) if every_seconds is None
                              else every_seconds)
        self.begin(0)

    def begin(self, steps):
        """A call of `fit` starts, `steps` taken before it."""
        self._begin_steps = steps
        self._reference = None  # (elapsed, steps) once the settling steps are done
        self._last = None

    def after_step(self, steps):
        """`steps` taken in total: the corrected total when one is due, else None."""
        now = self.elapsed()
        if now >= self.budget_seconds:  # spent, however few steps were timed: ends here
            self._last = now
            return steps
        if self._reference is None:
            if steps - self._begin_steps >= self.settle_steps:
                self._reference = (now, steps)
            return None
        timed = steps - self._reference[1]
        if self._last is None and timed < self.first_after:
            return None
        final = self.budget_seconds - now <= self.every_seconds  # the last stretch: every step
        if self._last is not None and now - self._last < self.every_seconds and not final:
            return None
        self._last = now
        rate = timed / max(now - self._reference[0], 1e-9)
        return self.predict(steps, rate, now)

    def predict(self, steps, rate, now=None):
        """`steps + rate × (budget − spent)`, within `bound`, at least `steps + 1` while time
        is left (`steps` once the budget is spent)."""
        now = self.elapsed() if now is None else now
        left = self.budget_seconds - now
        total = steps + rate * max(0.0, left)
        if self.bound:
            total = min(total, self.bound)
        return max(steps + (1 if left > 0 else 0), math.ceil(total))


class BudgetCallback(keras.callbacks.Callback):
    """Applies a time budget's corrections to a `BudgetSchedule`; logs `predicted_steps`.

    Place it first among a run's callbacks (its epoch-end logs reach `history.csv`).
    The warm-up follows the corrected total until the warm-up is over, then stays.

    Args:
        schedule: the installed `BudgetSchedule`.
        plan: the run's `BudgetPlan`.
        steps: the steps taken before this call (a resumed run's).
        predictor: a `StepPredictor` for a time limit, else None (a fixed budget).
    """

    def __init__(self, schedule, plan, steps, predictor=None):
        super().__init__()
        self.schedule, self.plan, self.predictor = schedule, plan, predictor
        self.steps = steps
        self.first_prediction = None
        self._read_budget()

    def _read_budget(self):
        # The budget as Python ints, read from the schedule where its variables are current
        # (outside fit, or at its start): mid-epoch on JAX they are not (sync_training_state).
        self.warmup_steps = int(keras.ops.convert_to_numpy(self.schedule.warmup_steps))
        self.total_steps = int(keras.ops.convert_to_numpy(self.schedule.total_steps))

    def on_train_begin(self, logs=None):
        self._read_budget()
        if self.predictor is not None:
            self.predictor.begin(self.steps)

    def on_train_batch_end(self, batch, logs=None):
        self.steps += 1
        total = self.predictor.after_step(self.steps) if self.predictor is not None else None
        if total is None:
            return
        warmup = self.warmup_steps
        if self.steps < warmup:  # still warming up: its share of the corrected total
            warmup = max(self.steps + 1, warmup_for(total, self.plan.warmup_cap,
                                                    self.plan.warmup_ratio))
        corrected = max(total, warmup + 1)
        if (warmup, corrected) != (self.warmup_steps, self.total_steps):
            # On JAX the step's state goes back to the variables first, and is read from
            # them again at the next step: the compiled step follows the correction.
            sync_training_state(self.model)
            self.schedule.set_budget(warmup, corrected)
            self.warmup_steps, self.total_steps = warmup, corrected
        if self.first_prediction is None:
            self.first_prediction = self.total_steps
        if total <= self.steps:  # the time is spent: the schedule ends at zero here
            self.model.stop_training = True

    def on_epoch_end(self, epoch, logs=None):
        self._keep_budget()
        if logs is not None:
            logs["predicted_steps"] = self.total_steps

    def on_train_end(self, logs=None):
        self._keep_budget()

    def _keep_budget(self):
        """Assign the corrected budget again where `fit` lost it: on JAX (Keras 3.15), an epoch
        of unknown length ends with a step that finds no data, and `fit` then writes back
        the state of the step before, from before the last correction."""
        sync_training_state(self.model)
        held = (int(keras.ops.convert_to_numpy(self.schedule.warmup_steps)),
                int(keras.ops.convert_to_numpy(self.schedule.total_steps)))
        if held != (self.warmup_steps, self.total_steps):
            self.schedule.set_budget(self.warmup_steps, self.total_steps)

    def state(self):
        """What the backup keeps for a resumed run: the corrected warm-up and total."""
        return {"schedule_warmup_steps": self.warmup_steps,
                "schedule_total_steps": self.total_steps}

    def summary(self):
        """summary.json's "budget": the first and the last predicted totals."""
        return {"schedule": self.plan.schedule, "warmup_steps": self.warmup_steps,
                "predicted_steps_first": self.first_prediction or self.plan.predicted_steps,
                "predicted_steps_final": self.total_steps}
