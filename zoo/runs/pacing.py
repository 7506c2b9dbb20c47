"""A run's pace: how long its epochs are, which schedule it follows, what it averages.

`prepare` decides, before `fit`, for a new run (and reads back from
`config.json` and the backup for a resumed one):

* the step rate, timed on a few steps that are then undone
  (`zoo.runs.interval.measure_step_rate`), when a pass over the data may be
  long or a time limit needs it;
* the epoch: one pass, or `steps_per_epoch` steps when a pass would last
  more than 5 minutes (`zoo.runs.interval`), config.json's "interval";
* the schedule: the family's own, or with a budget `BudgetSchedule` ending
  with it (`zoo.runs.budget`), config.json's "schedule";
* with a budget, the weight snapshots averaged into `checkpoints/average.keras`
  (`zoo.runs.averaging`).

`Pace.attach` adds the matching callbacks to the run's; `Pace.summary` is
summary.json's "budget".
"""

import dataclasses
import math
import time

import tensorflow as tf

from zoo.datasets import preparation
from zoo.runs import averaging, budget, interval
from zoo.runs.callbacks import backup_metadata


@dataclasses.dataclass
class Pace:
    """What `fit` needs from `prepare` (see the module docstring).

    Attributes:
        epochs: `fit`'s epochs.
        steps_per_epoch: `fit`'s, or None for one pass per epoch.
        steps_done, spent_seconds: a resumed run's steps and training time so far.
        config: config.json's "interval" and "schedule".
        lines: what the run says before training.
        plan: the `BudgetPlan`, or None (the family's schedule).
        schedule: the installed `BudgetSchedule`, or None.
        average: snapshots to average (0: none).
    """

    epochs: int
    steps_per_epoch: int | None
    steps_done: int
    spent_seconds: float
    config: dict
    lines: list
    plan: budget.BudgetPlan | None = None
    schedule: object = None
    average: int = 0
    callback: budget.BudgetCallback | None = None
    snapshots: averaging.TailSnapshots | None = None

    def train_data(self, dataset):
        """The training data `fit` takes: repeated (resumed where it was) for fixed epochs."""
        return interval.repeated(dataset, self.steps_done) if self.steps_per_epoch else dataset

    def attach(self, run_callbacks, checkpoints_dir):
        """The budget's callbacks, added to the run's `RunCallbacks`."""
        if self.schedule is None:
            return
        predictor = None
        if run_callbacks.stop_time is not None:
            predictor = budget.StepPredictor(run_callbacks.stop_time.seconds,
                                             run_callbacks.stop_time.step_elapsed,
                                             bound=self.plan.bound)
        self.callback = budget.BudgetCallback(self.schedule, self.plan, self.steps_done, predictor)
        run_callbacks.add(self.callback, first=True)
        if self.average:
            self.snapshots = averaging.TailSnapshots(
                checkpoints_dir, lambda: self.callback.total_steps, self.steps_done, self.average)
            run_callbacks.add(self.snapshots)

    def summary(self):
        """summary.json's "budget" (None without a budgeted schedule)."""
        if self.callback is None:
            return None
        result = self.callback.summary()
        if self.snapshots is not None:
            result["averaged_snapshots"] = [path.name for path in self.snapshots.used]
        return result


@dataclasses.dataclass
class Counts:
    """What `prepare` may ask of the data, computed only when asked.

    Attributes:
        pass_steps: a function returning the steps of one pass (or None: unknown).
        timing_batches: a function returning a `tf.data.Dataset` of a few `(x, y)`
            training batches, with the element spec of the data `fit` gets.
    """

    pass_steps: object
    timing_batches: object


def prepare(model, training, model_config, saved, run_dir, strategy, counts):
    """The run's `Pace` (a new run when `saved` is None, else the saved config.json);
    `strategy`: a `tf.distribute.Strategy` or a `zoo.distribute.Placement`."""
    metadata = backup_metadata(run_dir) if saved else {}
    steps_done = int(metadata.get("steps", 0))
    spent = float(metadata.get("train_seconds", 0.0))
    if saved:
        config = {key: saved[key] for key in ("interval", "schedule") if key in saved}
        lines, spent_timing = [], 0.0
    else:
        config, lines, spent_timing = _new_run(model, training, model_config, strategy, counts)
    pass_steps = config.get("interval", {}).get("pass_steps")
    steps_per_epoch = config.get("interval", {}).get("steps_per_epoch")
    pace = Pace(interval.keras_epochs(training["epochs"], pass_steps, steps_per_epoch,
                                      training.get("max_steps")),
                steps_per_epoch, steps_done, spent + spent_timing, config, lines)
    schedule = config.get("schedule") or {"name": "paper"}
    if schedule["name"] != "paper":
        fields = {key: value for key, value in schedule.items() if key not in ("name", "reason")}
        pace.plan = budget.BudgetPlan(schedule["name"], schedule["reason"], **fields)
        pace.schedule = budget.install(model, pace.plan, metadata.get("schedule_warmup_steps"),
                                       metadata.get("schedule_total_steps"))
        average = training.get("average_checkpoints")
        pace.average = averaging.COUNT if average is None else average
    return pace


def _new_run(model, training, model_config, strategy, counts):
    """`(config entries, lines, seconds spent timing)` of a new run."""
    name, reason = budget.check_options(training)
    pass_steps = counts.pass_steps()
    given = training.get("steps_per_epoch")
    long_pass = pass_steps is None or pass_steps > interval.SHORT_PASS_STEPS
    rate, seconds = None, 0.0
    if interval.can_measure(strategy) and (training.get("time_limit") or (not given and long_pass)):
        started = time.monotonic()
        rate = interval.measure_step_rate(model, counts.timing_batches())
        seconds = time.monotonic() - started
    steps_per_epoch, why = interval.choose_steps_per_epoch(given, pass_steps, rate)
    config = {"interval": {"steps_per_epoch": steps_per_epoch, "pass_steps": pass_steps,
                           "steps_per_second": None if rate is None else round(rate, 4),
                           "reason": why}}
    epochs = interval.keras_epochs(training["epochs"], pass_steps, steps_per_epoch,
                                   training.get("max_steps"))
    lines = [f"Epochs: {'one pass over the data' if steps_per_epoch is None else f'{steps_per_epoch:,} steps'}"
             f" ({why}); a checkpoint, a validation row and a backup after each"]
    if name == "paper":
        config["schedule"] = {"name": name, "reason": reason}
        return config, lines, seconds
    bound = _bound(training, epochs, pass_steps, steps_per_epoch)
    # The family's compiled rate: a schedule object, or a variable holding a number.
    own_rate = _inner(model.optimizer)._learning_rate
    plan = budget.plan_budget(name, reason, own_rate, training, bound, rate,
                              model_config.get("warmup_steps"))
    if plan is None:
        config["schedule"] = {"name": "paper", "reason": f"{reason}; but the family's schedule "
                              "has no known peak rate, so it is kept"}
    else:
        fields = plan.as_config()
        config["schedule"] = {"name": fields.pop("schedule"), "reason": fields.pop("reason"),
                              **fields}
        lines.append(f"Schedule: {name}, warm-up {plan.warmup_steps:,} of {plan.predicted_steps:,} "
                     f"steps ({plan.predicted_from}), peak rate {plan.peak_learning_rate:.3g}")
    return config, lines, seconds


def _inner(optimizer):
    return getattr(optimizer, "inner_optimizer", None) or optimizer


def _bound(training, epochs, pass_steps, steps_per_epoch):
    """The most steps `max_steps` and `epochs` allow, or None when neither is known."""
    bounds = [training["max_steps"]] if training.get("max_steps") else []
    if training["epochs"] is not None:  # else the budget alone ends the run
        if steps_per_epoch is not None:
            bounds.append(epochs * steps_per_epoch)
        elif pass_steps is not None:
            bounds.append(training["epochs"] * pass_steps)
    return min(bounds) if bounds else None


def pass_steps_of(kind, num_train, global_batch, unshuffled=None):
    """The steps of one pass: counted on `unshuffled` (translation: length buckets), else
    `ceil(num_train / global_batch)`."""
    if unshuffled is not None:
        return int(unshuffled.reduce(0, lambda count, _: count + 1))
    return math.ceil(num_train / global_batch)


def data_counts(kind, data, tokenizer_pair, max_length, global_batch, global_tokens, training,
                num_train, copy=False):
    """The `Counts` of a run's training split: translation counts and times batches of an
    unshuffled copy of its pipeline (the shuffled one's seeds are left alone; `copy`: with
    a copying model's `source_extended`)."""
    timing = 8
    if kind == "translation":
        def unshuffled():
            return preparation.translation_datasets(
                data.train_pairs, tokenizer_pair[0], tokenizer_pair[1], global_batch, max_length,
                training["val_ratio"], training["seed"], global_tokens, shuffle=False,
                copy=copy)[0]

        return Counts(lambda: pass_steps_of(kind, num_train, global_batch, unshuffled()),
                      lambda: unshuffled().take(timing))

    def image_batches():
        train_index, _ = preparation.split_validation(len(data.x_train), training["val_ratio"],
                                                      training["seed"])
        index = train_index[: timing * global_batch]
        # uint8 images and int32 labels in batches of unknown size: the element spec of
        # `preparation.image_datasets`, so that `fit` reuses the timed training step.
        return tf.data.Dataset.from_tensor_slices(
            (data.x_train[index], data.y_train[index].astype("int32"))).batch(global_batch)

    return Counts(lambda: pass_steps_of(kind, num_train, global_batch), image_batches)
