"""The run directory: what `zoo train` writes, and loading it back (`load_run`).

    config.json            the model's full config, the data spec, the training options
                           (`training.weights`: the checkpoint or folder it started from),
                           the seed, the Keras backend and the strategy (`training.backend`,
                           `training.strategy`) and the library versions (written once, at the start)
    tokenizer/             the shared vocabulary (`zoo.text.tokenizers`: SentencePiece or WordPiece), or
    tokenizer/source/, tokenizer/target/   with `separate_vocabularies=True` (and for a
                           model imported from a Marian folder: its two tokenizers)
    checkpoints/last.keras the model after the last completed epoch
    checkpoints/best.keras the model of the epoch with the lowest `val_loss`
    checkpoints/average.keras  with a budget: the mean of the weight snapshots in
                           checkpoints/average/ (`zoo.runs.averaging`)
    backup/                `keras.callbacks.BackupAndRestore` state (gone once training ends)
    logs/                  TensorBoard (`tensorboard --logdir RUN_DIR/logs`)
    history.csv            one row per epoch (epoch counted from 0, as `CSVLogger`)
    curves.png             loss and metrics per epoch (`zoo.plot.training_curves`)
    summary.json           written when training ends: epochs, time, final metrics
    metrics.json           written by `evaluate`

`FORMAT_VERSION` is written into `config.json`; every file is replaced
atomically (`zoo.files`).
"""

import csv
import dataclasses
import datetime
import importlib.metadata
import io
import json
import pathlib
import platform
import sys

import keras
import tensorflow as tf

from zoo import files
from zoo.errors import ZooError
from zoo.text import tokenizers

FORMAT_VERSION = 1  # of config.json
MONITOR = "val_loss"  # what picks checkpoints/best.keras
CHECKPOINTS = ("best", "last", "average")  # the names `load_run` takes


@dataclasses.dataclass
class Run:
    """A trained run loaded back by `load_run`.

    Attributes:
        run_dir: the run directory.
        config: `config.json` as a dict.
        model: the `keras.Model` of the chosen checkpoint (not compiled).
        kind: `"translation"` or `"image"`.
        source_tokenizer, target_tokenizer: `zoo.text.tokenizers` (SentencePiece or WordPiece)
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


def read_history(path):
    """`history.csv` -> list of row dicts with float values (`epoch` as int)."""
    path = pathlib.Path(path)
    if not path.is_file():
        return []
    rows = []
    try:
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
    except (KeyError, ValueError, UnicodeDecodeError, csv.Error) as error:
        raise files.CorruptFileError(path, "not a history of epochs (truncated?)",
                                     f"{type(error).__name__}: {error}") from None
    return rows


def write_history(path, rows):
    keys = []
    for row in rows:
        keys += [key for key in row if key not in keys]
    keys = ["epoch"] + sorted(key for key in keys if key != "epoch")
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=keys, restval="NA", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(row)
    files.write_text(path, buffer.getvalue())


def history_dict(rows):
    keys = []
    for row in rows:
        keys += [key for key in row if key not in keys]
    return {key: [row.get(key, float("nan")) for row in rows] for key in keys}


def versions():
    def version(package):
        try:
            return importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            return None

    backend = keras.backend.backend()  # TensorFlow's pipelines and tokenizers either way
    return {
        "python": platform.python_version(),
        "tensorflow": tf.__version__,
        "keras": keras.__version__,
        **({} if backend == "tensorflow" else {backend: version(backend)}),
        "tensorflow-text": version("tensorflow-text"),
        "keras-attention": version("keras-attention"),
    }


def tokenizer_dirs(run_dir, separate):
    base = pathlib.Path(run_dir) / "tokenizer"
    return (base / "source", base / "target") if separate else (base, base)


def write_new_run(run_dir, config, tokenizer_pair=None):
    """A new run's tokenizers (translation), then its `config.json`: the presence of
    `config.json` marks a run that can be resumed.

    Args:
        run_dir: the run directory.
        config: `config.json`'s content but `format_version`, `versions`,
            `created` and `command`, which are added here.
        tokenizer_pair: `(source, target)`, saved into `tokenizer/` (or
            `tokenizer/source/` and `tokenizer/target/` with the config's
            `training.separate_vocabularies`).
    """
    if tokenizer_pair is not None:
        separate = config["training"]["separate_vocabularies"]
        source_dir, target_dir = tokenizer_dirs(run_dir, separate)
        tokenizer_pair[0].save(source_dir)
        if separate:
            tokenizer_pair[1].save(target_dir)
    files.write_json(pathlib.Path(run_dir) / "config.json", {
        "format_version": FORMAT_VERSION,
        **config,
        "versions": versions(),
        "created": datetime.datetime.now().isoformat(timespec="seconds"),
        "command": sys.argv if sys.argv and sys.argv[0] else None,
    })


def load_tokenizers(run_dir, config=None):
    """The `(source, target)` tokenizers saved in a run directory (one object if shared)."""
    config = config or read_config(run_dir)
    separate = bool(config["training"].get("separate_vocabularies"))
    source_dir, target_dir = tokenizer_dirs(run_dir, separate)
    source = _load_tokenizer(source_dir)  # whichever kind tokenizer.json names
    return source, (_load_tokenizer(target_dir) if separate else source)


def _load_tokenizer(directory):
    try:
        return tokenizers.load(directory)
    except (FileNotFoundError, files.CorruptFileError):
        raise
    except Exception as error:  # each kind's own errors: sentencepiece, JSON, vocabulary
        data = [path for path in pathlib.Path(directory).iterdir()
                if path.is_file() and path.name != "tokenizer.json"]
        named = data[0] if len(data) == 1 else directory  # e.g. sentencepiece.model
        raise files.CorruptFileError(named, "the tokenizer does not load",
                                     f"{type(error).__name__}: {error}") from None


def read_config(run_dir):
    """`config.json` of a run directory, as a dict."""
    path = pathlib.Path(run_dir) / "config.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"{run_dir} is not a run directory: {path} not found (zoo train --out makes one)"
        )
    config = files.read_json(path, dict)
    missing = [key for key in ("model", "kind", "model_config", "training") if key not in config]
    if missing:
        raise files.CorruptFileError(path, f"no {', '.join(missing)} in it")
    return config


def read_config_file(path):
    """Config fields from a JSON file: `(overrides, fit arguments)`.

    Accepts a flat `{field: value}` object, a run's `config.json` (its
    `model_config` and `training.batch_size`), or the `best_config.json` of
    `zoo tune` (its `config` and `fit`).
    """
    path = pathlib.Path(path)
    if path.is_dir():
        raise ZooError(f"config file {path} is a folder, not a JSON file")
    if not path.is_file():
        raise FileNotFoundError(f"config file not found: {path}")
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ZooError(f"config file {path} is not valid JSON: {error}") from None
    if not isinstance(content, dict):
        raise ZooError(
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


def load_run(run_dir, checkpoint="best"):
    """A trained run: model (`checkpoints/<checkpoint>.keras`), tokenizers or class names, config.

    Args:
        run_dir: a directory written by `train`.
        checkpoint: `"best"` (falls back to `"last"` if there is no best),
            `"last"`, `"average"` (a run with a budget), or a path to a `.keras` file.

    Returns:
        `Run`.
    """
    run_dir = pathlib.Path(run_dir)
    config = read_config(run_dir)
    if checkpoint in CHECKPOINTS:
        path = run_dir / "checkpoints" / f"{checkpoint}.keras"
        if checkpoint == "best" and not path.is_file():
            path = run_dir / "checkpoints" / "last.keras"
    else:
        path = pathlib.Path(checkpoint)
    if checkpoint == "average" and not path.is_file():
        raise FileNotFoundError(
            f"no checkpoint {path} in {run_dir}: only a run with a budget (--time-limit or "
            "--max-steps) writes it, when its training ends"
        )
    if not path.is_file():
        raise FileNotFoundError(
            f"no checkpoint {path} in {run_dir}: the run has not finished an epoch yet"
        )
    model = _load_checkpoint(path, run_dir)
    run = Run(run_dir=run_dir, config=config, model=model, kind=config["kind"], checkpoint=path)
    if run.kind == "translation":
        run.source_tokenizer, run.target_tokenizer = load_tokenizers(run_dir, config)
    else:
        run.class_names = list(config["data"]["class_names"])
    return run


def _load_checkpoint(path, run_dir):
    """The model in the `.keras` file `path`; `CorruptFileError` if the file is not a whole
    `.keras` archive (naming the run's other checkpoint, when there is one)."""
    try:
        return keras.saving.load_model(path, compile=False)
    except Exception as error:
        if files.is_whole_zip(path):
            raise
        reason = "empty" if not path.stat().st_size else "not a whole .keras archive (truncated?)"
        others = [name for name in CHECKPOINTS if name != path.stem
                  and (run_dir / "checkpoints" / f"{name}.keras").is_file()]
        hint = f"try --checkpoint {others[0]}" if others else ""
        raise files.CorruptFileError(path, reason, hint=hint) from error


def as_run(run_or_dir, checkpoint="best"):
    return run_or_dir if isinstance(run_or_dir, Run) else load_run(run_or_dir, checkpoint)
