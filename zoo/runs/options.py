"""The training options: one frozen dataclass that `train()`, `zoo train`, `config.json`
and the resume check all read.

    options = TrainingOptions(epochs=20, batch_size=32, train_size=1000)
    options.training_section()   # config.json "training" (defaults filled in)
    options.data_section()       # config.json "data" -> "options"

A field left at None means "not given": a new run takes the field's default
(`default` in its metadata), a resumed run the value saved in `config.json`.
Each field's metadata says where `config.json` keeps it (`section`), its
default and its help text (the CLI's `--help` shows the same words).
"""

import dataclasses
import pathlib

from keras_attention import backends
from keras_attention.checks import check_int, check_positive_int
from zoo import distribute, files
from zoo.errors import ZooError
from zoo.runs.budget import SCHEDULES
from zoo.text import tokenizers


def _option(section, help, default=None):
    return dataclasses.field(default=None, metadata={"section": section, "default": default,
                                                     "help": help})


@dataclasses.dataclass(frozen=True)
class TrainingOptions:
    """How a run trains, and the dataset options of its data spec. None: not given."""

    # === config.json "training" ===
    epochs: int | None = _option(
        "training", "epochs (default 10; with a time limit or max_steps, as many as the budget "
        "allows)", default=10)
    batch_size: int | None = _option(
        "training", "examples per replica per step (default 64 for text, 128 for images)")
    batch_tokens: int | None = _option(
        "training", "translation: batches of at most this many tokens per replica (padded "
        "source or target positions), by length bucket, instead of batch_size examples")
    max_steps: int | None = _option("training", "stop after this many steps in total")
    time_limit: float | None = _option(
        "training", "stop training after this many minutes of training in total (a resumed "
        "run trains what is left)")
    schedule: str | None = _option(
        "training", "learning-rate schedule: auto (budget-linear with a time limit or max_steps, "
        "else the family's own), paper (the family's own), budget-linear, budget-cosine",
        default="auto")
    warmup_ratio: float | None = _option(
        "training", "with a budget: the share of its steps spent warming up (default 0.05; 0.1 "
        "for a Transformer under a short budget, zoo.runs.short_budget)")
    steps_per_epoch: int | None = _option(
        "training", "an epoch (validation, history row, checkpoint, backup) of N steps over "
        "the repeated data (default: one pass, or ~5 minutes of steps when a pass is longer)")
    average_checkpoints: int | None = _option(
        "training", "with a budget: average this many snapshots of the weights, over the last "
        "20% of its steps, into checkpoints/average.keras (default 5; 0 for none)")
    seed: int | None = _option(
        "training", "random seed of the weights, dropout, batch order and validation split; "
        "the test split has its own (data_seed)", default=0)
    val_ratio: float | None = _option(
        "training", "share of the training split used for validation", default=0.05)
    mixed_precision: str | None = _option(
        "training", "mixed precision: auto, float16, bfloat16 or float32")
    jit: bool | None = _option("training", "XLA compilation (sets the config's jit_compile)")
    model_parallel: int | None = _option(
        "training", "JAX: split the attention and feed-forward kernels and the embeddings over "
        "N devices, each batch over the others (keras.distribution.ModelParallel, "
        "zoo.layout_map)")
    separate_vocabularies: bool | None = _option(
        "training", "translation: one vocabulary per language instead of a shared one",
        default=False)
    weights: str | None = _option(
        "training", "pretrained weights to start from (ViT: Google .npz, timm .safetensors/.pth, "
        "or a Hugging Face folder; Transformer: a Hugging Face Marian / OPUS-MT folder, "
        "fine-tuned with its own tokenizers)")
    tokenizer: str | None = _option(
        "training", "translation: sentencepiece (cased, reversible; the default) or wordpiece "
        "(lower-cased, as runs before it); runs from a Marian folder keep its own (marian)",
        default=tokenizers.DEFAULT)
    # === config.json "data" -> "options" (`zoo.datasets.load`) ===
    data_dir: str | None = _option("data", "fashion-mnist: folder with the IDX files")
    train_size: int | None = _option(
        "data", "numbers/dates: pairs to generate; others: keep a random subset")
    test_size: int | None = _option(
        "data", "numbers/dates: held-out pairs to generate; others: keep a random subset of "
        "the test split")
    test_ratio: float | None = _option(
        "data", "tsv:, digits, images:: held-out share (defaults 0.05, 0.2, 0.2)")
    test_path: str | None = _option("data", "tsv:: a second file of test pairs")
    data_seed: int | None = _option(
        "data", "the seed that generates (numbers, dates) and splits the dataset into training "
        "and test pairs, whatever --seed is", default=0)

    def __post_init__(self):
        for name in ("epochs", "batch_size", "batch_tokens", "max_steps", "steps_per_epoch",
                     "model_parallel"):
            check_positive_int(name, getattr(self, name), allow_none=True)
        check_int("data_seed", self.data_seed, 0, allow_none=True)
        if self.average_checkpoints is not None:
            check_int("average_checkpoints", self.average_checkpoints, 0)
        if self.schedule is not None and self.schedule not in SCHEDULES:
            raise ZooError(f"schedule must be one of {', '.join(SCHEDULES)}; "
                           f"received {self.schedule!r}")
        ratio = self.warmup_ratio
        if ratio is not None and (isinstance(ratio, bool) or not isinstance(ratio, (int, float))
                                  or not 0 < ratio < 1):
            raise ZooError(f"warmup_ratio must be a number between 0 and 1; received {ratio!r}")
        limit = self.time_limit
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, (int, float))
                                  or limit <= 0):
            raise ZooError(
                f"time_limit must be a positive number of minutes; received {limit!r}"
            )
        if self.tokenizer is not None:
            tokenizers.check_name(self.tokenizer, imported=True)
        for name in ("test_path", "weights"):
            if isinstance(getattr(self, name), pathlib.PurePath):
                object.__setattr__(self, name, str(getattr(self, name)))

    @classmethod
    def names(cls, section=None):
        """The field names, all or those of one `config.json` section."""
        return tuple(field.name for field in dataclasses.fields(cls)
                     if section is None or field.metadata["section"] == section)

    @classmethod
    def from_config(cls, config):
        """The options a run directory's `config.json` (as a dict) was trained with."""
        training = {key: config["training"].get(key) for key in cls.names("training")}
        data = {key: config["data"]["options"].get(key) for key in cls.names("data")}
        return cls(**training, **data)

    def _section(self, section):
        """The fields of one `config.json` section: the given values, else the defaults."""
        return {field.name: (getattr(self, field.name) if getattr(self, field.name) is not None
                             else field.metadata["default"])
                for field in dataclasses.fields(self) if field.metadata["section"] == section}

    def training_section(self):
        """`config.json`'s "training" fields: the given values, else the defaults."""
        return self._section("training")

    def data_section(self):
        """`config.json`'s "data" -> "options": the given values, else the defaults (None
        for all but `data_seed`: the dataset's own)."""
        return self._section("data")

    def conflicts(self, saved):
        """The given options that differ from the saved run's `config.json` (a dict), as
        `"key=value (saved: value)"` strings."""
        saved_values = {**saved["training"], **saved["data"]["options"]}
        return [
            f"{name}={getattr(self, name)!r} (saved: {saved_values.get(name)!r})"
            for name in self.names()
            if getattr(self, name) is not None
            and files.normalise(getattr(self, name)) != files.normalise(saved_values.get(name))
        ]


def check_resume(saved, name, data, options, overrides):
    """Raise `ValueError` when what is given again differs from the saved run's settings."""
    conflicts = []
    if name != saved["model"]:
        conflicts.append(f"model {name!r} (saved: {saved['model']!r})")
    if data is not None and data != saved["data"]["spec"]:
        conflicts.append(f"data {data!r} (saved: {saved['data']['spec']!r})")
    conflicts += options.conflicts(saved)
    saved_overrides = saved.get("overrides", {})
    if overrides and files.normalise(overrides) != files.normalise(saved_overrides):
        conflicts.append(f"overrides={overrides!r} (saved: {saved_overrides!r})")
    if conflicts:
        raise ZooError(
            "the run directory holds a run with other settings, so it cannot be resumed with: "
            + "; ".join(conflicts)
            + ". Leave those arguments out to resume with the saved ones, or choose another --out."
        )


def resolve_mixed_precision(mixed_precision, strategy):
    """The dtype policy name for `mixed_precision`: None is the strategy's default
    (`mixed_bfloat16` on TPU, else float32), False or "float32" is float32."""
    if mixed_precision is None:
        return distribute.default_policy(strategy)
    if mixed_precision in (False, "float32", "none", "off"):
        return None
    if mixed_precision in (True, "auto"):
        if distribute.default_policy(strategy):
            return distribute.default_policy(strategy)
        return "mixed_float16" if backends.has_gpu() else "mixed_bfloat16"
    names = {"float16": "mixed_float16", "bfloat16": "mixed_bfloat16",
             "mixed_float16": "mixed_float16", "mixed_bfloat16": "mixed_bfloat16"}
    if mixed_precision not in names:
        raise ZooError(
            "mixed_precision must be one of auto, float16, bfloat16 (or mixed_float16, "
            f"mixed_bfloat16, float32); received mixed_precision={mixed_precision!r}"
        )
    return names[mixed_precision]

