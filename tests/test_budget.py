"""Training under a budget: the schedule that ends with it, the steps a time limit affords,
epochs of a fixed step count, and the averaged snapshots (`zoo.runs.budget`, `pacing`,
`interval`, `averaging`; `keras_attention.BudgetSchedule`)."""

import importlib.util
import json
import math
import os
import pathlib
import shutil
import subprocess
import sys
import types

import budget_run
import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_attention as ka
from zoo import registry, runs
from zoo.runs import averaging, budget, interval, pacing, short_budget
from zoo.runs.callbacks import RunCallbacks, TimeLimit

TESTS = pathlib.Path(__file__).resolve().parent

SMALL = dict(num_encoder_layers=1, num_decoder_layers=1, d_model=16, num_heads=2,
             intermediate_dim=32, vocabulary_size=100, max_length=16)


def np_budget(i, peak, warmup, total, shape="linear"):
    """The budgeted schedule at iteration `i` (docs/math.md#the-budgeted-schedule)."""
    if i < warmup:
        return peak * (i + 1) / warmup
    progress = min(1.0, (i - warmup) / (total - warmup))
    return peak * (1 - progress if shape == "linear" else (1 + math.cos(math.pi * progress)) / 2)


# === The schedule ===


@pytest.mark.parametrize("shape", ["linear", "cosine"])
def test_budget_schedule_matches_the_formula_and_follows_a_corrected_budget(shape):
    schedule = ka.BudgetSchedule(peak=2e-3, warmup_steps=5, total_steps=40, shape=shape)
    steps = np.arange(45)
    got = keras.ops.convert_to_numpy(schedule(steps))
    np.testing.assert_allclose(got, [np_budget(i, 2e-3, 5, 40, shape) for i in steps],
                               rtol=1e-5, atol=1e-9)
    assert got[4] == pytest.approx(2e-3) and got[40:].max() == 0.0  # peak, then zero
    assert got[39] > 0 if shape == "linear" else got[39] >= 0
    schedule.set_budget(8, 100)  # a time limit's correction: the same object, new values
    got = keras.ops.convert_to_numpy(schedule(steps))
    np.testing.assert_allclose(got, [np_budget(i, 2e-3, 8, 100, shape) for i in steps],
                               rtol=1e-5, atol=1e-9)


def test_budget_schedule_in_an_optimizer_config_and_bad_arguments():
    schedule = ka.BudgetSchedule(1e-3, 3, 30)
    config = keras.optimizers.schedules.serialize(schedule)
    restored = keras.optimizers.schedules.deserialize(config)
    assert restored.get_config() == {"peak": 1e-3, "warmup_steps": 3, "total_steps": 30,
                                     "shape": "linear"}
    variable = keras.Variable(np.ones(2, "float32"))
    optimizer = keras.optimizers.Adam(schedule)
    optimizer.build([variable])
    for iteration in range(4):
        assert float(keras.ops.convert_to_numpy(optimizer.learning_rate)) == pytest.approx(
            np_budget(iteration, 1e-3, 3, 30), rel=1e-5)
        optimizer.apply_gradients([(np.ones(2, "float32"), variable)])
    for kwargs, match in [(dict(peak=0, warmup_steps=1, total_steps=2), "peak"),
                          (dict(peak=1, warmup_steps=5, total_steps=5), "exceed"),
                          (dict(peak=1, warmup_steps=1, total_steps=9, shape="step"), "shape")]:
        with pytest.raises(ValueError, match=match):
            ka.BudgetSchedule(**kwargs)


def test_the_peak_is_the_family_schedules_highest_rate():
    transformer = ka.TransformerSchedule(256, warmup_steps=4000, scale=0.5)
    rates = keras.ops.convert_to_numpy(transformer(np.arange(8000)))
    assert budget.peak_learning_rate(transformer) == pytest.approx(rates.max(), rel=1e-5)
    cosine = keras.optimizers.schedules.CosineDecay(0.0, 100, warmup_target=3e-4, warmup_steps=9)
    assert budget.peak_learning_rate(cosine) == pytest.approx(3e-4)
    assert budget.peak_learning_rate(keras.Variable(0.25)) == pytest.approx(0.25)
    assert budget.peak_learning_rate(keras.optimizers.schedules.ExponentialDecay(1, 2, .5)) is None


def test_the_schedule_is_chosen_by_the_budget():
    assert budget.choose_schedule(None, {"time_limit": 15})[0] == "budget-linear"
    assert budget.choose_schedule("auto", {"max_steps": 9})[0] == "budget-linear"
    name, reason = budget.choose_schedule("auto", {"epochs": 3})
    assert name == "paper" and "no --time-limit" in reason
    assert budget.choose_schedule("paper", {"time_limit": 15})[0] == "paper"
    with pytest.raises(ValueError, match="needs a budget"):
        budget.choose_schedule("budget-cosine", {"epochs": 3})
    assert [budget.warmup_for(total, 4000) for total in (2, 20, 1100, 200_000)] == \
        [1, 1, 55, 4000]
    assert [budget.warmup_for(total, 4000, 0.3) for total in (2, 20, 1100, 200_000)] == \
        [1, 6, 330, 4000]


# === The steps a time limit affords ===


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_step_prediction_measures_after_the_compiling_step_and_corrects_itself():
    clock = FakeClock()
    predictor = budget.StepPredictor(600.0, clock, every_seconds=30.0)
    predictor.begin(0)
    predictions = {}
    for step in range(1, 2000):
        clock.now += 20.0 if step == 1 else (0.5 if step < 400 else 0.25)  # compile, then faster
        total = predictor.after_step(step)
        if total is not None:
            predictions[step] = (clock.now, total)
        if clock.now >= 600:
            break
    first_step = min(predictions)
    assert first_step == 11  # 10 steps timed after the first
    now, total = predictions[first_step]
    assert total == 11 + math.ceil(10 / 5.0 * (600 - now))  # 2 steps/s from step 1 on
    times = [now for now, _ in predictions.values() if now < 600 - 30.0]
    assert all(b - a >= 30.0 for a, b in zip(times, times[1:]))
    # Once the rate doubles, the prediction grows. In the last 30 s every step corrects it,
    # closing in on the steps taken; once the time is spent it is the steps taken: the
    # schedule's rate is zero there.
    last_step = max(predictions)
    assert predictions[last_step][1] > total
    final = sorted(s for s, (now, _) in predictions.items() if now > 600 - 30.0)
    assert final == list(range(final[0], step + 1)) and len(final) >= 30.0 / 0.25 - 1
    assert [predictions[s][1] - s for s in final[-2:]] == [1, 0]
    assert last_step == step and predictions[step][1] == step


def test_step_prediction_of_a_resumed_run_counts_the_time_already_trained():
    clock = FakeClock()
    clock.now = 400.0  # 400 of 600 seconds trained before the restart, 1,000 steps
    predictor = budget.StepPredictor(600.0, clock, bound=1300, every_seconds=30.0)
    predictor.begin(1000)
    for step in range(1001, 1012):
        clock.now += 1.0
        total = predictor.after_step(step)
    assert total == 1011 + math.ceil(1.0 * (600 - 411))  # 1 step/s for the 189 s left
    assert predictor.predict(1011, rate=10.0) == 1300  # never past max_steps or epochs


def test_the_callback_stops_training_where_the_time_ends_the_schedule():
    schedule = ka.BudgetSchedule(1e-3, 5, 1000)
    plan = budget.BudgetPlan("budget-linear", "test", 1e-3, 4000, 5, 1000, "test")

    class Spent:  # the time runs out at step 30
        def begin(self, steps):
            pass

        def after_step(self, steps):
            return steps + 1 if steps < 30 else steps

    callback = budget.BudgetCallback(schedule, plan, 0, Spent())
    callback.set_model(types.SimpleNamespace(stop_training=False))
    callback.on_train_begin()
    for _ in range(29):
        callback.on_train_batch_end(0)
    assert not callback.model.stop_training and callback.total_steps == 30
    callback.on_train_batch_end(0)
    assert callback.model.stop_training and callback.total_steps == 30
    assert float(keras.ops.convert_to_numpy(schedule(30))) == 0.0
    last = 1e-3 / (30 - callback.warmup_steps)  # the last update of the linear decay
    assert float(keras.ops.convert_to_numpy(schedule(29))) == pytest.approx(last)


class TickingLimit(TimeLimit):
    """A time limit whose every reading of the clock comes 0.3 s after the one before."""

    now = 0.0

    def elapsed(self):
        self.now += 0.3
        return self.now


def test_the_budget_ends_its_schedule_on_the_step_where_the_time_limit_stops(tmp_path):
    """Time passes between the budget's callback and the time limit's (the history, the
    checkpoints and the backup run between them): both decide on one reading of the clock
    per step, so the schedule's total is the steps taken and its rate after them zero."""
    run_callbacks = RunCallbacks({"time_limit": 0.2, "max_steps": None}, tmp_path, tmp_path,
                                 tmp_path / "history.csv", has_validation=False)
    run_callbacks.stop_time = limit = TickingLimit(12.0)
    plan = budget.BudgetPlan("budget-linear", "test", 1e-3, 4000, 1, 1000, "test")
    pace = pacing.Pace(epochs=1, steps_per_epoch=None, steps_done=0, spent_seconds=0.0,
                       config={}, lines=[], plan=plan, schedule=ka.BudgetSchedule(1e-3, 1, 1000))
    pace.attach(run_callbacks, tmp_path / "checkpoints")
    callbacks = [pace.callback, limit]  # in RunCallbacks.in_order's order
    model = types.SimpleNamespace(stop_training=False)
    for callback in callbacks:
        callback.set_model(model)
        callback.on_train_begin()
    steps = 0
    while not model.stop_training:
        for callback in callbacks:
            callback.on_train_batch_begin(steps)
        for callback in callbacks:
            callback.on_train_batch_end(steps)
        steps += 1
    assert limit.stopped and run_callbacks.stopped_by() == "time_limit"
    assert steps == 40 and pace.callback.total_steps == steps  # one reading a step: 12 s / 0.3
    assert float(keras.ops.convert_to_numpy(pace.schedule(steps))) == 0.0
    assert float(keras.ops.convert_to_numpy(pace.schedule(steps - 1))) > 0.0


def test_the_callback_moves_the_warmup_only_while_it_lasts():
    schedule = ka.BudgetSchedule(1e-3, 50, 1000)
    plan = budget.BudgetPlan("budget-linear", "test", 1e-3, 4000, 50, 1000, "test")

    class Predictions:
        def __init__(self, totals):
            self.totals = totals

        def begin(self, steps):
            pass

        def after_step(self, steps):
            return self.totals.get(steps)

    callback = budget.BudgetCallback(schedule, plan, 0, Predictions({10: 400, 60: 300}))
    callback.on_train_begin()
    for _ in range(70):
        callback.on_train_batch_end(0)
    # At step 10 the warm-up became 5% of 400; at step 60 it was over and stays.
    assert callback.state() == {"schedule_warmup_steps": 20, "schedule_total_steps": 300}
    assert callback.summary()["predicted_steps_first"] == 400
    logs = {}
    callback.on_epoch_end(0, logs)
    assert logs == {"predicted_steps": 300}


# === Epochs of a fixed step count ===


def test_steps_per_epoch_keeps_an_epoch_under_five_minutes():
    assert interval.choose_steps_per_epoch(None, 4000, 1.2)[0] == 360
    steps, why = interval.choose_steps_per_epoch(None, 300, 1.2)
    assert steps is None and "within 5 min" in why
    assert interval.choose_steps_per_epoch(None, 12, None)[0] is None  # a short pass
    assert interval.choose_steps_per_epoch(50, 4000, 1.2) == (50, "--steps-per-epoch 50")
    assert interval.keras_epochs(10, 4000, 360) == 112  # 10 passes, in epochs of 360 steps
    assert interval.keras_epochs(10, 4000, None) == 10


class CountingTraces(keras.Sequential):
    """A Sequential that counts how often its training step is traced."""

    traces = 0

    def train_step(self, data):
        type(self).traces += 1
        return super().train_step(data)


def test_timing_steps_are_undone_and_fit_reuses_the_timed_step():
    model = CountingTraces([keras.Input((3,)), keras.layers.Dense(8), keras.layers.Dropout(0.5),
                             keras.layers.Dense(1)])
    model.compile(keras.optimizers.Adam(0.1), "mse")
    # Five batches of 4, of unknown batch size (None, 3), (None, 1), like fit's data.
    batches = tf.data.Dataset.from_tensor_slices((np.ones((20, 3), "float32"),
                                                  np.zeros((20, 1), "float32"))).batch(4)
    before = [v.numpy().copy() for v in model.variables]  # seed states included
    rate = interval.measure_step_rate(model, batches)
    assert rate > 0
    assert int(model.optimizer.iterations.numpy()) == 0
    moments = [v for v in model.optimizer.variables if "momentum" in v.path or "velocity" in v.path]
    assert moments and not any(np.any(v.numpy()) for v in moments)  # Adam's are zero again
    for a, b in zip(before, [v.numpy() for v in model.variables]):
        np.testing.assert_array_equal(a, b)
    traced = CountingTraces.traces
    assert traced > 0
    model.fit(batches, epochs=1, verbose=0)
    assert CountingTraces.traces == traced  # fit traced no training step of its own
    assert int(model.optimizer.iterations.numpy()) == 5
    assert interval.measure_step_rate(model, batches.take(2)) is None  # nothing timed
    # A clock 30 s further at each reading, at most 45 s timed: the clock starts after the
    # 2nd step (30), the 3rd step is timed (60 - 30 <= 45), the 4th is not (90 - 30 > 45),
    # and the timed second ends at the next reading (120): 1 step in 90 s.
    readings = iter(range(30, 1000, 30))
    rate = interval.measure_step_rate(model, batches, max_seconds=45,
                                      clock=lambda: next(readings))
    assert rate == pytest.approx(1 / 90)


# === A run with a budget: config.json, resume, the average ===


def _budget_run(out, **extra):
    # No dropout: its random state is not part of a backup, the rest of a run is.
    # The schedule's peak and warm-up given: what a short budget would choose is tested below.
    return runs.train("transformer-tiny", "numbers", out,
                      overrides={**SMALL, "dropout": 0.0, "learning_rate_scale": 1.0},
                      train_size=200, test_size=4, epochs=2, batch_size=16, max_steps=20,
                      steps_per_epoch=5, warmup_ratio=0.05, average_checkpoints=3, seed=5,
                      verbose=0, quiet=True, **extra)


class CopyAt(keras.callbacks.Callback):
    """Copies the run directory `run_dir` to `to` at the start of `epoch`: what a kill
    there leaves (the point where `Interrupt`, tests/interrupts.py, raises)."""

    def __init__(self, epoch, run_dir, to):
        super().__init__()
        self.epoch, self.run_dir, self.to = epoch, run_dir, to

    def on_epoch_begin(self, epoch, logs=None):
        if epoch == self.epoch:
            shutil.copytree(self.run_dir, self.to)


@pytest.mark.large
def test_a_budget_run_records_its_schedule_resumes_it_and_averages_its_snapshots(tmp_path):
    # The straight run leaves a copy of its directory as a kill after epoch 1 would.
    straight = _budget_run(tmp_path / "straight", callbacks=[
        CopyAt(2, tmp_path / "straight", tmp_path / "resumed")])
    config = json.loads((tmp_path / "straight/config.json").read_text())
    assert config["schedule"] == {
        "name": "budget-linear", "reason": config["schedule"]["reason"],
        "peak_learning_rate": pytest.approx((16 * 1000) ** -0.5), "warmup_cap": 1000,
        "warmup_steps": 1, "predicted_steps": 20, "predicted_from": "max_steps", "bound": 20,
        "warmup_ratio": 0.05}
    assert "max_steps 20" in config["schedule"]["reason"]
    assert config["interval"]["steps_per_epoch"] == 5 and config["interval"]["pass_steps"] == 14  # 190 pairs in length buckets
    assert straight.summary["steps"] == 20 and straight.epochs == 4
    assert straight.summary["budget"]["predicted_steps_final"] == 20

    # Killed after epoch 1, resumed: the same schedule, data and end point.
    assert json.loads((tmp_path / "resumed/backup/training_metadata.json").read_text())[
        "epoch"] == 2
    assert not (tmp_path / "resumed/summary.json").exists()
    resumed = _budget_run(tmp_path / "resumed")
    assert resumed.initial_epoch == 2 and resumed.summary["steps"] == 20
    np.testing.assert_allclose(resumed.history["loss"], straight.history["loss"], rtol=1e-4)
    for a, b in zip(resumed.model.get_weights(), straight.model.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)

    # The average: the mean of the last 3 snapshots of the last 20% (steps 16 to 20).
    snapshots = averaging.snapshot_paths(tmp_path / "resumed/checkpoints/average")
    assert [path.name for path in snapshots] == ["step-16.npz", "step-18.npz", "step-20.npz"]
    assert resumed.summary["budget"]["averaged_snapshots"] == [p.name for p in snapshots]
    average = runs.load_run(tmp_path / "resumed", "average").model
    arrays = [np.load(path) for path in snapshots]
    for weight in average.weights:
        expected = np.mean([snapshot[weight.path] for snapshot in arrays], axis=0)
        np.testing.assert_allclose(weight.numpy(), expected, rtol=1e-6, atol=1e-7)
    last = runs.load_run(tmp_path / "resumed", "last").model
    np.testing.assert_array_equal(last.weights[0].numpy(), arrays[-1][last.weights[0].path])


def test_a_resumed_time_limited_run_continues_its_corrected_schedule(tmp_path):
    model = registry.get("transformer-tiny", **SMALL)
    training = dict(epochs=3, time_limit=10.0, max_steps=None, average_checkpoints=None)
    saved = {"schedule": {"name": "budget-linear", "reason": "test", "peak_learning_rate": 1e-3,
                          "warmup_cap": 1000, "warmup_steps": 30, "predicted_steps": 600,
                          "predicted_from": "test", "bound": None},
             "interval": {"steps_per_epoch": 100, "pass_steps": 250}}
    (tmp_path / "backup").mkdir()
    (tmp_path / "backup/training_metadata.json").write_text(json.dumps(
        {"epoch": 2, "steps": 200, "train_seconds": 240.5, "schedule_warmup_steps": 25,
         "schedule_total_steps": 777, "weights": "epoch-2.weights.h5"}))
    pace = pacing.prepare(model, training, {}, saved, tmp_path, model.distribute_strategy, None)
    assert (pace.epochs, pace.steps_per_epoch, pace.steps_done) == (8, 100, 200)
    assert pace.spent_seconds == 240.5 and pace.average == averaging.COUNT
    assert model.optimizer.learning_rate is not None
    assert float(pace.schedule.total_steps.numpy()) == 777.0
    assert float(pace.schedule.warmup_steps.numpy()) == 25.0
    run_callbacks = RunCallbacks({**training, "max_steps": None}, tmp_path, tmp_path,
                                 tmp_path / "history.csv", True, pace.spent_seconds)
    pace.attach(run_callbacks, tmp_path / "checkpoints")
    assert run_callbacks.in_order()[0] is pace.callback
    assert pace.callback.predictor.budget_seconds == 600.0
    assert run_callbacks.stop_time.elapsed() == pytest.approx(240.5)


def test_options_that_need_a_budget_are_refused_before_any_work(tmp_path):
    for options, match in [(dict(schedule="budget-linear"), "needs a budget"),
                           (dict(average_checkpoints=3, epochs=1), "needs a budgeted schedule"),
                           (dict(average_checkpoints=3, max_steps=4, schedule="paper"),
                            "needs a budgeted schedule"),
                           (dict(warmup_ratio=0.2, max_steps=4, schedule="paper"),
                            "warmup_ratio needs a budgeted schedule")]:
        with pytest.raises(ValueError, match=match):
            runs.train("transformer-tiny", "numbers", tmp_path / "run", **options)
        assert not (tmp_path / "run").exists()


def test_snapshots_spread_over_the_last_fifth_and_the_end_replaces_a_close_one(tmp_path):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    callback = averaging.TailSnapshots(tmp_path, lambda: 100, steps=0)
    callback.set_model(model)
    callback.on_train_begin()
    for step in range(97):
        model.weights[0].assign(np.full((3, 2), step + 1.0, "float32"))  # weights = the step
        callback.on_train_batch_end(step)
    callback.on_train_end()
    steps = [int(p.stem.split("-")[1]) for p in averaging.snapshot_paths(tmp_path / "average")]
    assert steps == [80, 85, 90, 97]  # 95 was 2 steps from the end: the end took its place
    average = keras.saving.load_model(tmp_path / "average.keras")
    np.testing.assert_allclose(average.weights[0].numpy(), np.mean(steps))
    assert model.weights[0].numpy()[0, 0] == 97.0  # the model keeps its own weights
    resumed = averaging.TailSnapshots(tmp_path, lambda: 100, steps=88)  # restarted at step 88
    resumed.set_model(model)
    resumed.on_train_begin()
    assert [p.stem for p in averaging.snapshot_paths(tmp_path / "average")] == \
        ["step-80", "step-85"]


# === A short budget's defaults: batches of tokens, no dropout ===


def test_a_short_budget_chooses_token_batches_and_no_dropout_where_the_user_chose_nothing():
    chosen = short_budget.choose("transformer", {"time_limit": 15, "schedule": "auto"}, {},
                                 fine_tuning=False)
    assert chosen.batch_tokens == short_budget.BATCH_TOKENS == 1024
    assert chosen.warmup_ratio == 0.3
    assert chosen.overrides == {"dropout": 0.0}
    assert chosen.reason == "time_limit 15 min <= 60"
    assert chosen.describe() == ("Short budget (time_limit 15 min <= 60): batches of 1024 "
                                 "tokens, warm-up 30% of the budget, dropout 0")
    # The user's own batch, dropout, warm-up and peak are kept.
    for batch in ({"batch_size": 64}, {"batch_tokens": 4096}):
        kept = short_budget.choose("transformer", {"max_steps": 900, **batch}, {}, False)
        assert kept.batch_tokens is None
        assert kept.overrides == {"dropout": 0.0}
        assert kept.reason == "max_steps 900 <= 5000"
    kept = short_budget.choose("transformer", {"max_steps": 9, "warmup_ratio": 0.3},
                               {"dropout": 0.2, "learning_rate_scale": 0.5}, False)
    assert (kept.batch_tokens, kept.warmup_ratio, kept.overrides) == (1024, None, {})
    # The family's own schedule keeps its warm-up and peak.
    paper = short_budget.choose("transformer", {"max_steps": 9, "schedule": "paper"}, {}, False)
    assert (paper.warmup_ratio, paper.overrides) == (None, {"dropout": 0.0})
    assert short_budget.choose("transformer", {"max_steps": 9, "batch_size": 8,
                                               "schedule": "paper"}, {"dropout": 0.2},
                               False) is None
    # Long or no budgets, other families and fine-tuning keep their recipes.
    for family, training, fine_tuning in [("transformer", {"time_limit": 61}, False),
                                          ("transformer", {"max_steps": 5001}, False),
                                          ("transformer", {}, False),
                                          ("transformer", {"time_limit": 15}, True),
                                          ("vit", {"time_limit": 15}, False),
                                          ("seq2seq", {"max_steps": 100}, False)]:
        assert short_budget.choose(family, training, {}, fine_tuning) is None
    long_time = short_budget.choose("transformer", {"time_limit": 90, "max_steps": 100}, {}, False)
    assert long_time.reason == "max_steps 100 <= 5000"  # either short bound is enough


@pytest.mark.large
def test_a_short_budget_run_records_its_defaults_and_builds_with_them(tmp_path):
    result = runs.train("transformer-tiny", "numbers", tmp_path / "run", overrides=SMALL,
                        train_size=120, test_size=4, epochs=1, max_steps=3, verbose=0, quiet=True)
    config = json.loads((tmp_path / "run/config.json").read_text())
    assert config["short_budget"] == {
        "batch_tokens": 1024, "warmup_ratio": 0.3, "reason": "max_steps 3 <= 5000",
        "overrides": {"dropout": 0.0}}
    assert config["training"]["batch_tokens"] == 1024
    assert config["training"]["warmup_ratio"] == config["schedule"]["warmup_ratio"] == 0.3
    assert config["schedule"]["peak_learning_rate"] == pytest.approx((16 * 1000) ** -0.5)
    assert config["model_config"]["dropout"] == 0.0 and config["overrides"] == SMALL
    assert _dropout_rates(result.model) == {0.0}
    # The user's dropout and batch win; a run without a budget has no short-budget defaults.
    kept = runs.train("transformer-tiny", "numbers", tmp_path / "kept",
                      overrides={**SMALL, "dropout": 0.3, "learning_rate_scale": 1.0},
                      train_size=120, test_size=4, epochs=1, max_steps=3, batch_size=16,
                      warmup_ratio=0.05, verbose=0, quiet=True)
    config = json.loads((tmp_path / "kept/config.json").read_text())
    assert config["short_budget"] is None and config["training"]["batch_tokens"] is None
    assert config["schedule"]["peak_learning_rate"] == pytest.approx((16 * 1000) ** -0.5)
    assert config["model_config"]["dropout"] == 0.3 and 0.3 in _dropout_rates(kept.model)
    assert kept.summary["steps"] == 3


def _dropout_rates(model):
    return {layer.rate for layer in model._flatten_layers()
            if isinstance(layer, keras.layers.Dropout)}


class StepChanges(keras.callbacks.Callback):
    """The mean absolute change of the trainable weights in each training step."""

    def __init__(self):
        super().__init__()
        self.changes = []

    def on_train_batch_begin(self, batch, logs=None):
        self.before = [weight.numpy().copy() for weight in self.model.trainable_weights]

    def on_train_batch_end(self, batch, logs=None):
        self.changes.append(np.mean([np.abs(weight.numpy() - before).mean() for weight, before
                                     in zip(self.model.trainable_weights, self.before)]))


@pytest.mark.large
def test_a_timed_run_trains_with_the_budget_schedule_not_the_step_it_timed(tmp_path):
    # Timing the step rate traces the training step with the family's own schedule (here
    # a warm-up of 4,000 steps); training must use the budget's: its first step at the peak
    # rate, its last at peak / 19. Adam moves each weight by about the rate, so the last
    # step changes the weights far less than the first (the paper's warm-up: far more).
    changes = StepChanges()
    runs.train("transformer-tiny", "numbers", tmp_path / "run",
               overrides={**SMALL, "warmup_steps": 4000}, train_size=200, test_size=4,
               epochs=3, batch_size=8, max_steps=20, time_limit=60.0, average_checkpoints=0,
               warmup_ratio=0.05,
               callbacks=[changes], verbose=0, quiet=True)
    config = json.loads((tmp_path / "run/config.json").read_text())
    assert config["interval"]["steps_per_second"] is not None  # the step was timed first
    assert (config["schedule"]["warmup_steps"], config["schedule"]["predicted_steps"]) == (1, 20)
    assert len(changes.changes) == 20
    assert changes.changes[-1] < 0.25 * changes.changes[0], changes.changes


@pytest.mark.large
def test_a_budget_without_epochs_trains_until_the_budget_ends(tmp_path, capsys):
    # 19 training pairs in batches of 16: passes of a few steps, so 10 epochs (the default
    # without a budget) would end the run before its 35 steps.
    result = runs.train("transformer-tiny", "numbers", tmp_path / "run", overrides=SMALL,
                        train_size=20, test_size=4, batch_size=16, max_steps=35,
                        average_checkpoints=0, verbose=0)
    config = json.loads((tmp_path / "run/config.json").read_text())
    assert config["training"]["epochs"] is None  # recorded: the budget decides
    pass_steps = config["interval"]["pass_steps"]
    assert 10 * pass_steps < 35
    assert result.summary["steps"] == 35 and result.summary["stopped_by"] == "max_steps"
    assert result.epochs == math.ceil(35 / pass_steps)
    assert "for 35 steps," in capsys.readouterr().out
    # A time limit alone: fit's epochs are unbounded, the limit ends the run.
    assert interval.keras_epochs(None, 7, None) == interval.UNTIL_BUDGET
    assert interval.keras_epochs(None, 7, 3, max_steps=10) == 4
    assert interval.keras_epochs(10, 7, None, max_steps=10) == 10  # epochs given: kept


# === A time limit's corrections on every backend ===


def _budget_report(backend, tmp_path):
    """tests/budget_run.py's report: in this process under TensorFlow, else in a process of
    its own under `backend`."""
    if backend == "tensorflow":
        budget_run.main(tmp_path)
    else:
        if backend == "torch" and importlib.util.find_spec("torch") is None:
            pytest.skip("PyTorch is not installed, so the time-limited run did not train under "
                        "it: .venv/bin/pip install torch==2.13.0 (the CPU build among this "
                        "machine's wheels); the TensorFlow and JAX runs check the same")
        result = subprocess.run([sys.executable, str(TESTS / "budget_run.py"), str(tmp_path)],
                                capture_output=True, text=True, timeout=600,
                                env={**os.environ, "KERAS_BACKEND": backend})
        assert result.returncode == 0, result.stderr[-4000:]
    return json.loads((tmp_path / "report.json").read_text())


@pytest.mark.large
@pytest.mark.parametrize("backend", ["tensorflow", "jax", "torch"])
def test_a_time_limited_run_follows_its_corrections_to_a_zero_rate(backend, tmp_path):
    """`zoo train --time-limit` (12 s): every step carries the total that the step before it
    left in the schedule (on JAX: in `fit`'s state, which the compiled step reads), the
    total ends at the steps taken, and the rate after the last step is zero (#62)."""
    report = _budget_report(backend, tmp_path)
    summary, carried, held = report["summary"], report["carried"], report["held"]
    steps = summary["steps"]
    assert summary["stopped_by"] == "time_limit" and len(carried) == steps, report
    assert len(set(held)) >= 3, report  # corrected as it went
    assert carried[1:] == held[:-1], report  # each correction reached the next step
    assert held[-1] == steps == summary["budget"]["predicted_steps_final"], report
    assert report["rate_after_last_step"] == 0.0 and report["rate_of_last_step"] > 0.0, report


def test_a_keras_file_of_a_budget_run_loads_with_its_optimizer_state(tmp_path):
    """The schedule's variables are the optimizer's state while training
    (`BudgetSchedule.attach`), not in the `.keras` file `zoo.files.save_model` writes
    (`schedules.detached`): `keras.saving.load_model` rebuilds the optimizer from the config,
    budget included, and loads its moments and iterations."""
    import warnings

    from zoo import files

    model = registry.get("transformer-tiny", **SMALL)
    plan = budget.BudgetPlan("budget-linear", "test", 1e-3, 4000, 5, 1000, "test")
    schedule = budget.install(model, plan, warmup_steps=7, total_steps=90)
    count = len(model.optimizer.variables)
    source = np.random.default_rng(0).integers(3, 100, (4, 6)).astype("int32")
    batch = {"source": source, "target": source}
    model.fit(batch, source, epochs=2, verbose=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        files.save_model(model, tmp_path / "last.keras")
        loaded = keras.saving.load_model(tmp_path / "last.keras")
    assert not [w for w in caught if "Skipping variable loading" in str(w.message)]
    assert len(model.optimizer.variables) == count  # attached again, in the same place
    assert model.optimizer.variables[-1] is schedule.total_steps
    assert int(loaded.optimizer.iterations.numpy()) == 2
    assert loaded.optimizer._learning_rate.get_config()["total_steps"] == 90
    for mine, theirs in zip(model.optimizer.variables[:-2], loaded.optimizer.variables):
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())
