"""A short time-limited `zoo train` run (`zoo.runs.train(time_limit=...)`) under the Keras
backend of this process: run by tests/test_budget.py once per backend, in a process of its own.

    KERAS_BACKEND=jax python tests/budget_run.py OUT_DIR

Writes `OUT_DIR/report.json`: the run's summary, the optimizer's rate after the last step,
and for each step the total of the budget that the training step itself carried (on JAX, its
state: `fit`'s arrays, not the variables) beside the total the schedule held at the step's end
(after `BudgetCallback`'s correction, if one came).
"""

import json
import pathlib
import sys

import keras
import numpy as np

from zoo import runs

SMALL = dict(num_encoder_layers=1, num_decoder_layers=1, d_model=16, num_heads=2,
             intermediate_dim=32, vocabulary_size=100, max_length=16, dropout=0.0)


class StepTotals(keras.callbacks.Callback):
    """Per step: (the total the step carried, the schedule's total after the step's callbacks).

    On JAX the total the step carried is read from the state `fit` keeps between steps
    (`model._jax_state`, through `self._model`: `self.model` would sync it into the
    variables first, and so hide a callback that forgot to); elsewhere the step reads the
    variable itself, which is read at the step's start."""

    def __init__(self):
        super().__init__()
        self.carried, self.held = [], []
        self._before = None

    def _variables(self):
        optimizer = self._model.optimizer
        return optimizer, optimizer._learning_rate  # the schedule (`learning_rate`: its rate)

    def on_train_batch_begin(self, batch, logs=None):
        optimizer, schedule = self._variables()
        if getattr(self._model, "_jax_state", None) is None or self._model._jax_state_synced:
            self._before = float(keras.ops.convert_to_numpy(schedule.total_steps))
        else:
            self._before = None

    def on_train_batch_end(self, batch, logs=None):
        optimizer, schedule = self._variables()
        state = getattr(self._model, "_jax_state", None)
        if state is not None:  # JAX: the step's own copy of the optimizer's variables
            index = next(i for i, v in enumerate(optimizer.variables)
                         if v is schedule.total_steps)
            carried = float(np.asarray(state["optimizer_variables"][index]))
        else:
            carried = self._before
        self.carried.append(carried)
        # On JAX, fit empties the variable when it takes the state, and a correction
        # (`BudgetCallback` syncs, then assigns) fills it until the next step takes it again.
        held = schedule.total_steps._value if state is not None else schedule.total_steps
        self.held.append(carried if held is None else float(keras.ops.convert_to_numpy(held)))


def main(out):
    out = pathlib.Path(out)
    totals = StepTotals()
    result = runs.train("transformer-tiny", "numbers", out / "run", overrides=SMALL,
                        train_size=200, test_size=4, batch_size=16, time_limit=0.2,
                        average_checkpoints=0, seed=5, callbacks=[totals], verbose=0,
                        quiet=True)
    optimizer = result.model.optimizer
    schedule = optimizer._learning_rate
    steps = result.summary["steps"]
    report = {"backend": keras.backend.backend(), "summary": result.summary,
              "rate_after_last_step": float(keras.ops.convert_to_numpy(schedule(steps))),
              "rate_of_last_step": float(keras.ops.convert_to_numpy(schedule(steps - 1))),
              "carried": totals.carried, "held": totals.held}
    (out / "report.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
