"""Training runs: the Python API behind `zoo train / evaluate / export / predict`.

    from zoo import train
    result = train.train("transformer-tiny", "numbers", out="runs/tiny", epochs=10)
    metrics = train.evaluate("runs/tiny")                 # exact match + BLEU, greedy and beam
    version_dir = train.export_run("runs/tiny")           # saved_models/transformer-tiny/<version>
    train.predict("runs/tiny", ["dreihundertvierundzwanzig"])

A run directory holds everything about one training run:

    config.json            the model's full config, the data spec, the training arguments,
                           the seed and the library versions (written once, at the start)
    tokenizer/             the shared WordPiece vocabulary (`zoo.text`), or
    tokenizer/source/, tokenizer/target/   with `separate_vocabularies=True`
    checkpoints/last.keras the model after the last completed epoch
    checkpoints/best.keras the model of the epoch with the lowest `val_loss`
    backup/                `keras.callbacks.BackupAndRestore` state (gone once training ends)
    logs/                  TensorBoard (`tensorboard --logdir RUN_DIR/logs`)
    history.csv            one row per epoch (epoch counted from 0, as `CSVLogger`)
    curves.png             loss and metrics per epoch (`zoo.plot.training_curves`)
    summary.json           written when training ends: epochs, time, final metrics
    metrics.json           written by `evaluate`

Resuming: `train` with an `out` that already holds a `config.json` but no
`summary.json` (a run that was killed) takes the saved config, restores the
weights, optimizer state and epoch of the last completed epoch (the backup is
written at the end of each epoch) and trains the remaining epochs. Arguments
given again must equal the saved ones (a conflict raises `ValueError`);
arguments left out are taken from `config.json`. Every file is replaced
atomically (written beside, then renamed), so a kill at any moment leaves the
previous complete version; `history.csv` drops the rows of epochs that are
trained again, so each epoch appears once.

Multi-worker training (`tf.distribute.MultiWorkerMirroredStrategy`): every
worker runs `train` with the same arguments; only the chief writes into
`out`, the other workers write into temporary folders (`zoo.distribute.worker_dir`)
and, when resuming, read the chief's backup (`out` must be on a shared file
system for that).
"""

import contextlib
import csv
import dataclasses
import datetime
import io
import json
import math
import os
import pathlib
import platform
import shutil
import sys
import tempfile
import time
import warnings

import keras
import numpy as np
import tensorflow as tf

import zoo
from zoo import datasets, decode, distribute, metrics, pipeline, text

FORMAT_VERSION = 1
TRANSLATION_FAMILIES = ("transformer", "seq2seq")
IMAGE_FAMILIES = ("vit",)
BUCKETS = (8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)
MONITOR = "val_loss"

# The training arguments, their defaults and how they are checked. `None` in a
# call means "not given": the saved value when resuming, else the default.
DEFAULTS = {
    "epochs": 10,
    "batch_size": None,  # per replica; 64 for translation, 128 for images
    "max_steps": None,
    "time_limit": None,  # minutes
    "seed": 0,
    "val_ratio": 0.05,
    "mixed_precision": None,
    "jit": None,
    "separate_vocabularies": False,
}
DATA_OPTIONS = ("data_dir", "train_size", "test_size", "test_ratio", "test_path")


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


@dataclasses.dataclass
class Run:
    """A trained run loaded back by `load_run`.

    Attributes:
        run_dir: the run directory.
        config: `config.json` as a dict.
        model: the `keras.Model` of the chosen checkpoint (not compiled).
        kind: `"translation"` or `"image"`.
        source_tokenizer, target_tokenizer: `zoo.text.WordPieceTokenizer`s
            (the same object when the vocabulary is shared); None for images.
        class_names: image class names; None for translation.
        checkpoint: the checkpoint file loaded.
    """

    run_dir: pathlib.Path
    config: dict
    model: keras.Model
    kind: str
    source_tokenizer: object = None
    target_tokenizer: object = None
    class_names: list = None
    checkpoint: pathlib.Path = None

    @property
    def name(self):
        return self.config["model"]

    @property
    def max_length(self):
        return self.config["model_config"].get("max_length")


# === Small helpers ===


def _say(message, quiet=False):
    if not quiet:
        print(message, flush=True)


def _atomic_write_text(path, content):
    """Write `content` to `path` via a temporary file in the same folder and a rename."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as file:
            file.write(content)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _atomic_write_json(path, data):
    _atomic_write_text(path, json.dumps(data, indent=2, default=_json_default) + "\n")


def _json_default(value):
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, pathlib.Path):
        return str(value)
    if isinstance(value, (tuple, set)):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _save_model_atomically(model, path):
    """`model.save(path)` through a temporary `.keras` file and a rename."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.stem}.tmp.keras")
    model.save(temporary)
    os.replace(temporary, path)


def read_history(path):
    """`history.csv` -> list of row dicts with float values (`epoch` as int)."""
    path = pathlib.Path(path)
    if not path.is_file():
        return []
    rows = []
    with path.open(newline="", encoding="utf-8") as file:
        for row in csv.DictReader(file):
            parsed = {}
            for key, value in row.items():
                try:
                    parsed[key] = float(value)
                except (TypeError, ValueError):
                    parsed[key] = float("nan")
            parsed["epoch"] = int(parsed["epoch"])
            rows.append(parsed)
    return rows


def _write_history(path, rows):
    keys = []
    for row in rows:
        keys += [key for key in row if key not in keys]
    keys = ["epoch"] + sorted(key for key in keys if key != "epoch")
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=keys, restval="NA", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(row)
    _atomic_write_text(path, buffer.getvalue())


def _history_dict(rows):
    keys = []
    for row in rows:
        keys += [key for key in row if key not in keys]
    return {key: [row.get(key, float("nan")) for row in rows] for key in keys}


def _versions():
    import importlib.metadata

    def version(package):
        try:
            return importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            return None

    return {
        "python": platform.python_version(),
        "tensorflow": tf.__version__,
        "keras": keras.__version__,
        "tensorflow-text": version("tensorflow-text"),
        "keras-attention": version("keras-attention"),
    }


# === Callbacks ===


class HistoryCSV(keras.callbacks.Callback):
    """`history.csv`, one row per epoch, that stays right across restarts.

    Like `keras.callbacks.CSVLogger(append=True)`, but the file is rewritten
    atomically at each epoch end, and the rows of epochs at or after the first
    epoch of this `fit` (epochs about to be trained again after a restart)
    are dropped first, so no epoch is listed twice.

    Args:
        path: the CSV file.
    """

    def __init__(self, path):
        super().__init__()
        self.path = pathlib.Path(path)
        self._rows = None

    def on_train_begin(self, logs=None):
        self._rows = None

    def on_epoch_begin(self, epoch, logs=None):
        if self._rows is None:
            self._rows = [row for row in read_history(self.path) if row["epoch"] < epoch]
            if self._rows or self.path.exists():
                _write_history(self.path, self._rows)

    def on_epoch_end(self, epoch, logs=None):
        if self._rows is None:
            self.on_epoch_begin(epoch)
        row = {"epoch": epoch}
        for key, value in (logs or {}).items():
            try:
                row[key] = float(value)
            except (TypeError, ValueError):
                continue
        self._rows = [r for r in self._rows if r["epoch"] < epoch] + [row]
        _write_history(self.path, self._rows)


class Checkpoints(keras.callbacks.Callback):
    """`last.keras` after every epoch and `best.keras` when `monitor` improves.

    Both are written atomically. After a restart the best value so far is
    read back from `history_path`, so `best.keras` is only replaced by a
    better epoch.

    Args:
        directory: where to write `last.keras` and `best.keras`.
        monitor: the logged value to minimise (falls back to `loss` when the
            logs have no `monitor`, e.g. without validation data).
        history_path: the run's `history.csv`.
    """

    def __init__(self, directory, monitor=MONITOR, history_path=None):
        super().__init__()
        self.directory = pathlib.Path(directory)
        self.monitor = monitor
        self.history_path = history_path
        self.best = None
        self.best_epoch = None
        self._started = False

    def on_train_begin(self, logs=None):
        self._started = False

    def on_epoch_begin(self, epoch, logs=None):
        if self._started:
            return
        self._started = True
        self.best, self.best_epoch = None, None
        if self.history_path is not None and (self.directory / "best.keras").exists():
            for row in read_history(self.history_path):
                value = row.get(self.monitor, row.get("loss"))
                if row["epoch"] < epoch and value is not None and np.isfinite(value):
                    if self.best is None or value < self.best:
                        self.best, self.best_epoch = value, row["epoch"]

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        last = self.directory / "last.keras"
        _save_model_atomically(self.model, last)
        value = logs.get(self.monitor, logs.get("loss"))
        if value is None:
            return
        value = float(value)
        if np.isfinite(value) and (self.best is None or value < self.best):
            self.best, self.best_epoch = value, epoch
            temporary = self.directory / ".best.tmp.keras"
            shutil.copyfile(last, temporary)
            os.replace(temporary, self.directory / "best.keras")


class Backup(keras.callbacks.BackupAndRestore):
    """`keras.callbacks.BackupAndRestore` whose backup cannot be half written.

    Each epoch's weights (model and optimizer) go to a new file
    `epoch-<n>.weights.h5`; then `training_metadata.json`, which names that
    file, is replaced atomically; then older weight files are removed. A kill
    at any moment leaves a consistent (weights, epoch) pair. On multi-worker
    runs the chief's backup (`read_dir`) is what every worker restores from.

    Args:
        backup_dir: where this process writes its backup.
        read_dir: where to restore from (default `backup_dir`).
        delete_checkpoint: remove the backup when `fit` ends (`train` removes
            it itself, only once `summary.json` is written).
    """

    def __init__(self, backup_dir, read_dir=None, delete_checkpoint=True):
        super().__init__(backup_dir, save_freq="epoch", delete_checkpoint=delete_checkpoint)
        self.read_dir = pathlib.Path(read_dir or backup_dir)
        self.restored_epoch = 0
        self.steps = 0  # training steps taken in total, restored with the backup

    def on_train_begin(self, logs=None):
        self._load_model()

    def on_train_batch_end(self, batch, logs=None):
        # Counted here rather than read from `optimizer.iterations`, which Keras also
        # advances on the empty step that ends an epoch of unknown length.
        self.steps += 1

    def _load_model(self):
        metadata_path = self.read_dir / "training_metadata.json"
        self.restored_epoch, self.steps = 0, 0
        if not metadata_path.exists():
            return
        metadata = json.loads(metadata_path.read_text(encoding="utf-8"))
        weights = self.read_dir / metadata["weights"]
        if self.model.optimizer is not None and not self.model.optimizer.built:
            self.model.optimizer.build(self.model.trainable_variables)
        self.model.load_weights(weights)
        self.model._initial_epoch = metadata["epoch"]  # what fit() starts from, as in Keras
        self.restored_epoch = metadata["epoch"]
        self.steps = metadata.get("steps", 0)

    def _save_model(self):
        directory = pathlib.Path(self.backup_dir)
        directory.mkdir(parents=True, exist_ok=True)
        name = f"epoch-{self._current_epoch}.weights.h5"
        self.model.save_weights(directory / name, overwrite=True)
        _atomic_write_json(
            directory / "training_metadata.json",
            {"epoch": self._current_epoch, "batch": 0, "steps": self.steps, "weights": name},
        )
        for old in directory.glob("epoch-*.weights.h5"):
            if old.name != name:
                old.unlink(missing_ok=True)


class StopAfterSteps(keras.callbacks.Callback):
    """Stops training once `counter.steps` (a `Backup`, whose count survives a
    restart) reaches `max_steps`; place it after `counter` in the callbacks."""

    def __init__(self, max_steps, counter):
        super().__init__()
        self.max_steps = max_steps
        self.counter = counter
        self.stopped = False

    def on_train_batch_end(self, batch, logs=None):
        if self.counter.steps >= self.max_steps:
            self.model.stop_training = True
            self.stopped = True


class TimeLimit(keras.callbacks.Callback):
    """Stops training once `seconds` have passed in this `fit` (checked after every batch)."""

    def __init__(self, seconds):
        super().__init__()
        self.seconds = seconds
        self.start = None
        self.stopped = False

    def on_train_begin(self, logs=None):
        self.start = time.monotonic()

    def on_train_batch_end(self, batch, logs=None):
        if time.monotonic() - self.start > self.seconds:
            self.model.stop_training = True
            self.stopped = True


# === Data ===


def _family(name):
    """`"translation"` or `"image"`: what kind of data the model `name` takes."""
    entry = zoo.entry(name)
    family = entry.family
    if family in TRANSLATION_FAMILIES:
        return "translation"
    if family in IMAGE_FAMILIES:
        return "image"
    fields = {field.name for field in dataclasses.fields(entry.config)}
    if "image_size" in fields and "num_classes" in fields:
        return "image"
    if "vocabulary_size" in fields and "max_length" in fields:
        return "translation"
    raise ValueError(
        f"zoo train does not know what data {name!r} (family {family!r}) takes; its config "
        "needs vocabulary_size and max_length (translation) or image_size and num_classes (images)."
    )


def check_data_fits(name, spec):
    """Raise a clear `ValueError` when the dataset `spec` is not for model `name`'s family."""
    model_kind = _family(name)
    data_kind = datasets.dataset_kind(spec)
    if model_kind != data_kind:
        if model_kind == "image":
            hint = "use an image dataset: digits, fashion-mnist or images:DIR"
        else:
            hint = "use a translation dataset: numbers, dates or tsv:PATH"
        raise ValueError(
            f"dataset {spec!r} holds {data_kind} data but {name!r} "
            f"({zoo.entry(name).family}) is {'an image' if model_kind == 'image' else 'a translation'}"
            f" model; {hint}"
        )
    return model_kind


def load_data(name, spec, options=None, model_config=None, seed=0, quiet=False):
    """Load the dataset `spec` for model `name`, as `train` and `zoo tune` do.

    Args:
        name: a registry name (decides translation or images; a dataset of
            the other kind raises a `ValueError`, see `check_data_fits`).
        spec: `numbers`, `dates`, `tsv:PATH`, `digits`, `fashion-mnist` or
            `images:DIR` (`zoo.datasets.load`).
        options: dataset options, a dict with keys among `DATA_OPTIONS`
            (`data_dir`, `train_size`, `test_size`, `test_ratio`, `test_path`);
            missing keys are None.
        model_config: the model's config as a dict; `images:DIR` folders are
            resized to its `image_size` and read with its `channels` (1, 3 or 4).
        seed: the generation and split seed.
        quiet: print nothing (else the sizes and a first example, and a
            progress bar while pairs are generated or read when stdout is a
            terminal).

    Returns:
        `(kind, data)`: `"translation"` and a `zoo.datasets.TranslationData`
        (`train_pairs`, `test_pairs`: lists of `(source, target)` str pairs),
        or `"image"` and a `zoo.datasets.ImageData` (`x_train` uint8
        `(N, H, W, C)`, `y_train` int `(N,)`, the same for the test split,
        and `class_names`).
    """
    options = options or {}
    model_config = model_config or {}
    kind = check_data_fits(name, spec)
    started = time.monotonic()
    _say(f"Loading dataset {spec!r}...", quiet)
    kwargs = {key: options.get(key) for key in DATA_OPTIONS}
    kwargs["test_path"] = options.get("test_path")
    if kind == "image" and spec.startswith("images:"):
        kwargs["image_size"] = model_config.get("image_size")
        channels = model_config.get("channels", 3)
        kwargs["color_mode"] = {1: "grayscale", 3: "rgb", 4: "rgba"}.get(channels)
        if kwargs["color_mode"] is None:
            raise ValueError(f"images: datasets need channels 1, 3 or 4; received {channels}")
    data = datasets.load(spec, seed=seed, progress=not quiet and sys.stdout.isatty(), **kwargs)
    if kind == "translation":
        skipped = {reason: count for reason, count in data.skipped.items() if count}
        extra = f"; skipped lines: {skipped}" if skipped else ""
        _say(
            f"  {len(data.train_pairs):,} training pairs, {len(data.test_pairs):,} held out "
            f"({time.monotonic() - started:.1f} s){extra}",
            quiet,
        )
        if data.train_pairs:
            source, target = data.train_pairs[0]
            _say(f"  e.g. {source!r} -> {target!r}", quiet)
    else:
        _say(
            f"  {len(data.x_train):,} training images {data.x_train.shape[1:]}, "
            f"{len(data.x_test):,} test images, {len(data.class_names)} classes "
            f"({time.monotonic() - started:.1f} s)",
            quiet,
        )
    return kind, data


def split_validation(count, val_ratio, seed):
    """Indices of a seeded split of `count` examples into training and validation.

    The validation share is `round(val_ratio * count)`, at least 1 and at most
    `count - 1` when `val_ratio > 0` and `count > 1`; none when `val_ratio` is 0.
    The same `(count, val_ratio, seed)` always gives the same split (what
    `translation_datasets`, `image_datasets` and `zoo tune` rely on).

    Args:
        count: the number of examples.
        val_ratio: the validation share, in [0, 1).
        seed: the split's seed.

    Returns:
        `(train, validation)`: sorted int arrays of indices, `(count - V,)` and `(V,)`.
    """
    if not (isinstance(val_ratio, (int, float)) and 0 <= val_ratio < 1):
        raise ValueError(f"val_ratio must be in [0, 1); received val_ratio={val_ratio!r}")
    num_val = 0
    if val_ratio > 0 and count > 1:
        num_val = min(max(1, round(val_ratio * count)), count - 1)
    order = np.random.default_rng(seed + 7919).permutation(count)
    return np.sort(order[num_val:]), np.sort(order[:num_val])


def _buckets(max_length):
    boundaries = [b for b in BUCKETS if b < max_length]
    return boundaries or None


def translation_datasets(pairs, source_tokenizer, target_tokenizer, batch_size, max_length,
                         val_ratio, seed):
    """Teacher-forcing `(train, validation or None)` datasets and their sizes."""
    train_index, val_index = split_validation(len(pairs), val_ratio, seed)
    train_pairs = [pairs[i] for i in train_index]
    val_pairs = [pairs[i] for i in val_index]
    common = dict(max_length=max_length, bucket_boundaries=_buckets(max_length))
    train = pipeline.make_translation_dataset(
        train_pairs, source_tokenizer, target_tokenizer, batch_size, seed=seed, **common
    )
    val = None
    if val_pairs:
        val = pipeline.make_translation_dataset(
            val_pairs, source_tokenizer, target_tokenizer, batch_size, shuffle=False, **common
        )
    return train, val, len(train_pairs), len(val_pairs)


def image_datasets(x, y, batch_size, val_ratio, seed):
    """`(train, validation or None)` batches of uint8 images and int labels, and their sizes."""
    train_index, val_index = split_validation(len(x), val_ratio, seed)

    def make(index, shuffle):
        # Shuffle and batch the indices, then gather each batch with one op: the
        # same batches as shuffling the examples one by one (same seed, same
        # order), without a per-example pass through tf.data on the CPU that
        # also trains.
        images = tf.constant(x[index])
        labels = tf.constant(y[index].astype(np.int32))
        dataset = tf.data.Dataset.range(len(index))
        if shuffle:
            dataset = dataset.shuffle(len(index), seed=seed, reshuffle_each_iteration=True)
        dataset = dataset.batch(batch_size).map(
            lambda i: (tf.gather(images, i), tf.gather(labels, i)),
            num_parallel_calls=tf.data.AUTOTUNE, deterministic=True,
        )
        return dataset.prefetch(tf.data.AUTOTUNE)

    val = make(val_index, False) if len(val_index) else None
    return make(train_index, True), val, len(train_index), len(val_index)


def learn_tokenizers(pairs, model_config, separate=False, quiet=False):
    """WordPiece tokenizers learned on translation pairs: one shared, or one per side.

    Args:
        pairs: the training pairs, a list of `(source, target)` str.
        model_config: the model's config as a dict: the vocabularies have at
            most its `vocabulary_size` tokens (with `separate`: its
            `source_vocabulary_size` and `target_vocabulary_size` when set).
        separate: learn one vocabulary per side instead of a shared one.
        quiet: print nothing (else a start line, progress bars when stdout is
            a terminal, and the sizes).

    Returns:
        `(source, target)` `zoo.text.WordPieceTokenizer`s: the same object
        twice when the vocabulary is shared.
    """
    shared = model_config["vocabulary_size"]
    if separate:
        vocab_sizes = (model_config.get("source_vocabulary_size") or shared,
                       model_config.get("target_vocabulary_size") or shared)
    else:
        vocab_sizes = (shared, shared)
    started = time.monotonic()
    progress = not quiet and sys.stdout.isatty()
    if separate:
        _say(
            f"Learning WordPiece vocabularies (source at most {vocab_sizes[0]}, target at most "
            f"{vocab_sizes[1]} tokens) from {len(pairs):,} pairs...",
            quiet,
        )
        source = text.WordPieceTokenizer.from_corpus(
            [s for s, _ in pairs], vocab_sizes[0], progress=progress
        )
        target = text.WordPieceTokenizer.from_corpus(
            [t for _, t in pairs], vocab_sizes[1], progress=progress
        )
        _say(f"  {source.vocab_size} + {target.vocab_size} tokens "
             f"({time.monotonic() - started:.1f} s)", quiet)
        return source, target
    _say(
        f"Learning a shared WordPiece vocabulary of at most {vocab_sizes[0]} tokens "
        f"from {len(pairs):,} pairs...",
        quiet,
    )
    tokenizer = text.WordPieceTokenizer.from_corpus(
        [sentence for pair in pairs for sentence in pair], vocab_sizes[0], progress=progress
    )
    _say(f"  {tokenizer.vocab_size} tokens ({time.monotonic() - started:.1f} s)", quiet)
    return tokenizer, tokenizer


def _tokenizer_dirs(run_dir, separate):
    base = pathlib.Path(run_dir) / "tokenizer"
    return (base / "source", base / "target") if separate else (base, base)


def load_tokenizers(run_dir, config=None):
    """The `(source, target)` tokenizers saved in a run directory (one object if shared)."""
    config = config or read_config(run_dir)
    separate = bool(config["training"].get("separate_vocabularies"))
    source_dir, target_dir = _tokenizer_dirs(run_dir, separate)
    source = text.WordPieceTokenizer.load(source_dir)
    return source, (text.WordPieceTokenizer.load(target_dir) if separate else source)


# === Configuration and resuming ===


def read_config(run_dir):
    """`config.json` of a run directory, as a dict."""
    path = pathlib.Path(run_dir) / "config.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"{run_dir} is not a run directory: {path} not found (zoo train --out makes one)"
        )
    return json.loads(path.read_text(encoding="utf-8"))


def read_config_file(path):
    """Config fields from a JSON file: `(overrides, fit arguments)`.

    Accepts a flat `{field: value}` object, a run's `config.json` (its
    `model_config` and `training.batch_size`), or the `best_config.json` of
    `zoo tune` (its `config` and `fit`).
    """
    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"config file not found: {path}")
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"config file {path} is not valid JSON: {error}") from None
    if not isinstance(content, dict):
        raise ValueError(
            f"config file {path} must hold a JSON object of config fields; "
            f"received {type(content).__name__}"
        )
    fit = {}
    if isinstance(content.get("model_config"), dict):  # a run's config.json
        fit = {"batch_size": (content.get("training") or {}).get("batch_size")}
        content = content["model_config"]
    elif isinstance(content.get("config"), dict) and "model" in content:  # best_config.json
        fit = dict(content.get("fit") or {})
        content = content["config"]
    return content, {key: value for key, value in fit.items() if value is not None}


def _check_resume(saved, name, data, given):
    """Raise when an argument given again differs from the saved run's."""
    conflicts = []
    if name != saved["model"]:
        conflicts.append(f"model {name!r} (saved: {saved['model']!r})")
    if data is not None and data != saved["data"]["spec"]:
        conflicts.append(f"data {data!r} (saved: {saved['data']['spec']!r})")
    saved_values = {**saved["training"], **saved["data"]["options"],
                    "overrides": saved.get("overrides", {})}
    for key, value in given.items():
        if value is None or key == "strategy":
            continue
        if key == "overrides" and not value:
            continue
        if _normalise(value) != _normalise(saved_values.get(key)):
            conflicts.append(f"{key}={value!r} (saved: {saved_values.get(key)!r})")
    if conflicts:
        raise ValueError(
            "the run directory holds a run with other settings, so it cannot be resumed with: "
            + "; ".join(conflicts)
            + ". Leave those arguments out to resume with the saved ones, or choose another --out."
        )


def _normalise(value):
    return json.loads(json.dumps(value, default=_json_default))


def _resolve_mixed_precision(mixed_precision, strategy):
    """The dtype policy name for `mixed_precision`: None is the strategy's default
    (`mixed_bfloat16` on TPU, else float32), False or "float32" is float32."""
    if mixed_precision is None:
        return distribute.default_policy(strategy)
    if mixed_precision in (False, "float32", "none", "off"):
        return None
    if mixed_precision in (True, "auto"):
        if distribute.default_policy(strategy):
            return distribute.default_policy(strategy)
        return "mixed_float16" if tf.config.list_logical_devices("GPU") else "mixed_bfloat16"
    names = {"float16": "mixed_float16", "bfloat16": "mixed_bfloat16",
             "mixed_float16": "mixed_float16", "mixed_bfloat16": "mixed_bfloat16"}
    if mixed_precision not in names:
        raise ValueError(
            "mixed_precision must be one of auto, float16, bfloat16 (or mixed_float16, "
            f"mixed_bfloat16, float32); received mixed_precision={mixed_precision!r}"
        )
    return names[mixed_precision]


def config_from_data(config, kind, data, tokenizers=None, *, separate_vocabularies=False,
                     overrides=None, total_steps=None):
    """The config fields that the data dictates: fitting a model's config to its dataset.

    Translation: the vocabulary sizes of the learned tokenizers, as
    `vocabulary_size` (shared; `source_vocabulary_size` and
    `target_vocabulary_size` become None when the config has them) or as
    `source_vocabulary_size` and `target_vocabulary_size` (separate).
    Images: `image_size`, `channels` and `num_classes` from the training
    images `(N, H, W, C)` (square only) and the class names. With
    `total_steps`, a config's `decay_steps` (the learning-rate schedule's
    length) becomes `max(1, total_steps)` unless `overrides` sets it.

    `train` builds its model from `{**config, **config_from_data(...)}`;
    `zoo.tuning.load_data` holds these fields fixed during a search.

    Args:
        config: the model's config as a dict (registry defaults and the
            user's overrides): only the fields it has are returned.
        kind: `"translation"` or `"image"` (from `load_data`).
        data: the dataset from `load_data`.
        tokenizers: translation: the `(source, target)` tokenizers
            (`learn_tokenizers`).
        separate_vocabularies: translation: the tokenizers are one per side.
        overrides: the config fields the user set: an image field set to a
            value other than the data's raises a `ValueError`.
        total_steps: the training steps the schedule should last.

    Returns:
        dict of config fields.

    Raises:
        ValueError: images that are not square, or `overrides` that contradict
            the data.
    """
    overrides = overrides or {}
    if kind == "translation":
        if tokenizers is None:
            raise ValueError("tokenizers are required for translation data; see learn_tokenizers")
        source, target = tokenizers
        if separate_vocabularies:
            derived = {"source_vocabulary_size": source.vocab_size,
                       "target_vocabulary_size": target.vocab_size}
        else:
            derived = {"vocabulary_size": source.vocab_size}
            if "source_vocabulary_size" in config:
                derived.update(source_vocabulary_size=None, target_vocabulary_size=None)
    elif kind == "image":
        height, width, channels = data.x_train.shape[1:]
        if height != width:
            raise ValueError(f"the zoo's ViTs take square images; the data's are {height}x{width}")
        derived = {"image_size": int(height), "channels": int(channels),
                   "num_classes": len(data.class_names)}
        for key, value in derived.items():
            if key in overrides and overrides[key] != value:
                raise ValueError(
                    f"{key}={overrides[key]!r} does not fit the data, which has "
                    f"{key}={value!r}; leave it out (it is taken from the data)"
                )
    else:
        raise ValueError(f"kind must be 'translation' or 'image'; received kind={kind!r}")
    if total_steps is not None and "decay_steps" not in overrides:
        derived["decay_steps"] = max(1, int(total_steps))
    return {key: value for key, value in derived.items() if key in config}


def _model_config(name, overrides, kind, data, tokenizers, training, steps_per_epoch):
    """The full config dict: registry defaults < overrides < what the data dictates."""
    base = dataclasses.asdict(zoo.config(name, **overrides))
    total = training["epochs"] * steps_per_epoch
    if training["max_steps"]:
        total = min(total, training["max_steps"])
    base.update(config_from_data(
        base, kind, data, tokenizers, separate_vocabularies=training["separate_vocabularies"],
        overrides=overrides, total_steps=total,
    ))
    if training["jit"] is not None and "jit_compile" in base:
        base["jit_compile"] = bool(training["jit"])
    return base


def _default_out(name):
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return pathlib.Path("runs") / f"{name}-{stamp}"


# === Training ===


def train(
    name,
    data=None,
    out=None,
    *,
    epochs=None,
    batch_size=None,
    max_steps=None,
    time_limit=None,
    strategy=None,
    tpu=None,
    mixed_precision=None,
    jit=None,
    overrides=None,
    config_file=None,
    seed=None,
    val_ratio=None,
    separate_vocabularies=None,
    data_dir=None,
    train_size=None,
    test_size=None,
    test_ratio=None,
    test_path=None,
    callbacks=None,
    verbose=None,
    quiet=False,
):
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
        epochs: number of epochs (default 10).
        batch_size: examples per replica per step (default 64 for
            translation, 128 for images); the global batch is
            `batch_size × strategy.num_replicas_in_sync`.
        max_steps: stop after this many optimizer steps in total.
        time_limit: stop after this many minutes of training (this call).
        strategy: `"default"`, `"mirrored"`, `"multiworker"`, `"tpu"`
            (`zoo.distribute.get_strategy`) or a `tf.distribute.Strategy`.
        tpu: the TPU for `strategy="tpu"`.
        mixed_precision: None (bfloat16 on TPU, else float32), `"auto"`
            (bfloat16 on TPU and CPU, float16 on GPU), `"float16"`,
            `"bfloat16"` or `"float32"`.
        jit: set the config's `jit_compile` (XLA); None keeps the config's.
        overrides: config fields to change, e.g. `{"num_encoder_layers": 1}`.
        config_file: a JSON file of config fields (applied before `overrides`):
            a flat object, a run's `config.json` or `zoo tune`'s
            `best_config.json` (whose `fit.batch_size` is used unless
            `batch_size` is given).
        seed: seeds Python, NumPy, TensorFlow and Keras, the data and the
            splits (default 0). Two runs with the same arguments and seed on
            the same machine give the same weights.
        val_ratio: share of the training split held out for validation
            (default 0.05; 0 for none, then `best.keras` follows `loss`).
        separate_vocabularies: translation only: one vocabulary per side
            instead of a shared one.
        data_dir, train_size, test_size, test_ratio, test_path: dataset
            options (`zoo.datasets.load`).
        callbacks: extra Keras callbacks.
        verbose: `fit`'s verbosity; default a progress bar on a terminal,
            one line per epoch otherwise.
        quiet: print nothing but Keras' own output.

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
    chief = distribute.is_chief(strategy)
    if strategy_name is None:
        strategy_name = type(strategy).__name__

    zoo.entry(name)  # an unknown name fails here, before anything else
    run_dir = pathlib.Path(out) if out is not None else _default_out(name)
    config_path = run_dir / "config.json"
    user_overrides = {}
    if config_file is not None:
        file_overrides, fit_arguments = read_config_file(config_file)
        user_overrides.update(file_overrides)
        if batch_size is None:
            batch_size = fit_arguments.get("batch_size")
    user_overrides.update(overrides or {})
    given = {
        "epochs": epochs, "batch_size": batch_size, "max_steps": max_steps,
        "time_limit": time_limit, "seed": seed, "val_ratio": val_ratio,
        "mixed_precision": mixed_precision, "jit": jit,
        "separate_vocabularies": separate_vocabularies, "data_dir": data_dir,
        "train_size": train_size, "test_size": test_size, "test_ratio": test_ratio,
        "test_path": None if test_path is None else str(test_path),
        "overrides": user_overrides,
    }
    for key in ("epochs", "batch_size", "max_steps"):
        value = given[key]
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"{key} must be a positive integer; received {key}={value!r}")
    if time_limit is not None and not (isinstance(time_limit, (int, float)) and time_limit > 0):
        raise ValueError(f"time_limit must be a positive number of minutes; received {time_limit!r}")

    saved = None
    if config_path.is_file():
        saved = read_config(run_dir)
        if (run_dir / "summary.json").is_file():
            raise RunFinishedError(
                f"{run_dir} holds a finished run ({saved['model']} on {saved['data']['spec']}); "
                f"evaluate it with `zoo evaluate {run_dir}` or train into another --out"
            )
        _check_resume(saved, name, data, given)
        distribute.check_jit_compile(strategy, saved["model_config"].get("jit_compile", False))
        training = dict(saved["training"])
        data = saved["data"]["spec"]
        data_options = dict(saved["data"]["options"])
        user_overrides = dict(saved.get("overrides", {}))
    else:
        if data is None:
            raise ValueError(f"data is required (a new run); choose one of {', '.join(datasets.DATASETS)}")
        # A run killed before writing config.json leaves at most tokenizer/: start over.
        # (On other workers the chief may be filling the folder already.)
        if chief and run_dir.exists() and any(
            child.name != "tokenizer" for child in run_dir.iterdir()
        ):
            raise ValueError(
                f"--out {run_dir} exists, is not empty and holds no zoo run (no config.json); "
                "choose a new or empty folder"
            )
        check_data_fits(name, data)
        jit_override = {} if jit is None else {"jit_compile": bool(jit)}
        # Bad values fail before any work.
        checked = zoo.config(name, **{**user_overrides, **jit_override})
        distribute.check_jit_compile(strategy, getattr(checked, "jit_compile", False))
        training = {key: (given[key] if given.get(key) is not None else default)
                    for key, default in DEFAULTS.items()}
        data_options = {key: given[key] for key in DATA_OPTIONS}
        _resolve_mixed_precision(training["mixed_precision"], strategy)  # validate early

    policy = _resolve_mixed_precision(training["mixed_precision"], strategy)
    previous_policy = keras.config.dtype_policy().name
    write_dir = pathlib.Path(distribute.worker_dir(str(run_dir), strategy))
    try:
        if policy:
            keras.config.set_dtype_policy(policy)
        return _train(
            name, data, run_dir, write_dir, chief, strategy, strategy_name, training,
            data_options, user_overrides, saved, callbacks, verbose, quiet,
        )
    finally:
        keras.config.set_dtype_policy(previous_policy)
        distribute.cleanup_worker_dir(str(write_dir), strategy)


def _train(name, data_spec, run_dir, write_dir, chief, strategy, strategy_name, training,
           data_options, user_overrides, saved, callbacks, verbose, quiet):
    quiet = quiet or not chief
    seed = training["seed"]
    keras.utils.set_random_seed(seed)
    resuming = saved is not None
    base_config = saved["model_config"] if resuming else dict(
        dataclasses.asdict(zoo.config(name, **user_overrides))
    )
    kind, data = load_data(name, data_spec, data_options, base_config, seed, quiet)
    replicas = strategy.num_replicas_in_sync
    if training["batch_size"] is None:
        training["batch_size"] = 64 if kind == "translation" else 128
    global_batch = distribute.global_batch_size(training["batch_size"], strategy)

    # === Tokenizers (translation) ===
    tokenizers = None
    if kind == "translation":
        if resuming:
            tokenizers = load_tokenizers(run_dir, saved)
        else:
            tokenizers = learn_tokenizers(
                data.train_pairs, base_config, training["separate_vocabularies"], quiet
            )

    # === Datasets ===
    if kind == "translation":
        max_length = base_config["max_length"]
        train_data, val_data, num_train, num_val = translation_datasets(
            data.train_pairs, tokenizers[0], tokenizers[1], global_batch, max_length,
            training["val_ratio"], seed,
        )
    else:
        train_data, val_data, num_train, num_val = image_datasets(
            data.x_train, data.y_train, global_batch, training["val_ratio"], seed
        )
    steps_per_epoch = math.ceil(num_train / global_batch)  # an upper bound with bucketing
    train_data = distribute.shard_by_data(train_data)
    if val_data is not None:
        val_data = distribute.shard_by_data(val_data)

    # === Model ===
    if resuming:
        model_config = dict(saved["model_config"])
    else:
        model_config = _model_config(
            name, user_overrides, kind, data, tokenizers, training, steps_per_epoch
        )
    model = zoo.get(name, strategy=strategy, **model_config)

    if not resuming:
        if kind == "translation":
            separate = training["separate_vocabularies"]
            source_dir, target_dir = _tokenizer_dirs(write_dir, separate)
            tokenizers[0].save(source_dir)
            if separate:
                tokenizers[1].save(target_dir)
        # config.json last: its presence marks a run directory that can be resumed.
        config = {
            "format_version": FORMAT_VERSION,
            "model": name,
            "family": zoo.entry(name).family,
            "kind": kind,
            "model_config": model_config,
            "overrides": user_overrides,
            "data": {
                "spec": data_spec,
                "options": data_options,
                "num_train": num_train,
                "num_validation": num_val,
                "num_test": len(data.test_pairs) if kind == "translation" else len(data.x_test),
                "skipped": dict(getattr(data, "skipped", {}) or {}),
                "class_names": None if kind == "translation" else list(data.class_names),
            },
            "training": {
                **training,
                "strategy": strategy_name,
                "num_replicas": replicas,
                "global_batch_size": global_batch,
                "dtype_policy": keras.config.dtype_policy().name,
            },
            "num_params": model.count_params(),
            "versions": _versions(),
            "created": datetime.datetime.now().isoformat(timespec="seconds"),
            "command": sys.argv if sys.argv and sys.argv[0] else None,
        }
        _atomic_write_json(write_dir / "config.json", config)

    # === Callbacks: the order matters at each epoch end (history, checkpoints, then the
    # backup), so a kill between two of them makes the epoch run again, never skips it. ===
    history_path = write_dir / "history.csv"
    # The backup outlives fit() until summary.json is written: a kill in between then
    # resumes at the last epoch (nothing to train) instead of starting over.
    backup = Backup(write_dir / "backup", read_dir=run_dir / "backup", delete_checkpoint=False)
    stop_steps = StopAfterSteps(training["max_steps"], backup) if training["max_steps"] else None
    stop_time = TimeLimit(60.0 * training["time_limit"]) if training["time_limit"] else None
    callback_list = [
        HistoryCSV(history_path),
        Checkpoints(write_dir / "checkpoints", MONITOR if val_data is not None else "loss",
                    history_path),
        keras.callbacks.TensorBoard(str(write_dir / "logs"), write_graph=False),
        backup,
    ]
    callback_list += [c for c in (stop_steps, stop_time) if c is not None]
    callback_list += list(callbacks or [])

    if verbose is None:
        verbose = 1 if sys.stdout.isatty() else 2
    if quiet and verbose == 2:
        verbose = 0
    _say(
        f"Training {name} ({model.count_params():,} parameters) for {training['epochs']} epochs, "
        f"{num_train:,} examples ({num_val:,} for validation), global batch {global_batch} "
        f"on {replicas} replica(s); run directory {run_dir}",
        quiet,
    )
    started = time.monotonic()
    with warnings.catch_warnings():
        # Bucketed datasets have no known length, so Keras warns at each first epoch end.
        warnings.filterwarnings("ignore", message="Your input ran out of data")
        model.fit(
            train_data,
            validation_data=val_data,
            epochs=training["epochs"],
            callbacks=callback_list,
            verbose=verbose,
            shuffle=False,  # the datasets shuffle themselves, seeded
        )
    train_seconds = time.monotonic() - started

    rows = read_history(history_path)
    stopped_by = None
    if stop_steps is not None and stop_steps.stopped:
        stopped_by = "max_steps"
    elif stop_time is not None and stop_time.stopped:
        stopped_by = "time_limit"
    # The last epoch's logs (from history.csv: also right when nothing was left to train).
    final = {key: value for key, value in (rows[-1] if rows else {}).items() if key != "epoch"}
    summary = {
        "completed": True,
        "epochs": len(rows),
        "resumed_from_epoch": backup.restored_epoch,
        "steps": backup.steps,
        "stopped_by": stopped_by,
        "train_seconds_this_call": round(train_seconds, 2),
        "final": {key: float(value) for key, value in final.items()},
        "finished": datetime.datetime.now().isoformat(timespec="seconds"),
    }
    best = [row.get(MONITOR, row.get("loss")) for row in rows]
    if best:
        summary["best_epoch"] = int(rows[int(np.nanargmin(best))]["epoch"])
    if rows:
        _write_curves(history_path, write_dir / "curves.png", name)
    _atomic_write_json(write_dir / "summary.json", summary)
    shutil.rmtree(write_dir / "backup", ignore_errors=True)
    if not quiet:
        _print_training_summary(name, run_dir, summary, rows)
    return RunResult(
        run_dir=run_dir,
        model=model,
        history=_history_dict(rows),
        epochs=len(rows),
        initial_epoch=backup.restored_epoch,
        stopped_by=stopped_by,
        train_seconds=train_seconds,
        summary=summary,
        data=data,
    )


def _write_curves(history_path, path, title):
    from zoo import plot

    plot.training_curves(history_path, title=title, path=path)


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


# === Loading a run ===


def load_run(run_dir, checkpoint="best"):
    """A trained run: model (`checkpoints/<checkpoint>.keras`), tokenizers or class names, config.

    Args:
        run_dir: a directory written by `train`.
        checkpoint: `"best"` (falls back to `"last"` if there is no best) or
            `"last"`, or a path to a `.keras` file.

    Returns:
        `Run`.
    """
    run_dir = pathlib.Path(run_dir)
    config = read_config(run_dir)
    if checkpoint in ("best", "last"):
        path = run_dir / "checkpoints" / f"{checkpoint}.keras"
        if checkpoint == "best" and not path.is_file():
            path = run_dir / "checkpoints" / "last.keras"
    else:
        path = pathlib.Path(checkpoint)
    if not path.is_file():
        raise FileNotFoundError(
            f"no checkpoint {path} in {run_dir}: the run has not finished an epoch yet"
        )
    model = keras.saving.load_model(path, compile=False)
    run = Run(run_dir=run_dir, config=config, model=model, kind=config["kind"], checkpoint=path)
    if run.kind == "translation":
        run.source_tokenizer, run.target_tokenizer = load_tokenizers(run_dir, config)
    else:
        run.class_names = list(config["data"]["class_names"])
    return run


def _as_run(run_or_dir, checkpoint="best"):
    return run_or_dir if isinstance(run_or_dir, Run) else load_run(run_or_dir, checkpoint)


# === Translation ===


def encode_sources(tokenizer, sentences, max_length):
    """Sentences -> int32 `(B, S)` encoder input as in training: ids, `[END]`, 0-padding."""
    ids = tokenizer.tokenize(tf.constant(list(sentences), tf.string))[:, : max_length - 1]
    end = tf.fill([ids.nrows(), 1], tf.constant(text.END_ID, tf.int32))
    return tf.concat([tf.cast(ids, tf.int32), end], axis=1).to_tensor()  # (B, S)


def translate(run, sentences, beam_size=1, alpha=0.6, batch_size=128, max_length=None,
              progress=False):
    """Translations of `sentences` with a run's model, in order.

    Args:
        run: a `Run` (or a run directory).
        sentences: list of str.
        beam_size: 1 for greedy decoding, more for beam search
            (`zoo.decode.beam_search`, length penalty `alpha`).
        batch_size: sentences decoded at once.
        max_length: sources are cut to `max_length - 1` tokens plus `[END]` and
            at most `max_length` tokens are generated; default the model's
            `max_length` (as the SavedModel export does).
        progress: show a Keras progress bar.

    Returns:
        list of str.
    """
    run = _as_run(run)
    if run.kind != "translation":
        raise ValueError(f"{run.name} is an image model; translate needs a translation run")
    if isinstance(sentences, str):
        raise ValueError("sentences must be a list of str, not a single str")
    if not isinstance(beam_size, int) or beam_size < 1:
        raise ValueError(f"beam_size must be an int >= 1; received beam_size={beam_size!r}")
    max_length = max_length or run.max_length or 128
    bar = keras.utils.Progbar(len(sentences), unit_name="sentence") if progress else None
    outputs = []
    for start in range(0, len(sentences), batch_size):
        chunk = list(sentences[start : start + batch_size])
        source = encode_sources(run.source_tokenizer, chunk, max_length)
        generated = _decode(run.model, source, beam_size, alpha, max_length)
        outputs += [s.decode("utf-8") for s in run.target_tokenizer.detokenize(generated).numpy()]
        if bar is not None:
            bar.add(len(chunk))
    return outputs


def _decode(model, source, beam_size, alpha, max_length):
    if beam_size == 1:
        return decode.greedy_decode(model, source, max_length=max_length)
    if not hasattr(decode, "beam_search"):
        raise ValueError("beam search is not available in this version; use beam_size=1")
    tokens, _ = decode.beam_search(
        model, source, beam_size=beam_size, alpha=alpha, max_length=max_length
    )
    tokens = tf.convert_to_tensor(tokens)
    if tokens.shape.rank == 3:  # (B, K, L): beams sorted best first
        tokens = tokens[:, 0]
    return tokens


def canonical(tokenizer, sentences):
    """`sentences` as the tokenizer writes them back (normalised, lower-cased, re-spaced):
    the form references are compared in."""
    if not sentences:
        return []
    ids = tokenizer.tokenize(tf.constant(list(sentences), tf.string))
    return [s.decode("utf-8") for s in tokenizer.detokenize(ids).numpy()]


def _scores(hypotheses, references):
    """`(exact match %, BLEU)`, both on a 0-100 scale (`zoo.metrics`)."""
    return (float(metrics.exact_match(hypotheses, references)),
            float(metrics.bleu(hypotheses, references)))


# === Evaluation ===


def evaluate(run_dir, checkpoint="best", beam_size=4, alpha=0.6, limit=None, batch_size=128,
             examples=3, quiet=False, write=True, data=None):
    """Scores of a run on its held-out test split; also written to `metrics.json`.

    Translation: exact match (% of sentences equal to the reference) and
    corpus BLEU (sacrebleu), for greedy decoding and, with `beam_size > 1`,
    beam search. References are compared in the target tokenizer's canonical
    form (`canonical`: Unicode-normalised and lower-cased as the tokenizer
    does). Images: top-1 accuracy.

    Args:
        run_dir: a run directory.
        checkpoint: `"best"` or `"last"`.
        beam_size: beam width for the beam-search scores; 1 skips them.
        alpha: the beam search's length penalty.
        limit: score only the first `limit` test examples.
        batch_size: examples per decoding or prediction batch.
        examples: how many test examples to print (and keep in the result).
        quiet: print nothing.
        write: write `metrics.json` into the run directory.
        data: the run's dataset if already loaded (`RunResult.data`); by
            default it is loaded again from the spec and options in
            `config.json` (the same split: it is fixed by the seed).

    Returns:
        dict, e.g. `{"greedy": {"exact_match": 97.1, "bleu": 98.8}, "beam": {...},
        "num_examples": 1000, ...}` or `{"accuracy": 0.91, ...}`.
    """
    run = load_run(run_dir, checkpoint)
    config = run.config
    kind = run.kind
    if data is None:
        _, data = load_data(
            run.name, config["data"]["spec"], dict(config["data"]["options"]),
            config["model_config"], config["training"]["seed"], quiet,
        )
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be a positive int; received limit={limit!r}")
    result = {
        "model": run.name,
        "data": config["data"]["spec"],
        "split": "test",
        "checkpoint": str(run.checkpoint.relative_to(run.run_dir)),
        "evaluated": datetime.datetime.now().isoformat(timespec="seconds"),
    }
    if kind == "translation":
        pairs = data.test_pairs[:limit] if limit else data.test_pairs
        if not pairs:
            raise ValueError(f"the dataset {config['data']['spec']!r} has no test pairs to score")
        sources = [source for source, _ in pairs]
        references = canonical(run.target_tokenizer, [target for _, target in pairs])
        result["num_examples"] = len(pairs)
        result["references"] = "canonical form of the target tokenizer (normalised, lower-cased)"
        if beam_size > 1 and not hasattr(decode, "beam_search"):
            _say("  (beam search is not available in this version: greedy decoding only)", quiet)
            beam_size = 1
        modes = [("greedy", 1)] + ([("beam", beam_size)] if beam_size > 1 else [])
        shown = None
        for mode, width in modes:
            how = "greedy" if width == 1 else f"beam search, width {width}, alpha {alpha:g}"
            _say(f"Decoding {len(pairs):,} held-out sentences ({how})...", quiet)
            started = time.monotonic()
            hypotheses = translate(run, sources, beam_size=width, alpha=alpha,
                                   batch_size=batch_size,
                                   progress=not quiet and sys.stdout.isatty())
            exact, bleu = _scores(hypotheses, references)
            result[mode] = {"exact_match": exact, "bleu": bleu,
                            "seconds": round(time.monotonic() - started, 2)}
            if width > 1:
                result[mode].update(beam_size=width, alpha=alpha)
            shown = hypotheses
        result["examples"] = [
            {"source": s, "reference": r, "translation": h}
            for s, r, h in list(zip(sources, references, shown))[:examples]
        ]
    else:
        x, y = data.x_test, data.y_test
        if limit:
            x, y = x[:limit], y[:limit]
        if not len(x):
            raise ValueError(f"the dataset {config['data']['spec']!r} has no test images")
        # A progress bar on a terminal only, as for decoding (logs stay clean).
        logits = run.model.predict(x, batch_size=batch_size,
                                   verbose=int(not quiet and sys.stdout.isatty()))
        predicted = np.argmax(logits, axis=-1)
        result["num_examples"] = int(len(x))
        result["accuracy"] = float(np.mean(predicted == y))
        result["per_class_accuracy"] = {
            name: float(np.mean(predicted[y == index] == index)) if np.any(y == index) else None
            for index, name in enumerate(run.class_names)
        }
        result["examples"] = [
            {"label": run.class_names[int(t)], "prediction": run.class_names[int(p)]}
            for t, p in list(zip(y, predicted))[:examples]
        ]
    if write:
        _atomic_write_json(run.run_dir / "metrics.json", result)
    if not quiet:
        _print_evaluation(result, run.run_dir if write else None)
    return result


def clip(text, width=100):
    """`text` cut to `width` characters with an ellipsis (for printing decoded output)."""
    return text if len(text) <= width else text[: width - 1] + "…"


def _print_evaluation(result, written_to):
    print(f"\n{result['model']} on the {result['num_examples']:,} test examples of "
          f"{result['data']!r} ({result['checkpoint']}):")
    if "accuracy" in result:
        print(f"  accuracy {100 * result['accuracy']:.2f}%")
    for mode in ("greedy", "beam"):
        if mode in result:
            scores = result[mode]
            label = mode if mode == "greedy" else f"beam {scores['beam_size']}"
            print(f"  {label:<8} exact match {scores['exact_match']:.1f}%, BLEU {scores['bleu']:.1f}"
                  f"  ({scores['seconds']:.1f} s)")
    for example in result.get("examples", []):
        if "source" in example:
            mark = "ok " if example["translation"] == example["reference"] else "ERR"
            print(f"  {mark} {example['source']}\n      -> {clip(example['translation'])}\n"
                  f"      (reference: {example['reference']})")
    if written_to is not None:
        print(f"  written to {pathlib.Path(written_to) / 'metrics.json'}")


# === Export ===


def export_run(run_dir, to=None, version=None, checkpoint="best", beam_size=4, alpha=0.6,
               max_length=None, top_k=5, quiet=False):
    """Export a run's model as a versioned SavedModel with `zoo.export`.

    Args:
        run_dir: a run directory.
        to: the model's export root; default `saved_models/<model name>`.
        version: the version number; default the next free one.
        checkpoint: `"best"` or `"last"`.
        beam_size, alpha, max_length: translation: the `serving_default`
            signature's beam search.
        top_k: images: classes returned per image.

    Returns:
        `pathlib.Path` of the version directory.
    """
    export = _export_function()
    run = load_run(run_dir, checkpoint)
    root = pathlib.Path(to) if to is not None else pathlib.Path("saved_models") / run.name
    _say(f"Exporting {run.name} ({run.checkpoint.name}) to {root}...", quiet)
    if run.kind == "translation":
        path = export(
            run.model, root, version=version, tokenizer=run.source_tokenizer,
            target_tokenizer=(None if run.target_tokenizer is run.source_tokenizer
                              else run.target_tokenizer),
            beam_size=beam_size, alpha=alpha, max_length=max_length or run.max_length,
        )
    else:
        path = export(run.model, root, version=version, top_k=top_k, class_names=run.class_names)
    _say(f"  SavedModel written to {path}", quiet)
    return pathlib.Path(path)


def _export_function():
    export = getattr(zoo, "export", None)
    if callable(export):
        return export
    try:
        from zoo import export as module
    except ImportError:
        module = None
    export = getattr(module, "export", None)
    if not callable(export):
        raise ValueError("SavedModel export is not available in this version of the zoo")
    return export


# === Prediction ===


def resolve_saved_model(path):
    """A SavedModel folder, or the newest numbered version inside an export root; else None."""
    path = pathlib.Path(path)
    if (path / "saved_model.pb").is_file():
        return path
    if path.is_dir():
        versions = sorted(
            (int(child.name), child) for child in path.iterdir()
            if child.name.isdigit() and (child / "saved_model.pb").is_file()
        )
        if versions:
            return versions[-1][1]
    return None


def _load_image_files(paths, height, width, channels):
    color_mode = {1: "grayscale", 3: "rgb", 4: "rgba"}[channels]
    images = []
    for path in paths:
        if not pathlib.Path(path).is_file():
            raise FileNotFoundError(f"image file not found: {path}")
        image = keras.utils.load_img(path, color_mode=color_mode, target_size=(height, width))
        images.append(np.asarray(keras.utils.img_to_array(image), np.uint8))
    return np.stack(images)  # (B, H, W, C)


def predict(path, inputs, beam_size=None, alpha=0.6, top_k=5, checkpoint="best"):
    """Translate sentences or classify image files with a run or an exported SavedModel.

    Args:
        path: a run directory (in-process decoding of its checkpoint) or a
            SavedModel (a version folder, or an export root: its newest
            version), loaded with `tf.saved_model.load`.
        inputs: sentences (translation) or image file paths (images).
        beam_size: run directories: 1 = greedy, more = beam search (default 4
            when beam search is available, as the export's `serving_default`).
            SavedModels: 1 uses the `greedy` signature, else `serving_default`.
        alpha: beam search length penalty (run directories).
        top_k: classes listed per image.
        checkpoint: run directories: `"best"` or `"last"`.

    Returns:
        list of dicts, one per input: `{"input", "translation"}` or
        `{"input", "classes": [(name, probability), ...]}`.
    """
    inputs = list(inputs)
    if not inputs:
        raise ValueError("predict needs at least one input (sentences or image files)")
    path = pathlib.Path(path)
    if (path / "config.json").is_file():
        run = load_run(path, checkpoint)
        if run.kind == "translation":
            if beam_size is None:
                beam_size = 4 if hasattr(decode, "beam_search") else 1
            outputs = translate(run, inputs, beam_size=beam_size, alpha=alpha)
            return [{"input": s, "translation": t} for s, t in zip(inputs, outputs)]
        model_config = run.config["model_config"]
        size, channels = model_config["image_size"], model_config["channels"]
        images = _load_image_files(inputs, size, size, channels)
        logits = run.model.predict(images, verbose=0)
        probabilities = keras.ops.convert_to_numpy(keras.ops.softmax(logits, axis=-1))
        return _top_classes(inputs, probabilities, run.class_names, top_k)
    saved = resolve_saved_model(path)
    if saved is None:
        raise FileNotFoundError(
            f"{path} is neither a run directory (no config.json) nor a SavedModel "
            "(no saved_model.pb, nor numbered versions holding one)"
        )
    return _predict_saved_model(saved, inputs, beam_size, top_k)


def _top_classes(inputs, probabilities, class_names, top_k):
    results = []
    for name, row in zip(inputs, probabilities):
        order = np.argsort(-row)[:top_k]
        results.append({
            "input": str(name),
            "classes": [(class_names[i] if class_names else str(i), float(row[i])) for i in order],
        })
    return results


def _signature_inputs(function):
    _, kwargs = function.structured_input_signature
    return kwargs


def _predict_saved_model(path, inputs, beam_size, top_k):
    import tensorflow_text  # noqa: F401 - registers the tokenizer's ops for loading

    loaded = tf.saved_model.load(str(path))
    signatures = dict(loaded.signatures)
    if "serving_default" not in signatures:
        raise ValueError(f"{path} has no serving_default signature")
    default = signatures["serving_default"]
    specs = _signature_inputs(default)
    if len(specs) != 1:
        raise ValueError(f"{path}: serving_default should take one input; it takes {sorted(specs)}")
    ((input_name, spec),) = specs.items()
    if spec.dtype == tf.string:  # translation: text in
        metadata_path = path / "assets.extra" / "zoo_export.json"
        exported = json.loads(metadata_path.read_text()) if metadata_path.is_file() else {}
        if beam_size not in (None, 1) and beam_size != exported.get("beam_size", beam_size):
            raise ValueError(
                f"{path} was exported with beam size {exported['beam_size']}: use --beam-size "
                f"{exported['beam_size']} (serving_default) or 1 (greedy), or export again"
            )
        function = signatures.get("greedy") if beam_size == 1 else default
        if function is None:
            raise ValueError(f"{path} has no greedy signature")
        (name, _), = _signature_inputs(function).items()
        outputs = function(**{name: tf.constant(inputs, tf.string)})
        key = next((k for k in ("translation", "translations", "text") if k in outputs), None)
        if key is None:
            raise ValueError(f"{path}: no translation among the outputs {sorted(outputs)}")
        translations = [t.decode("utf-8") for t in outputs[key].numpy().tolist()]
        return [{"input": s, "translation": t} for s, t in zip(inputs, translations)]
    # Images: the signature that takes encoded image bytes, else uint8 arrays.
    by_bytes = [
        function for key, function in sorted(signatures.items())
        if len(_signature_inputs(function)) == 1
        and next(iter(_signature_inputs(function).values())).dtype == tf.string
    ]
    for item in inputs:
        if not pathlib.Path(item).is_file():
            raise FileNotFoundError(f"image file not found: {item}")
    if by_bytes:
        ((name, _),) = _signature_inputs(by_bytes[0]).items()
        data = [pathlib.Path(item).read_bytes() for item in inputs]
        outputs = by_bytes[0](**{name: tf.constant(data, tf.string)})
    else:
        height, width, channels = spec.shape[1:]
        images = _load_image_files(inputs, height, width, channels)
        outputs = default(**{input_name: tf.constant(images, spec.dtype)})
    if "probabilities" not in outputs:
        raise ValueError(f"{path}: no probabilities among the outputs {sorted(outputs)}")
    probabilities = outputs["probabilities"].numpy()  # (B, K)
    class_names = [str(i) for i in range(probabilities.shape[-1])]
    if "classes" in outputs and "class_names" in outputs:  # the export's top-k names
        for ids, names in zip(outputs["classes"].numpy(), outputs["class_names"].numpy()):
            for index, name in zip(ids.tolist(), names.tolist()):
                class_names[index] = name.decode("utf-8")
    return _top_classes(inputs, probabilities, class_names, top_k)


__all__ = [
    "RunFinishedError",
    "Run",
    "RunResult",
    "canonical",
    "check_data_fits",
    "config_from_data",
    "encode_sources",
    "evaluate",
    "export_run",
    "learn_tokenizers",
    "load_data",
    "load_run",
    "load_tokenizers",
    "predict",
    "read_config",
    "read_history",
    "resolve_saved_model",
    "split_validation",
    "train",
    "translate",
]
