"""`train`: train a zoo model on a dataset into a run directory, or resume one.

Fine-tuning a model imported from a folder (`weights`: a Hugging Face
Marian / OPUS-MT folder for the Transformer) keeps the folder's sizes and
tokenizers: see `zoo.runs.imported`.

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

import contextlib
import dataclasses
import datetime
import math
import pathlib

import keras

from zoo import datasets, distribute, locks, registry
from zoo.datasets.preparation import (
    check_data_fits,
    image_datasets,
    learn_tokenizers,
    load_data,
    model_config_for,
    translation_datasets,
)
from zoo.errors import ZooError
from zoo.progress import say
from zoo.runs import budget, imported, pacing, placing, short_budget
from zoo.runs.callbacks import has_backup
from zoo.runs.fitting import finish, fit
from zoo.runs.options import TrainingOptions, check_resume, resolve_mixed_precision
from zoo.runs.rundir import (
    load_tokenizers,
    read_config,
    read_config_file,
    write_new_run,
)
from zoo.text import tokenizers
from zoo.text.special import special_ids


class RunFinishedError(ZooError):
    """`train` was pointed at a run directory whose training already ended."""


def _default_out(name):
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return pathlib.Path("runs") / f"{name}-{stamp}"


def train(name, data=None, out=None, *, strategy=None, tpu=None, processes=None,
          overrides=None, config_file=None, callbacks=None, verbose=None, quiet=False,
          **options):
    """Train the zoo model `name` on a dataset, writing a run directory.

    The model is built by `zoo.get(name, strategy=..., **config)` and
    compiled with its family's recipe; the data decides the vocabulary size
    (translation: SentencePiece or WordPiece learned on the training pairs,
    at most the config's `vocabulary_size` tokens) or `image_size`,
    `channels` and `num_classes` (images). With `weights` a Marian folder,
    the folder decides the sizes and the tokenizers (`zoo.runs.imported`).
    A share `val_ratio` of the training split is held out for validation
    (`val_loss` picks `best.keras`); the test split is not touched (that is
    `evaluate`'s).

    Args:
        name: a registry name (`zoo.list()`).
        data: dataset spec (`zoo.datasets.load`): `numbers`, `dates`,
            `tsv:PATH`, `digits`, `fashion-mnist`, `images:DIR`. May be left
            out when resuming.
        out: the run directory; default `runs/<name>-<date>-<time>`. If it
            holds an unfinished run, that run is resumed.
        strategy: `"default"`, `"mirrored"`, `"multiworker"`, `"tpu"`
            (`zoo.distribute.get_strategy`) or a `tf.distribute.Strategy`; on JAX
            `"default"`, `"mirrored"` (`keras.distribution.DataParallel` over the
            local devices) or `"multiworker"` (over a job of several processes, one call
            each; process 0 writes `out`; `zoo.distribute.place`).
        tpu: the TPU for `strategy="tpu"`.
        processes: on JAX with `"multiworker"`, a `zoo.distribute.Processes`; default:
            Keras's `KERAS_DISTRIBUTION_*` variables, else JAX's cluster detection.
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
            `epochs` (default 10; with `max_steps` or `time_limit`, as many as
            the budget allows), `batch_size` (per replica; default 64 for
            translation, 128 for images; the global batch is `batch_size ×
            strategy.num_replicas_in_sync`), `batch_tokens` (translation: batches
            of at most this many tokens per replica instead), `max_steps`, `time_limit`
            (minutes of training in total: a resumed run trains what is left; a
            short budget trains a Transformer on batches of 1,024 tokens without
            dropout, with a 30% warm-up to the paper's peak rate, unless the
            user chose otherwise, `zoo.runs.short_budget`),
            `schedule` (default "auto": with `max_steps` or `time_limit`, a warm-up
            and a linear decay to zero when the budget ends, `zoo.runs.budget`;
            else the family's own), `steps_per_epoch` (default: one pass, or about
            5 minutes of steps when a pass is longer, `zoo.runs.interval`),
            `average_checkpoints` (with a budget: default 5 snapshots averaged into
            `checkpoints/average.keras`, `zoo.runs.averaging`), `seed` (default 0: Python, NumPy,
            TensorFlow, Keras, the batch order and the validation split), `val_ratio` (default
            0.05; 0 for none, then `best.keras` follows `loss`),
            `mixed_precision` (None: bfloat16 on TPU, else float32; `"auto"`,
            `"float16"`, `"bfloat16"`, `"float32"`), `jit` (the config's
            `jit_compile`), `separate_vocabularies`, `tokenizer`, `weights`
            (a checkpoint or folder to start from), and the dataset options
            `data_dir`, `train_size`, `test_size`, `test_ratio`, `test_path`,
            `data_seed` (default 0: the split and generated pairs, whatever
            `seed` is).

    Returns:
        `RunResult`.

    Raises:
        ValueError: bad arguments, a dataset that does not fit the model, a
            resume with conflicting arguments, a finished run
            (`RunFinishedError`).
        FileNotFoundError: a missing data or config file.
    """
    run_dir = pathlib.Path(out) if out is not None else _default_out(name)
    # The strategy first: MultiWorkerMirroredStrategy must exist before any TF op runs.
    placement = placing.place(name, run_dir, strategy, tpu, processes,
                              (config_file, overrides, options))
    strategy = placement.strategy  # tf.distribute's; None on other backends
    registry.entry(name)  # an unknown name fails here, before anything else
    # One writer per run directory (`zoo.locks`): the chief's, on a cluster.
    with (locks.hold(run_dir, "zoo train") if distribute.is_chief(strategy)
          else contextlib.nullcontext()):
        return _train_locked(name, data, run_dir, placement, config_file, overrides, options,
                             callbacks, verbose, quiet)


def _train_locked(name, data, run_dir, placement, config_file, overrides, options, callbacks,
                  verbose, quiet):
    """`train` once the run directory is this process's: resumed or new, then trained."""
    strategy = placement.strategy
    user_overrides, options = _given(config_file, overrides, TrainingOptions(**options))
    saved = _saved_run(run_dir)
    if saved is not None:
        check_resume(saved, name, data, options, user_overrides)
        distribute.check_jit_compile(strategy, saved["model_config"].get("jit_compile", False))
        plan = _Plan(name, saved["data"]["spec"], dict(saved["training"]),
                     dict(saved["data"]["options"]), dict(saved.get("overrides", {})), saved)
    else:
        plan = _new_plan(name, data, run_dir, strategy, user_overrides, options)
        resolve_mixed_precision(plan.training["mixed_precision"], strategy)  # validate early
    policy = resolve_mixed_precision(plan.training["mixed_precision"], strategy)
    previous_policy = keras.config.dtype_policy().name
    write_dir = pathlib.Path(distribute.worker_dir(str(run_dir), strategy))
    try:
        if policy:
            keras.config.set_dtype_policy(policy)
        with placement.active():  # JAX: its distribution, for the build and the fit
            return _train(plan, run_dir, write_dir, placement, callbacks, verbose, quiet)
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
    budget_defaults: short_budget.ShortBudgetDefaults | None = None

    @property
    def model_overrides(self):
        """The config fields a new run's model is built with: a short budget's defaults,
        then the user's overrides."""
        chosen = self.budget_defaults.overrides if self.budget_defaults else {}
        return {**chosen, **self.overrides}

    @property
    def imported_from(self):
        """The folder a new run imports its model and tokenizers from, else None."""
        if self.saved is None and self.training["tokenizer"] == tokenizers.IMPORTED:
            return self.training["weights"]
        return None


def _how_long(training):
    """The first line's "for 10 epochs", or the budget that alone ends the run."""
    if training["epochs"] is not None:
        return f"for {training['epochs']} epochs"
    limits = [f"{training['max_steps']:,} steps" if training.get("max_steps") else None,
              f"{training['time_limit']:g} minutes" if training.get("time_limit") else None]
    return "for " + " or ".join(limit for limit in limits if limit)


def _new_plan(name, data, run_dir, strategy, user_overrides, options):
    """What a new run trains: checked, with the overrides and options its weights imply."""
    fine_tuning = imported.is_imported(name, options.weights)  # the folder's sizes, tokenizers
    imported.check_options(options, fine_tuning)
    if not fine_tuning and options.weights is not None:  # the file's architecture and recipe
        from_file = registry.weights_overrides(name, options.weights, user_overrides)
        # The data decides the class count: a new head when it differs from the file's.
        user_overrides = {key: value for key, value in from_file.items()
                          if key != "num_classes" or key in user_overrides}
    _check_new_run(name, data, run_dir, strategy, user_overrides, options,
                   options.weights if fine_tuning else None)
    training = options.training_section()
    if options.epochs is None and (training["time_limit"] or training["max_steps"]):
        training["epochs"] = None  # as many as the budget allows (`interval.keras_epochs`)
    chosen = short_budget.choose(registry.entry(name).family, training, user_overrides,
                                 fine_tuning)
    if chosen is not None and chosen.batch_tokens is not None:
        training["batch_tokens"] = chosen.batch_tokens
    if chosen is not None and chosen.warmup_ratio is not None:
        training["warmup_ratio"] = chosen.warmup_ratio
    return _Plan(name, data, imported.training_section(training) if fine_tuning else training,
                 options.data_section(), user_overrides, budget_defaults=chosen)


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


def _check_new_run(name, data, run_dir, strategy, user_overrides, options, folder=None):
    """Bad values of a new run fail here, before any work (`folder`: an imported model's)."""
    if data is None:
        raise ZooError(
            f"data is required (a new run); choose one of {', '.join(datasets.DATASETS)}"
        )
    # A run killed before writing config.json leaves at most tokenizer/ (and the lock
    # this process holds): start over. (On other workers the chief may be filling it.)
    if distribute.is_chief(strategy) and run_dir.exists() and any(
        child.name not in ("tokenizer", locks.LOCK_NAME) for child in run_dir.iterdir()
    ):
        raise ZooError(
            f"--out {run_dir} exists, is not empty and holds no zoo run (no config.json); "
            "choose a new or empty folder"
        )
    check_data_fits(name, data)
    budget.check_options(options.training_section())  # a schedule that needs a budget
    jit_override = {} if options.jit is None else {"jit_compile": bool(options.jit)}
    checked = registry.config(name, weights=folder, **{**user_overrides, **jit_override})
    distribute.check_jit_compile(strategy, getattr(checked, "jit_compile", False))


def _train(plan, run_dir, write_dir, placement, callbacks, verbose, quiet):
    strategy = placement.strategy
    quiet = quiet or not distribute.is_chief(strategy)
    training = plan.training
    keras.utils.set_random_seed(training["seed"])
    base_config = (plan.saved["model_config"] if plan.saved else dataclasses.asdict(
        registry.config(plan.name, weights=plan.imported_from, **plan.model_overrides)))
    kind, data = load_data(plan.name, plan.data_spec, plan.data_options, base_config,
                           training["seed"], quiet)
    if training["batch_size"] is None:
        training["batch_size"] = 64 if kind == "translation" else 128
    global_batch = distribute.global_batch_size(training["batch_size"], placement)
    global_tokens = (None if training.get("batch_tokens") is None
                     else distribute.global_batch_size(training["batch_tokens"], placement))
    tokenizer_pair = _tokenizers(plan, kind, data, base_config, run_dir, quiet)
    train_data, val_data, num_train, num_val = _datasets(
        kind, data, tokenizer_pair, base_config, global_batch, global_tokens, training, placement)
    steps_per_epoch = math.ceil(num_train / global_batch)  # an upper bound with bucketing
    if plan.saved:
        model_config = dict(plan.saved["model_config"])
    else:
        model_config = model_config_for(plan.name, plan.model_overrides, kind, data,
                                        tokenizer_pair, training, steps_per_epoch,
                                        weights=plan.imported_from)
    # Pretrained weights at the start: a resumed run restores its own from the backup (none
    # yet if it was killed before its first epoch ended: then it starts from them again).
    weights = None if plan.saved and has_backup(run_dir) else training.get("weights")
    model = registry.get(plan.name, strategy=strategy, weights=weights, **model_config)
    counts = pacing.data_counts(kind, data, tokenizer_pair, base_config.get("max_length"),
                                global_batch, global_tokens, training, num_train,
                                copy=base_config.get("copy", False))
    pace = pacing.prepare(model, training, model_config, plan.saved, run_dir, placement, counts)
    if not plan.saved:
        where = {"backend": keras.backend.backend(), "strategy": placement.name,
                 "num_replicas": placement.num_replicas_in_sync, "global_batch_size": global_batch,
                 "dtype_policy": keras.config.dtype_policy().name}
        write_new_run(write_dir, {**_run_config(plan, kind, data, model, model_config, where,
                                                num_train, num_val), **pace.config},
                      tokenizer_pair)
    say(
        f"Training {plan.name} ({model.count_params():,} parameters) "
        f"{_how_long(training)}, {num_train:,} examples ({num_val:,} for validation), global batch "
        f"{global_batch if global_tokens is None else f'{global_tokens} tokens'} on "
        f"{placement.num_replicas_in_sync} replica(s); run directory {run_dir}",
        quiet,
    )
    if plan.budget_defaults is not None:
        say(f"  {plan.budget_defaults.describe()}", quiet)
    for line in pace.lines:
        say(f"  {line}", quiet)
    fitted = fit(model, train_data, val_data, training, run_dir, write_dir, callbacks,
                 verbose, quiet, pace=pace)
    return finish(plan.name, run_dir, write_dir, model, data, fitted, quiet)


def _tokenizers(plan, kind, data, base_config, run_dir, quiet):
    """Translation: the saved tokenizers when resuming, an imported model's own, else
    newly learned ones."""
    if kind != "translation":
        return None
    if plan.saved:
        return load_tokenizers(run_dir, plan.saved)
    if plan.imported_from is not None:
        say(f"Using the tokenizers of {plan.imported_from} (source.spm, target.spm, vocab.json)",
            quiet)
        return imported.folder_tokenizers(plan.name, plan.imported_from)
    return learn_tokenizers(data.train_pairs, base_config,
                            plan.training["separate_vocabularies"], quiet,
                            kind=plan.training["tokenizer"])


def _datasets(kind, data, tokenizer_pair, base_config, global_batch, global_tokens, training,
              placement):
    """`(train, validation or None, num_train, num_validation)`, sharded by data (and split
    evenly over a distribution's devices: `zoo.distribute.fit_data`)."""
    if kind == "translation":
        train_data, val_data, num_train, num_val = translation_datasets(
            data.train_pairs, tokenizer_pair[0], tokenizer_pair[1], global_batch,
            base_config["max_length"], training["val_ratio"], training["seed"], global_tokens,
            copy=base_config.get("copy", False),
        )
    elif global_tokens is not None:
        raise ZooError("batch_tokens is for translation runs; image runs take batch_size")
    else:
        train_data, val_data, num_train, num_val = image_datasets(
            data.x_train, data.y_train, global_batch, training["val_ratio"], training["seed"]
        )
    pad_id = special_ids(tokenizer_pair[1])["pad"] if kind == "translation" else None
    if val_data is not None:
        val_data = distribute.fit_data(val_data, placement, pad_id)
    return distribute.fit_data(train_data, placement, pad_id), val_data, num_train, num_val


def _run_config(plan, kind, data, model, model_config, placement, num_train, num_val):
    """`config.json` of a new run (`write_new_run` adds the versions and the date)."""
    translation = kind == "translation"
    return {
        "model": plan.name,
        "family": registry.entry(plan.name).family,
        "kind": kind,
        "model_config": model_config,
        "overrides": plan.overrides,
        "short_budget": plan.budget_defaults.as_config() if plan.budget_defaults else None,
        "data": {
            "spec": plan.data_spec,
            "options": plan.data_options,
            "num_train": num_train,
            "num_validation": num_val,
            "num_test": len(data.test_pairs) if translation else len(data.x_test),
            "skipped": dict(getattr(data, "skipped", {}) or {}),
            "class_names": None if translation else list(data.class_names),
        },
        "training": {**plan.training, **placement},
        "num_params": model.count_params(),
    }
