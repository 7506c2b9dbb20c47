"""`tune`: a keras-tuner search over a zoo entry's space, resumable, with its results written."""

import contextlib
import json
import os
import pathlib

import keras_tuner
import tensorflow as tf

from keras_attention import backends
from keras_attention.checks import check_positive_int
from zoo import distribute, files, locks
from zoo.errors import ZooError
from zoo.tuning import faults
from zoo.tuning.hypermodel import hypermodel, is_data_function, is_dataset
from zoo.tuning.results import (
    BEST_CONFIG,
    TuneResult,
    best_config,
    completed_trials,
    results_table,
    write_best_config,
)
from zoo.tuning.space import SearchSpace

TUNERS = ("random", "hyperband", "bayesian")


_MAXIMISE = ("accuracy", "acc", "auc", "precision", "recall", "bleu", "f1", "exact_match")


_MINIMISE = ("loss", "error", "crossentropy", "perplexity", "mse", "mae")


def parse_objective(spec):
    """`"val_loss"` or `"val_masked_accuracy:max"` -> `keras_tuner.Objective`.

    The direction is inferred from the name (losses and errors are minimised,
    accuracies maximised) unless given after a colon.
    """
    if isinstance(spec, keras_tuner.Objective):
        return spec
    if not isinstance(spec, str) or not spec:
        raise ZooError(f"`objective` must be a metric name; received {spec!r}.")
    name, _, direction = spec.partition(":")
    if direction:
        if direction not in ("min", "max"):
            raise ZooError(
                f"The objective's direction must be 'min' or 'max'; received {spec!r}."
            )
    else:
        lowered = name.lower()
        if any(word in lowered for word in _MINIMISE):
            direction = "min"
        elif any(word in lowered for word in _MAXIMISE):
            direction = "max"
        else:
            raise ZooError(
                f"Cannot tell whether to minimise or maximise {name!r}: write "
                f"'{name}:min' or '{name}:max'."
            )
    return keras_tuner.Objective(name, direction)


def make_tuner(
    hypermodel,
    tuner="random",
    *,
    objective="val_loss",
    max_trials=10,
    directory="tuning",
    project_name=None,
    overwrite=False,
    strategy=None,
    seed=0,
    max_epochs=3,
    executions_per_trial=1,
    max_consecutive_failed_trials=3,
):
    """A keras-tuner tuner over `hypermodel`.

    Args:
        hypermodel: a `ZooHyperModel` (`zoo.hypermodel(...)`).
        tuner: `"random"`, `"hyperband"` or `"bayesian"`.
        objective: a metric name or `keras_tuner.Objective` (see `parse_objective`).
        max_trials: the number of trials (for Hyperband, a cap on its own count).
        directory, project_name: the project lives in `directory/project_name`
            (default project name: the model name).
        overwrite: start over instead of resuming an existing project.
        strategy: a `tf.distribute.Strategy` (or a name for
            `zoo.distribute.get_strategy`): models are built and trained in it.
        seed: the tuner's random seed.
        max_epochs: Hyperband's largest number of epochs per model.
        executions_per_trial: models trained (and averaged) per trial.
        max_consecutive_failed_trials: stop after this many failed trials in a row.
    """
    if tuner not in TUNERS:
        raise ZooError(f"`tuner` must be one of {TUNERS}; received tuner={tuner!r}.")
    check_positive_int("max_trials", max_trials)
    if isinstance(strategy, str):
        strategy = distribute.get_strategy(strategy)
    common = dict(
        objective=parse_objective(objective),
        seed=seed,
        directory=os.fspath(directory),
        project_name=project_name or hypermodel.model_name,
        overwrite=overwrite,
        distribution_strategy=strategy,
        executions_per_trial=executions_per_trial,
        max_consecutive_failed_trials=max_consecutive_failed_trials,
    )
    if tuner == "random":
        return keras_tuner.RandomSearch(hypermodel, max_trials=max_trials, **common)
    if tuner == "bayesian":
        return keras_tuner.BayesianOptimization(hypermodel, max_trials=max_trials, **common)
    result = keras_tuner.Hyperband(hypermodel, max_epochs=max_epochs, factor=3, **common)
    result.oracle.max_trials = max_trials  # Hyperband has no max_trials of its own
    return result


def _split_data(data):
    if isinstance(data, tuple):
        if len(data) != 2:
            raise ZooError(
                f"`data` as a tuple must be (x, y); received a tuple of {len(data)} items."
            )
        return data
    if is_dataset(data) or is_data_function(data):
        return data, None
    raise ZooError(
        "`data` must be (x, y) arrays, a function batch_size -> tf.data.Dataset or a batched "
        f"tf.data.Dataset; received {type(data).__name__}."
    )


def tune(
    name,
    data,
    *,
    validation_data=None,
    validation_split=None,
    tuner="random",
    max_trials=10,
    objective="val_loss",
    directory="tuning",
    project_name=None,
    strategy=None,
    epochs=1,
    steps_per_epoch=None,
    validation_steps=None,
    space=None,
    overwrite=False,
    seed=0,
    max_epochs=None,
    executions_per_trial=1,
    max_consecutive_failed_trials=3,
    callbacks=None,
    num_best=5,
    verbose=1,
    **fixed,
):
    """Search the hyperparameters of zoo entry `name`; write `directory/best_config.json`.

    Args:
        name: a registry name.
        data: `(x, y)` arrays (dicts of arrays for the sequence models), a
            function `batch_size -> tf.data.Dataset` of `(x, y)` batches, or a
            batched `tf.data.Dataset` (then the batch size is the dataset's).
        validation_data: same forms as `data`; needed by a `val_*` objective
            unless `validation_split` is given (arrays only).
        tuner: `"random"`, `"hyperband"` or `"bayesian"`.
        max_trials: trials in all, counting those of a resumed run.
        objective: a metric name, with `:min`/`:max` when it cannot be inferred.
        directory: the run directory (keras-tuner project in
            `directory/project_name`, `best_config.json` in `directory`).
        strategy: a `tf.distribute.Strategy` or a `zoo.distribute` name.
        epochs: epochs per trial (Hyperband: its `max_epochs` unless given).
        steps_per_epoch, validation_steps: passed to `fit`.
        space: search-space overrides (see `hypermodel`).
        overwrite: start over instead of resuming.
        seed, max_epochs, executions_per_trial, max_consecutive_failed_trials:
            see `make_tuner`.
        callbacks: Keras callbacks for every trial's `fit`.
        num_best: rows of the printed table.
        verbose: 0 silent, 1 keras-tuner's progress and the table.
        **fixed: config fields held constant, and `batch_size`.

    Returns:
        A `TuneResult`.
    """
    backends.require_tensorflow("zoo tune")
    x, y = _split_data(data)
    _check_tune_inputs(x, fixed, objective, validation_data, validation_split)
    model = hypermodel(name, space=space, **fixed)
    options = dict(objective=objective, max_trials=max_trials, directory=directory,
                   project_name=project_name, overwrite=overwrite, strategy=strategy, seed=seed,
                   max_epochs=max_epochs or epochs, executions_per_trial=executions_per_trial,
                   max_consecutive_failed_trials=max_consecutive_failed_trials)
    fit_kwargs = dict(epochs=epochs, callbacks=list(callbacks or []), verbose=verbose,
                      validation_data=validation_data, validation_split=validation_split,
                      steps_per_epoch=steps_per_epoch, validation_steps=validation_steps)
    chief = isinstance(strategy, str) or distribute.is_chief(strategy)
    with locks.hold(directory, "zoo tune") if chief else contextlib.nullcontext():
        return _search(name, model, tuner, (x, y), fit_kwargs, num_best, options)


def _search(name, model, tuner, data, fit_kwargs, num_best, options):
    """`tune` once its directory is this process's (`zoo.locks`): the search, resumed or new
    (`options`: `make_tuner`'s), and its results."""
    directory, verbose = options["directory"], fit_kwargs["verbose"]
    settings_path, settings = _check_same_search(
        pathlib.Path(directory) / (options["project_name"] or name), model, tuner,
        options["objective"], options["overwrite"])
    search = _resumed_tuner(settings_path, model, tuner, **options)
    if verbose:
        _print_space(name, model)
    files.write_json(settings_path, settings)  # after any overwrite
    with faults.guarded(search, directory):  # atomic state, a full disk fatal
        search.search(*data, **{key: value for key, value in fit_kwargs.items()
                               if value is not None or key in ("epochs", "verbose")})
    best = best_config(search, model, tuner)
    path = write_best_config(best, pathlib.Path(directory) / BEST_CONFIG)
    table = results_table(search, model, num_best)
    if verbose:
        done = len(completed_trials(search, len(search.oracle.trials)))
        print(f"\nBest of {done} completed trial(s) of {name} ({tuner} search):")
        print(table)
        print(f"\nBest config written to {path}")
    return TuneResult(search, model, best, path, table)


def _check_tune_inputs(x, fixed, objective, validation_data, validation_split):
    """Refuse a batch size for a batched dataset, and a validation objective without validation data."""
    if is_dataset(x):
        if fixed.setdefault("batch_size", None) is not None:  # the dataset's own batches
            raise ZooError(
                f"batch_size={fixed['batch_size']!r} cannot apply to an already batched "
                "tf.data.Dataset: leave batch_size out, or pass arrays or a function "
                "global_batch_size -> dataset."
            )
    if objective_requires_validation(objective) and validation_data is None and not validation_split:
        raise ZooError(
            f"The objective {objective!r} is a validation metric: pass validation_data "
            "(or validation_split with arrays)."
        )


def _resumed_tuner(settings_path, model, tuner, **options):
    """`make_tuner`, which resumes from keras-tuner's state (oracle.json, trial.json) if any."""
    try:
        return make_tuner(model, tuner, **options)
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, tf.errors.NotFoundError) as error:
        raise files.CorruptFileError(
            settings_path.parent, "keras-tuner's saved state does not load", error,
            hint="--overwrite starts the search over") from None


def _print_space(name, model):
    print(f"Search space of {name}:")
    print(model.search_space if isinstance(model.search_space, SearchSpace)
          else f"  the entry's function {getattr(model.search_space, '__name__', '')}")
    if model.fixed or model.fit_fixed:
        print(f"Fixed: {', '.join(f'{k}={v!r}' for k, v in {**model.fixed, **model.fit_fixed}.items())}")


def _check_same_search(project_dir, model, tuner, objective_spec, overwrite):
    """Refuse to resume a project that searched another space (keras-tuner would mix them).

    The settings of a search (model, fixed values, declared hyperparameters,
    tuner, objective) are written to `project_dir/zoo_search.json` when it
    starts; a later run with the same directory must have the same ones.

    Returns:
        `(path, settings)` for the caller to write once the tuner exists.
    """
    for folder in (project_dir.parent, project_dir):
        if folder.exists() and not folder.is_dir():
            raise NotADirectoryError(f"the search directory {folder} is a file, not a folder")
    hp = keras_tuner.HyperParameters()
    model.declare_hyperparameters(hp)
    target = parse_objective(objective_spec)
    settings = json.loads(json.dumps({
        "model": model.model_name,
        "fixed": {**model.fixed, **model.fit_fixed},
        "hyperparameters": hp.get_config()["space"],
        "tuner": tuner,
        "objective": [target.name, target.direction],
    }, default=str))
    path = pathlib.Path(project_dir) / "zoo_search.json"
    if path.is_file() and not overwrite:
        saved = files.read_json(path, dict)
        changed = sorted(k for k in settings if settings[k] != saved.get(k))
        if changed:
            raise ZooError(
                f"{project_dir} holds a search with other settings ({', '.join(changed)} "
                "differ), so it cannot be continued: pass the same model, fixed values, "
                "space, tuner and objective, overwrite=True (--overwrite) to start over, or "
                "another directory."
            )
    return path, settings


def objective_requires_validation(spec):
    name = spec.name if isinstance(spec, keras_tuner.Objective) else str(spec).partition(":")[0]
    return name.startswith("val_")
