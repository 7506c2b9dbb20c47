"""`train`: train a zoo model on a dataset into a run directory, or resume one.

Resuming: `train` with an `out` that already holds a `config.json` but no
`summary.json` (a run that was killed) takes the saved config, restores the
weights, optimizer state and epoch of the last completed epoch (the backup is
written at the end of each epoch) and trains the remaining epochs. Options
given again must equal the saved ones (a conflict raises `ValueError`);
options left out are taken from `config.json`. `history.csv` drops the rows
of epochs that are trained again, so each epoch appears once.

Multi-worker training (`tf.distribute.MultiWorkerMirroredStrategy`): every
worker runs `train` with the same arguments; only the chief writes into
`out`, the other workers write into temporary folders (`zoo.distribute.worker_dir`)
and, when resuming, read the chief's backup (`out` must be on a shared file
system for that).
"""

import dataclasses
import datetime
import math
import pathlib
import shutil
import sys
import time
import warnings

import keras
import numpy as np

from zoo import datasets, distribute, files, plot, registry
from zoo.preparation import (
    check_data_fits,
    image_datasets,
    learn_tokenizers,
    load_data,
    model_config_for,
    translation_datasets,
)
from zoo.progress import say
from zoo.runs.callbacks import Backup, RunCallbacks
from zoo.runs.options import TrainingOptions, check_resume, resolve_mixed_precision
from zoo.runs.rundir import (
    FORMAT_VERSION,
    MONITOR,
    history_dict,
    load_tokenizers,
    read_config,
    read_config_file,
    read_history,
    tokenizer_dirs,
    versions,
)


class RunFinishedError(ValueError):
    """`train` was pointed at a run directory whose training already ended."""


@dataclasses.dataclass
class RunResult:
    """What `train` returns.

    Attributes:
        run_dir: the run directory (`pathlib.Path`).
        model: the trained `keras.Model` (weights of the last epoch).
        history: every epoch's logs so far, from `history.csv`, as
            `{"epoch": [...], "loss": [...], ...}` (a resumed run included).
        epochs: epochs completed in total.
        initial_epoch: the epoch this call started from (> 0 when resumed).
        stopped_by: None, `"max_steps"` or `"time_limit"`.
        train_seconds: time spent in `fit` by this call.
        summary: the content of `summary.json`.
        data: the loaded dataset (`TranslationData` or `ImageData`), test
            split included; `evaluate(..., data=result.data)` reuses it.
    """

    run_dir: pathlib.Path
    model: keras.Model
    history: dict
    epochs: int
    initial_epoch: int
    stopped_by: str | None
    train_seconds: float
    summary: dict
    data: object = None


def _default_out(name):
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return pathlib.Path("runs") / f"{name}-{stamp}"


def train(name, data=None, out=None, *, strategy=None, tpu=None, overrides=None,
          config_file=None, callbacks=None, verbose=None, quiet=False, **options):
    """Train the zoo model `name` on a dataset, writing a run directory.

    The model is built by `zoo.get(name, strategy=..., **config)` and
    compiled with its family's recipe; the data decides the vocabulary size
    (translation: WordPiece learned on the training pairs, at most the
    config's `vocabulary_size` tokens) or `image_size`, `channels` and
    `num_classes` (images). A share `val_ratio` of the training split is held
    out for validation (`val_loss` picks `best.keras`); the test split is not
    touched (that is `evaluate`'s).

    Args:
        name: a registry name (`zoo.list()`).
        data: dataset spec (`zoo.datasets.load`): `numbers`, `dates`,
            `tsv:PATH`, `digits`, `fashion-mnist`, `images:DIR`. May be left
            out when resuming.
        out: the run directory; default `runs/<name>-<date>-<time>`. If it
            holds an unfinished run, that run is resumed.
        strategy: `"default"`, `"mirrored"`, `"multiworker"`, `"tpu"`
            (`zoo.distribute.get_strategy`) or a `tf.distribute.Strategy`.
        tpu: the TPU for `strategy="tpu"`.
        overrides: config fields to change, e.g. `{"num_encoder_layers": 1}`.
        config_file: a JSON file of config fields (applied before `overrides`):
            a flat object, a run's `config.json` or `zoo tune`'s
            `best_config.json` (whose `fit.batch_size` is used unless
            `batch_size` is given).
        callbacks: extra Keras callbacks.
        verbose: `fit`'s verbosity; default a progress bar on a terminal,
            one line per epoch otherwise.
        quiet: print nothing but Keras' own output.
        **options: the fields of `TrainingOptions` (`zoo.runs.options`):
            `epochs` (default 10), `batch_size` (per replica; default 64 for
            translation, 128 for images; the global batch is `batch_size ×
            strategy.num_replicas_in_sync`), `max_steps`, `time_limit`
            (minutes, this call), `seed` (default 0: Python, NumPy,
            TensorFlow, Keras, the data and the splits), `val_ratio` (default
            0.05; 0 for none, then `best.keras` follows `loss`),
            `mixed_precision` (None: bfloat16 on TPU, else float32; `"auto"`,
            `"float16"`, `"bfloat16"`, `"float32"`), `jit` (the config's
            `jit_compile`), `separate_vocabularies`, and the dataset options
            `data_dir`, `train_size`, `test_size`, `test_ratio`, `test_path`.

    Returns:
        `RunResult`.

    Raises:
        ValueError: bad arguments, a dataset that does not fit the model, a
            resume with conflicting arguments, a finished run
            (`RunFinishedError`).
        FileNotFoundError: a missing data or config file.
    """
    # The strategy first: MultiWorkerMirroredStrategy must exist before any TF op runs.
    strategy_name = strategy if isinstance(strategy, str) or strategy is None else None
    strategy = distribute.get_strategy(strategy or "default", tpu=tpu)
    if strategy_name is None:
        strategy_name = type(strategy).__name__
    registry.entry(name)  # an unknown name fails here, before anything else
    run_dir = pathlib.Path(out) if out is not None else _default_out(name)
    user_overrides, options = _given(config_file, overrides, TrainingOptions(**options))
    saved = _saved_run(run_dir)
    if saved is not None:
        check_resume(saved, name, data, options, user_overrides)
        distribute.check_jit_compile(strategy, saved["model_config"].get("jit_compile", False))
        plan = _Plan(name, saved["data"]["spec"], dict(saved["training"]),
                     dict(saved["data"]["options"]), dict(saved.get("overrides", {})), saved)
    else:
        if options.weights is not None:  # the file's architecture and fine-tuning recipe
            from_file = registry.weights_overrides(name, options.weights, user_overrides)
            # The data decides the class count: a new head when it differs from the file's.
            user_overrides = {key: value for key, value in from_file.items()
                              if key != "num_classes" or key in user_overrides}
        _check_new_run(name, data, run_dir, strategy, user_overrides, options)
        plan = _Plan(name, data, options.training_section(), options.data_section(),
                     user_overrides)
        resolve_mixed_precision(plan.training["mixed_precision"], strategy)  # validate early
    policy = resolve_mixed_precision(plan.training["mixed_precision"], strategy)
    previous_policy = keras.config.dtype_policy().name
    write_dir = pathlib.Path(distribute.worker_dir(str(run_dir), strategy))
    try:
        if policy:
            keras.config.set_dtype_policy(policy)
        return _train(plan, run_dir, write_dir, strategy, strategy_name, callbacks, verbose, quiet)
    finally:
        keras.config.set_dtype_policy(previous_policy)
        distribute.cleanup_worker_dir(str(write_dir), strategy)


@dataclasses.dataclass
class _Plan:
    """What a call of `train` trains: new, or read back from `config.json` to resume."""

    name: str
    data_spec: str
    training: dict
    data_options: dict
    overrides: dict
    saved: dict = None


def _given(config_file, overrides, options):
    """The user's config overrides (`config_file`, then `overrides`) and the options,
    with `config_file`'s batch size when none is given."""
    user_overrides = {}
    if config_file is not None:
        file_overrides, fit_arguments = read_config_file(config_file)
        user_overrides.update(file_overrides)
        if options.batch_size is None and fit_arguments.get("batch_size") is not None:
            options = dataclasses.replace(options, batch_size=fit_arguments["batch_size"])
    user_overrides.update(overrides or {})
    return user_overrides, options


def _saved_run(run_dir):
    """The `config.json` of an unfinished run in `run_dir`, or None for a new run."""
    if not (run_dir / "config.json").is_file():
        return None
    saved = read_config(run_dir)
    if (run_dir / "summary.json").is_file():
        raise RunFinishedError(
            f"{run_dir} holds a finished run ({saved['model']} on {saved['data']['spec']}); "
            f"evaluate it with `zoo evaluate {run_dir}` or train into another --out"
        )
    return saved


def _check_new_run(name, data, run_dir, strategy, user_overrides, options):
    """Bad values of a new run fail here, before any work."""
    if data is None:
        raise ValueError(
            f"data is required (a new run); choose one of {', '.join(datasets.DATASETS)}"
        )
    # A run killed before writing config.json leaves at most tokenizer/: start over.
    # (On other workers the chief may be filling the folder already.)
    if distribute.is_chief(strategy) and run_dir.exists() and any(
        child.name != "tokenizer" for child in run_dir.iterdir()
    ):
        raise ValueError(
            f"--out {run_dir} exists, is not empty and holds no zoo run (no config.json); "
            "choose a new or empty folder"
        )
    check_data_fits(name, data)
    jit_override = {} if options.jit is None else {"jit_compile": bool(options.jit)}
    checked = registry.config(name, **{**user_overrides, **jit_override})
    distribute.check_jit_compile(strategy, getattr(checked, "jit_compile", False))


def _train(plan, run_dir, write_dir, strategy, strategy_name, callbacks, verbose, quiet):
    quiet = quiet or not distribute.is_chief(strategy)
    training = plan.training
    keras.utils.set_random_seed(training["seed"])
    base_config = (plan.saved["model_config"] if plan.saved
                   else dataclasses.asdict(registry.config(plan.name, **plan.overrides)))
    kind, data = load_data(plan.name, plan.data_spec, plan.data_options, base_config,
                           training["seed"], quiet)
    if training["batch_size"] is None:
        training["batch_size"] = 64 if kind == "translation" else 128
    global_batch = distribute.global_batch_size(training["batch_size"], strategy)
    tokenizers = _tokenizers(plan, kind, data, base_config, run_dir, quiet)
    train_data, val_data, num_train, num_val = _datasets(
        kind, data, tokenizers, base_config, global_batch, training)
    steps_per_epoch = math.ceil(num_train / global_batch)  # an upper bound with bucketing
    if plan.saved:
        model_config = dict(plan.saved["model_config"])
    else:
        model_config = model_config_for(plan.name, plan.overrides, kind, data, tokenizers, training,
                                     steps_per_epoch)
    # Pretrained weights at the start only: a resumed run restores its own.
    weights = None if plan.saved else training.get("weights")
    model = registry.get(plan.name, strategy=strategy, weights=weights, **model_config)
    if not plan.saved:
        _write_new_run(plan, write_dir, kind, data, tokenizers, model, model_config, {
            "strategy": strategy_name,
            "num_replicas": strategy.num_replicas_in_sync,
            "global_batch_size": global_batch,
            "dtype_policy": keras.config.dtype_policy().name,
        }, num_train, num_val)
    say(
        f"Training {plan.name} ({model.count_params():,} parameters) for {training['epochs']} "
        f"epochs, {num_train:,} examples ({num_val:,} for validation), global batch "
        f"{global_batch} on {strategy.num_replicas_in_sync} replica(s); run directory {run_dir}",
        quiet,
    )
    fitted = _fit(model, train_data, val_data, training, run_dir, write_dir, callbacks,
                  verbose, quiet)
    return _finish(plan.name, run_dir, write_dir, model, data, fitted, quiet)


def _tokenizers(plan, kind, data, base_config, run_dir, quiet):
    """Translation: the saved tokenizers when resuming, else newly learned ones."""
    if kind != "translation":
        return None
    if plan.saved:
        return load_tokenizers(run_dir, plan.saved)
    return learn_tokenizers(data.train_pairs, base_config,
                            plan.training["separate_vocabularies"], quiet,
                            kind=plan.training["tokenizer"])


def _datasets(kind, data, tokenizers, base_config, global_batch, training):
    """`(train, validation or None, num_train, num_validation)`, sharded by data."""
    if kind == "translation":
        train_data, val_data, num_train, num_val = translation_datasets(
            data.train_pairs, tokenizers[0], tokenizers[1], global_batch,
            base_config["max_length"], training["val_ratio"], training["seed"],
        )
    else:
        train_data, val_data, num_train, num_val = image_datasets(
            data.x_train, data.y_train, global_batch, training["val_ratio"], training["seed"]
        )
    if val_data is not None:
        val_data = distribute.shard_by_data(val_data)
    return distribute.shard_by_data(train_data), val_data, num_train, num_val


def _write_new_run(plan, write_dir, kind, data, tokenizers, model, model_config, placement,
                   num_train, num_val):
    """The tokenizers, then `config.json`: its presence marks a run that can be resumed."""
    if kind == "translation":
        separate = plan.training["separate_vocabularies"]
        source_dir, target_dir = tokenizer_dirs(write_dir, separate)
        tokenizers[0].save(source_dir)
        if separate:
            tokenizers[1].save(target_dir)
    files.write_json(write_dir / "config.json", {
        "format_version": FORMAT_VERSION,
        "model": plan.name,
        "family": registry.entry(plan.name).family,
        "kind": kind,
        "model_config": model_config,
        "overrides": plan.overrides,
        "data": {
            "spec": plan.data_spec,
            "options": plan.data_options,
            "num_train": num_train,
            "num_validation": num_val,
            "num_test": len(data.test_pairs) if kind == "translation" else len(data.x_test),
            "skipped": dict(getattr(data, "skipped", {}) or {}),
            "class_names": None if kind == "translation" else list(data.class_names),
        },
        "training": {**plan.training, **placement},
        "num_params": model.count_params(),
        "versions": versions(),
        "created": datetime.datetime.now().isoformat(timespec="seconds"),
        "command": sys.argv if sys.argv and sys.argv[0] else None,
    })


@dataclasses.dataclass
class _Fitted:
    history_path: pathlib.Path
    backup: Backup
    stopped_by: str | None
    train_seconds: float


def _fit(model, train_data, val_data, training, run_dir, write_dir, callbacks, verbose, quiet):
    history_path = write_dir / "history.csv"
    run_callbacks = RunCallbacks(training, run_dir, write_dir, history_path,
                                 has_validation=val_data is not None)
    if verbose is None:
        verbose = 1 if sys.stdout.isatty() else 2
    if quiet and verbose == 2:
        verbose = 0
    started = time.monotonic()
    with warnings.catch_warnings():
        # Bucketed datasets have no known length, so Keras warns at each first epoch end.
        warnings.filterwarnings("ignore", message="Your input ran out of data")
        model.fit(
            train_data,
            validation_data=val_data,
            epochs=training["epochs"],
            callbacks=run_callbacks.in_order() + list(callbacks or []),
            verbose=verbose,
            shuffle=False,  # the datasets shuffle themselves, seeded
        )
    return _Fitted(history_path, run_callbacks.backup, run_callbacks.stopped_by(),
                   time.monotonic() - started)


def _finish(name, run_dir, write_dir, model, data, fitted, quiet):
    """`curves.png` and `summary.json` (the run is finished), then the backup goes."""
    rows = read_history(fitted.history_path)
    # The last epoch's logs (from history.csv: also right when nothing was left to train).
    final = {key: value for key, value in (rows[-1] if rows else {}).items() if key != "epoch"}
    summary = {
        "completed": True,
        "epochs": len(rows),
        "resumed_from_epoch": fitted.backup.restored_epoch,
        "steps": fitted.backup.steps,
        "stopped_by": fitted.stopped_by,
        "train_seconds_this_call": round(fitted.train_seconds, 2),
        "final": {key: float(value) for key, value in final.items()},
        "finished": datetime.datetime.now().isoformat(timespec="seconds"),
    }
    best = [row.get(MONITOR, row.get("loss")) for row in rows]
    if best:
        summary["best_epoch"] = int(rows[int(np.nanargmin(best))]["epoch"])
    if rows:
        plot.training_curves(fitted.history_path, title=name, path=write_dir / "curves.png")
    files.write_json(write_dir / "summary.json", summary)
    shutil.rmtree(write_dir / "backup", ignore_errors=True)
    if not quiet:
        _print_training_summary(name, run_dir, summary, rows)
    return RunResult(
        run_dir=run_dir,
        model=model,
        history=history_dict(rows),
        epochs=len(rows),
        initial_epoch=fitted.backup.restored_epoch,
        stopped_by=fitted.stopped_by,
        train_seconds=fitted.train_seconds,
        summary=summary,
        data=data,
    )


def _print_training_summary(name, run_dir, summary, rows):
    final = summary["final"]
    final_metrics = ", ".join(
        f"{key} {value:.4g}" for key, value in final.items() if key != "learning_rate"
    )
    how = f" (stopped by {summary['stopped_by']})" if summary["stopped_by"] else ""
    resumed = (f", resumed from epoch {summary['resumed_from_epoch']}"
               if summary["resumed_from_epoch"] else "")
    print(f"\nTrained {name}: {summary['epochs']} epochs, {summary['steps']} steps in "
          f"{summary['train_seconds_this_call'] / 60:.1f} min{how}{resumed}")
    print(f"  final: {final_metrics}")
    print(f"  run directory: {run_dir} (config.json, checkpoints/, history.csv, curves.png, logs/)")
