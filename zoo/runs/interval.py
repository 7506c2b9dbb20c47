"""How often a run writes a checkpoint, a validation row and its backup: its "epoch" in steps.

A Keras epoch ends with validation, `history.csv`'s row, `last.keras` and
the backup a killed run resumes from. One pass over a long dataset can take
an hour on a CPU; then a kill loses the hour. So a run whose pass would take
longer than `MAX_EPOCH_SECONDS` (5 minutes) at the measured step rate trains
in "epochs" of `steps_per_epoch` steps instead (Keras' `steps_per_epoch`,
over the training data repeated), and `--steps-per-epoch N` sets it outright.

    rate = measure_step_rate(model, batches)     # steps/s, the model left as it was
    steps, why = choose_steps_per_epoch(None, pass_steps=4_000, rate=1.2)
    # (360, "one pass is 4,000 steps, ~56 min at 1.2 steps/s: ...")

The rate comes from a few training steps taken before `fit` on the first
batches (`measure_step_rate`), through the training function `fit` then reuses,
after which the model's and the optimizer's variables get their values back: the
run then starts as if they were never taken.
"""

import math
import time

import numpy as np
import tensorflow as tf

from keras_attention import backends
from zoo import distribute
from zoo.runs.callbacks import build_optimizer

MAX_EPOCH_SECONDS = 300.0
# A pass of at most this many steps is short whatever the model; no timing needed.
SHORT_PASS_STEPS = 30


def can_measure(strategy):
    """Whether `measure_step_rate` may run under `strategy` (a `tf.distribute.Strategy` or a
    `zoo.distribute.Placement`): one replica, one worker (batches from Python are not split
    over replicas)."""
    if isinstance(strategy, distribute.Placement):
        strategy, replicas = strategy.strategy, strategy.num_replicas_in_sync
    else:
        replicas = strategy.num_replicas_in_sync
    return replicas == 1 and not isinstance(
        strategy, (tf.distribute.MultiWorkerMirroredStrategy, tf.distribute.TPUStrategy))


def measure_step_rate(model, batches, *, max_steps=8, max_seconds=20.0, clock=time.monotonic):
    """Steps per second of the model's training function over `batches`, the first two
    steps (compiling) left out; None with fewer than three batches.

    Args:
        model: a compiled Keras model.
        batches: a `tf.data.Dataset` of training batches `(x, y)`.

    The steps run through the training function `fit` calls on its own data: on
    TensorFlow `model.train_function` on an iterator of `batches` made by the model's
    strategy, elsewhere `train_on_batch` (on JAX the same jitted step). So when `batches`
    has the element spec of `fit`'s data, `fit` reuses the step traced here instead of
    tracing its own. The model's and its optimizer's variables (weights, moments,
    iteration count, seed states) are put back afterwards.

    On JAX every new batch shape compiles the step anew (a batch is padded to its longest
    sentence), so the steps are taken on the first batch again and again: the rate of
    steps that do not compile, which is the rate of a run once its shapes are compiled.
    """
    build_optimizer(model)
    variables = list(model.variables) + list(model.optimizer.variables)
    saved = [np.array(variable.numpy()) for variable in variables]
    model.make_train_function()
    train_call, steps = _train_call(model, batches, max_steps)
    started, timed = None, 0
    try:
        for call in range(max_steps):
            if started is not None and clock() - started > max_seconds:
                break
            try:
                train_call()
            except (StopIteration, tf.errors.OutOfRangeError):
                break
            if call == 1:
                started = clock()
            elif call > 1:
                timed += steps
        seconds = clock() - started if started is not None else 0.0
    finally:
        for variable, value in zip(variables, saved, strict=True):
            variable.assign(value)
        model.reset_metrics()
    return timed / seconds if timed and seconds > 0 else None


def _train_call(model, batches, calls):
    """`(call, steps)`: a function that runs the model's training function on the next
    `steps` of the first `calls × steps` of `batches` and waits for it to finish
    (`StopIteration` or `OutOfRangeError` at the end)."""
    if backends.is_tensorflow():
        steps = int(getattr(model, "steps_per_execution", 1) or 1)
        iterator = iter(model.distribute_strategy.experimental_distribute_dataset(
            batches.take(calls * steps)))

        def call():
            logs = model.train_function(iterator)
            tf.nest.map_structure(np.asarray, logs)  # wait for the step to finish

        return call, steps
    # `train_on_batch`: one step, its logs NumPy once it has finished. One batch: one shape.
    first = list(batches.take(1).as_numpy_iterator())
    iterator = iter(first * calls)
    return lambda: model.train_on_batch(*next(iterator)), 1


def choose_steps_per_epoch(given, pass_steps, rate, max_seconds=MAX_EPOCH_SECONDS):
    """`(steps_per_epoch or None, reason)`: None keeps one pass over the data per epoch.

    Args:
        given: `--steps-per-epoch`, or None to choose.
        pass_steps: the steps of one pass over the training data, or None if unknown.
        rate: measured steps per second, or None.
        max_seconds: the longest epoch chosen.
    """
    if given:
        return int(given), f"--steps-per-epoch {given}"
    if pass_steps is not None and pass_steps <= SHORT_PASS_STEPS:
        return None, f"one pass is {pass_steps} steps"
    if not rate:
        return None, "one pass over the data (the step rate was not measured)"
    within = max(1, math.floor(rate * max_seconds))
    if pass_steps is not None and pass_steps <= within:
        return None, (f"one pass is {pass_steps:,} steps, ~{duration(pass_steps / rate)} at "
                      f"{rate:.3g} steps/s, within {duration(max_seconds)}")
    about = "" if pass_steps is None else (
        f"one pass is {pass_steps:,} steps, ~{duration(pass_steps / rate)} at {rate:.3g} "
        "steps/s: ")
    return within, f"{about}an epoch of {within:,} steps is ~{duration(max_seconds)}"


def duration(seconds):
    """`"45 s"`, `"5 min"`, `"1.5 h"`."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.3g} min"
    return f"{seconds / 3600:.3g} h"


# `fit`'s epochs when the budget alone ends a run (a time limit and no `epochs`).
UNTIL_BUDGET = 1_000_000


def keras_epochs(epochs, pass_steps, steps_per_epoch, max_steps=None):
    """`fit`'s epochs: `epochs` passes, in epochs of `steps_per_epoch` steps when given.

    `epochs` None (a run with a budget and no `epochs`): as many as `max_steps`
    takes, else `UNTIL_BUDGET` (the time limit ends the run).
    """
    if epochs is None:
        per = steps_per_epoch or pass_steps
        return max(1, math.ceil(max_steps / per)) if max_steps and per else UNTIL_BUDGET
    if steps_per_epoch is None:
        return epochs
    if pass_steps is None:
        return epochs
    return max(1, math.ceil(epochs * pass_steps / steps_per_epoch))


def repeated(dataset, steps_done):
    """The training data for epochs of a fixed step count: repeated, the `steps_done`
    batches that a resumed run has trained on skipped (the order is seeded)."""
    dataset = dataset.repeat()
    return dataset.skip(steps_done) if steps_done else dataset
