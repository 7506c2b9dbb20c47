"""A finished search: the best config (`best_config.json`) and a table of the best trials."""

import dataclasses
import json
import pathlib
from typing import Any

import keras_tuner

from zoo import description, files, registry
from zoo.errors import ZooError
from zoo.tuning.hypermodel import ZooHyperModel

BEST_CONFIG = "best_config.json"


def completed_trials(tuner, num_trials):
    trials = tuner.oracle.get_best_trials(len(tuner.oracle.trials))
    done = [t for t in trials if t.status == keras_tuner.engine.trial.TrialStatus.COMPLETED]
    return done[:num_trials]


def num_params(name, overrides):
    """The parameter count of the model `name` with the config `overrides`.

    From the config's sizes when its family computes it (`zoo.describe`, nothing
    built: the zoo's families), else by building the model (an entry a user
    registered with a config of their own). Nothing is hidden: the trials asked
    about were built and trained, so an error here is a bug (a `ZooError` is a
    config refused since, which `results_table` says in the table).
    """
    counted = description.describe(name, **overrides).num_params
    if counted is not None:
        return counted
    return registry.get(name, compile=False, **overrides).count_params()


def best_config(tuner, hypermodel, tuner_name=None):
    """The best completed trial as the `best_config.json` dict (see the module doc)."""
    trials = completed_trials(tuner, 1)
    if not trials:
        raise RuntimeError(
            f"No trial of {hypermodel.model_name!r} completed in {tuner.project_dir}; see the "
            "trials' messages (keras_tuner.Tuner.results_summary) for why."
        )
    trial = trials[0]
    hp = trial.hyperparameters
    config = hypermodel.config_overrides(hp)
    objective_ = tuner.oracle.objective
    return {
        "model": hypermodel.model_name,
        "config": config,
        "fit": hypermodel.fit_arguments(hp),
        "objective": {
            "name": objective_.name, "direction": objective_.direction,
            "value": float(trial.score),
        },
        "trial_id": trial.trial_id,
        "num_params": num_params(hypermodel.model_name, config),
        "tuner": tuner_name or type(tuner).__name__,
        "hyperparameters": {k: v for k, v in hp.values.items() if not k.startswith("tuner/")},
    }


def results_table(tuner, hypermodel, num_trials=5):
    """A text table of the best completed trials: rank, trial, objective, parameters, values.

    A trial whose config the zoo refuses now (a search resumed after its
    checks changed) has `invalid` for its parameters and a line under the table
    saying why; any other error while counting is raised.
    """
    trials = completed_trials(tuner, num_trials)
    objective_ = tuner.oracle.objective
    names = []
    for trial in trials:
        names += [k for k in trial.hyperparameters.values if k not in names and "/" not in k]
    header = ["rank", "trial", f"{objective_.name} ({objective_.direction})", "params"] + names
    rows, notes = [], []
    for rank, trial in enumerate(trials, 1):
        values = trial.hyperparameters.values
        try:
            params = num_params(hypermodel.model_name,
                                hypermodel.config_overrides(trial.hyperparameters))
        except ZooError as error:
            params = None
            notes.append(f"invalid: trial {trial.trial_id}'s config is refused now: {error}")
        rows.append(
            [str(rank), trial.trial_id, f"{trial.score:.4g}",
             "invalid" if params is None else f"{params:,}"]
            + [_short(values.get(n, "-")) for n in names]
        )
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in [header] + rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines + notes)


def _short(value):
    if isinstance(value, float) and value and not 1e-2 <= abs(value) < 1e4:
        return f"{value:.3g}"
    return str(value)


def write_best_config(best, path):
    """Write `best` as JSON to `path` (atomically: a finished file or none)."""
    return files.write_json(path, best)


def load_best_config(path):
    """Read a `best_config.json`; checks that its model and config fields exist.

    Returns:
        The dict (`"model"`, `"config"`, `"fit"`, ...); build the model with
        `zoo.get(best["model"], **best["config"])`.
    """
    best = json.loads(pathlib.Path(path).read_text())
    if not isinstance(best, dict) or not isinstance(best.get("model"), str) or not isinstance(
        best.get("config"), dict
    ):
        raise ZooError(
            f"{path}: not a best_config.json (a JSON object with a 'model' name and a "
            "'config' object)."
        )
    registry.config(best["model"], **best["config"])  # unknown model or fields fail here
    best.setdefault("fit", {})
    return best


@dataclasses.dataclass
class TuneResult:
    """What `tune` returns: the tuner, the best config (as written) and its path."""

    tuner: Any
    hypermodel: ZooHyperModel
    best: dict
    path: pathlib.Path
    table: str
