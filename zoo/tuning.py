"""Hyperparameter search for zoo models with keras-tuner: `zoo.hypermodel` and `tune`.

    import keras_tuner
    import zoo

    # A keras_tuner.HyperModel; vocabulary_size is held constant, the rest searched.
    hypermodel = zoo.hypermodel("transformer-tiny", vocabulary_size=1000)
    tuner = keras_tuner.RandomSearch(hypermodel, objective="val_loss", max_trials=10)
    tuner.search(x, y, validation_data=(x_val, y_val), epochs=3)

    # Or all in one: search, print the best trials, write RUN_DIR/best_config.json.
    result = zoo.tuning.tune(
        "transformer-tiny", (x, y), validation_data=(x_val, y_val), max_trials=10,
        directory="RUN_DIR", space={"d_model": [64, 128]}, vocabulary_size=1000,
    )
    best = zoo.tuning.load_best_config("RUN_DIR/best_config.json")
    model = zoo.get(best["model"], **best["config"])   # the best trial's architecture

Search spaces
-------------
Hyperparameters carry the config fields' names, except the few that set
several fields at once. `batch_size` is a `fit` argument, the rest set config
fields. Defaults (the first value is keras-tuner's default):

Transformer (`TransformerConfig`):
    num_layers        [1, 2, 3, 4, 6]        -> num_encoder_layers and num_decoder_layers
    d_model           [64, 128, 256, 512]
    num_heads         [1, 2, 4, 8]           divisors of every d_model value (see below)
    intermediate_dim  [256, 512, 1024, 2048] (d_ff)
    dropout           [0.0, 0.1, 0.2, 0.3]
    label_smoothing   [0.0, 0.1, 0.2]
    warmup_steps      [500, 1000, 2000, 4000]
    batch_size        [16, 32, 64, 128]

ViT (`ViTConfig`):
    patch_size        divisors p of image_size with 2 <= p and 2 <= image_size / p <= 32
                      (4 to 1024 patches), computed from the image size when the
                      hypermodel is made (e.g. [2, 4, 7, 14] for 28, [2, 4, 8, 16] for 32)
    num_layers        [2, 4, 6, 8, 12]       (depth)
    hidden_dim        [64, 128, 192, 256, 384] (width)
    num_heads         [1, 2, 4, 8]           divisors of every hidden_dim value
    mlp_ratio         [2, 4]                 -> mlp_dim = mlp_ratio * hidden_dim
    dropout           [0.0, 0.1, 0.2]
    learning_rate     1e-4 .. 3e-3, log scale
    weight_decay      [0.0, 0.01, 0.05, 0.1]
    batch_size        [32, 64, 128]

RNN + Bahdanau attention (`Seq2SeqConfig`):
    units             [64, 128, 256, 512, 1000] -> encoder_units, decoder_units and
                      attention_units; maxout_units = units // 2 (the paper's 1000 / 500)
    embedding_dim     [32, 64, 128, 256, 620]
    cell              ["gru", "lstm"]
    dropout           [0.0, 0.1, 0.2, 0.3]
    learning_rate     1e-4 .. 1e-2, log scale
    batch_size        [16, 32, 64, 128]

Fixed values. `zoo.hypermodel(name, **fixed)` holds every config field given
in `fixed` constant: a hyperparameter whose fields are all fixed is not
searched at all, and fixed values win over searched ones (fixing only
`num_encoder_layers` leaves `num_layers` searching the decoder's depth).
`batch_size=B` fixes the batch size; `batch_size=None` leaves batching to the
data (needed for an already batched `tf.data.Dataset`).

Narrowing the space. `space={"d_model": [128, 256], "learning_rate":
{"min_value": 1e-4, "max_value": 1e-3, "sampling": "log"}}` replaces the
values of named hyperparameters: a list is a choice, a dict with `min_value`
and `max_value` (and optionally `step`, `sampling`) a range (integers if both
bounds are), or a `Choice`/`Int`/`Float` of this module.

Constraints without conditional hyperparameters. keras-tuner's choices are
fixed when first declared and cannot depend on another hyperparameter's value.
So the constraint "`num_heads` divides `d_model`" is solved when the
hypermodel is made, over the whole space: the `num_heads` choices are the
values that divide *every* `d_model` choice (1, 2, 4, 8 for the defaults);
with `d_model` fixed, the divisors of that value; with `num_heads` fixed, the
`d_model` choices that it divides. Every sampled pair is then valid and no
trial is wasted on an invalid config, with all three tuners (random,
Hyperband, Bayesian). `patch_size` and `image_size` are handled the same way.
Values given explicitly in `space` or `fixed` that break a constraint, unknown
names and values a config rejects raise a `ValueError` naming them, before any
model is built.

Search spaces of registered entries. `zoo.register(..., search_space=...)`
takes a `SearchSpace` (gets all of the above) or any function
`(hp, fixed) -> dict of config overrides` that declares its hyperparameters on
the `keras_tuner.HyperParameters` `hp` (declare `hp.Choice("batch_size", ...)`
there to tune the batch size). Without one, an entry uses its family's.

best_config.json (written by `tune` into its `directory`)::

    {"model": "transformer-tiny",
     "config": {"num_encoder_layers": 2, "d_model": 128, ..., "vocabulary_size": 1000},
     "fit": {"batch_size": 32},
     "objective": {"name": "val_loss", "direction": "min", "value": 2.31},
     "trial_id": "07", "num_params": 1234567, "tuner": "random",
     "hyperparameters": {"num_layers": 2, "d_model": 128, ...}}

`config` holds the searched and the fixed config fields, so
`zoo.get(best["model"], **best["config"])` rebuilds the best trial's model;
`fit` holds the fit arguments (`batch_size`, absent when left to the data).

Resuming. `tune(..., overwrite=False)` (the default) reloads the keras-tuner
project in `directory/project_name` when it exists: completed trials are kept,
a trial that was interrupted is run again, and the search stops once
`max_trials` trials exist. The search's settings (model, fixed values, space,
tuner, objective) are kept in `zoo_search.json` there: resuming with other
settings raises a `ValueError` (keras-tuner would silently mix two searches).
`overwrite=True` starts over.
"""

import contextlib
import dataclasses
import json
import os
import pathlib
from typing import Any, Callable

import keras_tuner

from zoo import registry
from zoo.seq2seq import Seq2SeqConfig
from zoo.transformer import TransformerConfig
from zoo.vit import ViTConfig

TUNERS = ("random", "hyperband", "bayesian")
# Search-space names that are `fit` arguments, not config fields.
FIT_ARGUMENTS = ("batch_size",)
BEST_CONFIG = "best_config.json"


# === Hyperparameter specs ===


def _check_fields(fields):
    if fields is not None and (
        not isinstance(fields, tuple) or not all(isinstance(f, str) for f in fields)
    ):
        raise ValueError(f"`fields` must be a tuple of config field names; received {fields!r}.")


@dataclasses.dataclass(frozen=True)
class Choice:
    """One value among `values` (or among `values(config)` when it is a function).

    Args:
        values: the choices (int, float, str or bool, all of one type), or a
            function of the entry's config values (a dict) returning them,
            evaluated when the hypermodel is made.
        fields: the config fields the value sets; `None` means the field of
            the same name, `()` a `fit` argument.
        derive: `(value, config) -> {field: value}` for values that are not
            copied as they are (`config` holds the fields known so far).
    """

    values: Any
    fields: tuple | None = None
    derive: Callable | None = None

    def __post_init__(self):
        _check_fields(self.fields)
        if not callable(self.values):
            if isinstance(self.values, (str, bytes)) or not hasattr(self.values, "__iter__"):
                raise ValueError(f"Choice `values` must be a list; received {self.values!r}.")
            values = tuple(self.values)
            if not values:
                raise ValueError("Choice `values` must not be empty.")
            types = {type(v) for v in values}
            if types == {int, float}:  # keras-tuner wants one type: [0, 0.1] -> [0.0, 0.1]
                values = tuple(float(v) for v in values)
            elif len(types) > 1 or not types <= {int, float, str, bool}:
                raise ValueError(
                    "Choice values must be int, float, str or bool, all of one type; "
                    f"received {list(values)!r}."
                )
            object.__setattr__(self, "values", values)

    def candidates(self, config):
        return tuple(self.values(config)) if callable(self.values) else self.values

    def declare(self, hp, name, config):
        return hp.Choice(name, list(self.candidates(config)))


@dataclasses.dataclass(frozen=True)
class Int:
    """An integer in `[min_value, max_value]` (both included); see `Choice` for the rest."""

    min_value: int
    max_value: int
    step: int | None = None
    sampling: str = "linear"
    fields: tuple | None = None
    derive: Callable | None = None

    def __post_init__(self):
        _check_fields(self.fields)
        _check_range(self, int)

    def candidates(self, config):
        return (self.min_value, self.max_value)

    def declare(self, hp, name, config):
        return hp.Int(name, self.min_value, self.max_value, step=self.step, sampling=self.sampling)


@dataclasses.dataclass(frozen=True)
class Float:
    """A float in `[min_value, max_value]`, `sampling` `"linear"` or `"log"`; see `Choice`."""

    min_value: float
    max_value: float
    step: float | None = None
    sampling: str = "linear"
    fields: tuple | None = None
    derive: Callable | None = None

    def __post_init__(self):
        _check_fields(self.fields)
        _check_range(self, (int, float))

    def candidates(self, config):
        return (self.min_value, self.max_value)

    def declare(self, hp, name, config):
        return hp.Float(
            name, self.min_value, self.max_value, step=self.step, sampling=self.sampling
        )


def _check_range(spec, types):
    kind = type(spec).__name__
    for bound in ("min_value", "max_value"):
        value = getattr(spec, bound)
        if isinstance(value, bool) or not isinstance(value, types):
            raise ValueError(f"{kind} `{bound}` must be a number; received {value!r}.")
    if spec.min_value > spec.max_value:
        raise ValueError(
            f"{kind} range is empty: min_value={spec.min_value!r} > max_value={spec.max_value!r}."
        )
    if spec.sampling not in ("linear", "log", "reverse_log"):
        raise ValueError(
            f"{kind} `sampling` must be 'linear', 'log' or 'reverse_log'; received {spec.sampling!r}."
        )
    if spec.sampling != "linear" and spec.min_value <= 0:
        raise ValueError(
            f"{kind} with sampling={spec.sampling!r} needs min_value > 0; "
            f"received min_value={spec.min_value!r}."
        )


_SPECS = (Choice, Int, Float)


def _fields_of(name, param):
    return (name,) if param.fields is None else param.fields


def _as_param(name, spec, old):
    """A user's override of hyperparameter `name` as a spec, keeping `old`'s field mapping."""
    if isinstance(spec, _SPECS):
        param = spec
    elif isinstance(spec, (list, tuple)):
        if not spec:
            raise ValueError(f"The values of hyperparameter `{name}` must not be empty.")
        try:
            param = Choice(tuple(spec))
        except ValueError as error:
            raise ValueError(f"Hyperparameter `{name}`: {error}") from None
    elif isinstance(spec, dict):
        unknown = sorted(set(spec) - {"min_value", "max_value", "step", "sampling"})
        if unknown or "min_value" not in spec or "max_value" not in spec:
            raise ValueError(
                f"A range for hyperparameter `{name}` takes min_value, max_value and "
                f"optionally step and sampling; received {spec!r}."
            )
        integer = all(
            isinstance(spec.get(k), int) and not isinstance(spec.get(k), bool)
            for k in ("min_value", "max_value")
        ) and isinstance(spec.get("step", 1), int)
        try:
            param = (Int if integer else Float)(**spec)
        except ValueError as error:
            raise ValueError(f"Hyperparameter `{name}`: {error}") from None
    else:
        raise ValueError(
            f"Hyperparameter `{name}`: expected a list of values, a dict "
            "{'min_value': ..., 'max_value': ...} or a zoo.tuning.Choice/Int/Float; received "
            f"{spec!r}. To hold a config field constant, pass it as a fixed value instead."
        )
    if param.fields is None and param.derive is None:
        param = dataclasses.replace(param, fields=old.fields, derive=old.derive)
    return param


# === Search spaces ===


class SearchSpace:
    """A declarative search space: named hyperparameters and how they set config fields.

    Calling it as `space(hp, fixed)` (the protocol of `zoo.register`'s
    `search_space`) declares its hyperparameters on `hp` and returns the config
    overrides they give; `fixed` config fields are neither searched nor
    overridden.

    Args:
        params: dict from hyperparameter name to `Choice`, `Int` or `Float`, in
            declaration order (a `derive` may read fields set by earlier ones).
        divides: pairs `(a, b)` of names (hyperparameters or config fields)
            such that every value of `a` must divide the value of `b`;
            resolved over the whole space by `resolve` (see the module doc).
        description: one line shown by `str(space)`.
    """

    def __init__(self, params, divides=(), description="", *, explicit=(), base=None):
        for name, param in params.items():
            if not isinstance(param, _SPECS):
                raise ValueError(
                    f"Search-space entry `{name}` must be a zoo.tuning.Choice, Int or Float; "
                    f"received {param!r}."
                )
        self.params = dict(params)
        self.divides = tuple(divides)
        self.description = description
        self.explicit = frozenset(explicit)  # names whose values the user gave
        self.base = dict(base) if base is not None else None  # set by `resolve`

    @property
    def names(self):
        return tuple(self.params)

    def replace(self, **overrides):
        """A copy with the values of the named hyperparameters replaced (see the module doc)."""
        unknown = sorted(set(overrides) - set(self.params))
        if unknown:
            raise ValueError(
                f"Unknown hyperparameter(s) {', '.join(unknown)} in the search space. "
                f"Valid names: {', '.join(self.params)}."
            )
        params = dict(self.params)
        for name, spec in overrides.items():
            params[name] = _as_param(name, spec, params[name])
        return SearchSpace(
            params, self.divides, self.description,
            explicit=self.explicit | set(overrides), base=self.base,
        )

    def resolve(self, base, fixed):
        """Bind to an entry's config values: drop fixed hyperparameters, apply the constraints.

        Args:
            base: the entry's config as a dict, with the fixed values applied.
            fixed: the fixed names (config fields and fit arguments).

        Returns:
            A new `SearchSpace` whose choices are concrete tuples.

        Raises:
            ValueError: naming the hyperparameter when no value is left, or
                when values the user gave explicitly break a constraint.
        """
        fixed = set(fixed)
        config = dict(base)
        params = {}
        for name, param in self.params.items():
            fields = _fields_of(name, param)
            if (fields and all(f in fixed for f in fields)) or (not fields and name in fixed):
                continue
            if isinstance(param, Choice):
                values = param.candidates(config)
                if not values:
                    raise ValueError(
                        f"Hyperparameter `{name}` has no value to choose from for this config."
                    )
                param = dataclasses.replace(param, values=tuple(values))
            params[name] = param
        for divisor, multiple in self.divides:
            self._apply_divides(params, config, divisor, multiple)
        return SearchSpace(
            params, self.divides, self.description, explicit=self.explicit, base=config
        )

    def _apply_divides(self, params, config, divisor, multiple):
        def values(name):
            if name in params:
                if not isinstance(params[name], Choice):
                    raise ValueError(
                        f"Hyperparameter `{name}` must be a choice (a list of values): it is "
                        f"constrained by `{divisor}` dividing `{multiple}`."
                    )
                return params[name].values, True
            if name in config:
                return (config[name],), False
            raise ValueError(f"The constraint `{divisor}` divides `{multiple}` names `{name}`, "
                             "which is neither a hyperparameter nor a config field.")

        divisors, divisor_searched = values(divisor)
        multiples, multiple_searched = values(multiple)
        if divisor_searched or multiple_searched:
            # Filter the searched side (the divisor when both are searched).
            name, side, others = (
                (divisor, divisors, multiples) if divisor_searched else (multiple, multiples, divisors)
            )

            def fits(v):
                return all(m % v == 0 for m in others) if divisor_searched else all(
                    v % d == 0 for d in others)

            keep = tuple(v for v in side if fits(v))
            rejected = [v for v in side if v not in keep]
            other = multiple if name == divisor else divisor
            relation = "divide every" if name == divisor else "be a multiple of every"
            if rejected and name in self.explicit:
                raise ValueError(
                    f"`{name}` values {rejected} do not {relation} `{other}` value "
                    f"{list(others)} (`{divisor}` must divide `{multiple}`)."
                )
            if not keep:
                raise ValueError(
                    f"No `{name}` value among {list(side)} can {relation} `{other}` value "
                    f"{list(others)} (`{divisor}` must divide `{multiple}`): change `{other}` "
                    f"or give `{name}` values in `space`."
                )
            params[name] = dataclasses.replace(params[name], values=keep)
        elif multiples[0] % divisors[0]:
            raise ValueError(
                f"`{divisor}` must divide `{multiple}`; received {divisor}={divisors[0]!r}, "
                f"{multiple}={multiples[0]!r}."
            )

    def __call__(self, hp, fixed=None):
        """Declare the hyperparameters on `hp`; return the config overrides they give."""
        fixed = dict(fixed or {})
        config = {**(self.base or {}), **fixed}
        overrides = {}
        for name, param in self.params.items():
            fields = _fields_of(name, param)
            if (fields and all(f in fixed for f in fields)) or (not fields and name in fixed):
                continue
            value = param.declare(hp, name, config)
            if not fields:
                continue  # a fit argument, read by the hypermodel's fit
            derived = param.derive(value, config) if param.derive else {f: value for f in fields}
            for field, field_value in derived.items():
                if field not in fixed:
                    config[field] = overrides[field] = field_value
        return overrides

    def __str__(self):
        lines = [self.description] if self.description else []
        for name, param in self.params.items():
            if isinstance(param, Choice):
                values = "computed from the config" if callable(param.values) else list(param.values)
            else:
                values = f"{param.min_value} .. {param.max_value} ({param.sampling})"
            fields = _fields_of(name, param)
            target = "fit argument" if not fields else ", ".join(fields)
            lines.append(f"  {name:<16} {values}  -> {target}")
        for divisor, multiple in self.divides:
            lines.append(f"  constraint: {divisor} divides {multiple}")
        return "\n".join(lines)

    def __repr__(self):
        return f"SearchSpace({', '.join(self.params)})"


def vit_patch_sizes(image_size):
    """Divisors p of `image_size` with p >= 2 and 2 <= image_size / p <= 32 (4 to 1024 patches)."""
    return tuple(p for p in range(2, image_size + 1) if image_size % p == 0 and 2 <= image_size // p <= 32)


TRANSFORMER_SPACE = SearchSpace(
    {
        "num_layers": Choice([1, 2, 3, 4, 6], fields=("num_encoder_layers", "num_decoder_layers")),
        "d_model": Choice([64, 128, 256, 512]),
        "num_heads": Choice([1, 2, 4, 8]),
        "intermediate_dim": Choice([256, 512, 1024, 2048]),
        "dropout": Choice([0.0, 0.1, 0.2, 0.3]),
        "label_smoothing": Choice([0.0, 0.1, 0.2]),
        "warmup_steps": Choice([500, 1000, 2000, 4000]),
        "batch_size": Choice([16, 32, 64, 128], fields=()),
    },
    divides=[("num_heads", "d_model")],
    description="Transformer: layers, d_model, heads (dividing d_model), d_ff, dropout, "
    "label smoothing, warm-up steps, batch size",
)

VIT_SPACE = SearchSpace(
    {
        "patch_size": Choice(lambda config: vit_patch_sizes(config["image_size"])),
        "num_layers": Choice([2, 4, 6, 8, 12]),
        "hidden_dim": Choice([64, 128, 192, 256, 384]),
        "num_heads": Choice([1, 2, 4, 8]),
        "mlp_ratio": Choice(
            [2, 4], fields=("mlp_dim",),
            derive=lambda ratio, config: {"mlp_dim": ratio * config["hidden_dim"]},
        ),
        "dropout": Choice([0.0, 0.1, 0.2]),
        "learning_rate": Float(1e-4, 3e-3, sampling="log"),
        "weight_decay": Choice([0.0, 0.01, 0.05, 0.1]),
        "batch_size": Choice([32, 64, 128], fields=()),
    },
    divides=[("patch_size", "image_size"), ("num_heads", "hidden_dim")],
    description="ViT: patch size (dividing the image size), depth, width, heads (dividing "
    "the width), MLP ratio, dropout, learning rate, weight decay, batch size",
)

_RNN_UNITS = ("encoder_units", "decoder_units", "attention_units", "maxout_units")

SEQ2SEQ_SPACE = SearchSpace(
    {
        "units": Choice(
            [64, 128, 256, 512, 1000], fields=_RNN_UNITS,
            derive=lambda units, config: {
                "encoder_units": units, "decoder_units": units, "attention_units": units,
                "maxout_units": max(1, units // 2),
            },
        ),
        "embedding_dim": Choice([32, 64, 128, 256, 620]),
        "cell": Choice(["gru", "lstm"]),
        "dropout": Choice([0.0, 0.1, 0.2, 0.3]),
        "learning_rate": Float(1e-4, 1e-2, sampling="log"),
        "batch_size": Choice([16, 32, 64, 128], fields=()),
    },
    description="RNN + Bahdanau attention: units, embedding size, cell, dropout, learning "
    "rate, batch size",
)

registry.register_search_space(TransformerConfig, TRANSFORMER_SPACE)
registry.register_search_space(ViTConfig, VIT_SPACE)
registry.register_search_space(Seq2SeqConfig, SEQ2SEQ_SPACE)


# === The hypermodel ===


def _is_dataset(data):
    import tensorflow as tf

    return isinstance(data, tf.data.Dataset)


def _is_data_function(data):
    return callable(data) and not _is_dataset(data) and not hasattr(data, "shape")


class ZooHyperModel(keras_tuner.HyperModel):
    """The `keras_tuner.HyperModel` of a zoo entry (made by `zoo.hypermodel`).

    `build(hp)` returns `zoo.get(name, **config_overrides(hp))`, compiled with
    the family's recipe; `fit(hp, model, x, y, ...)` trains it with the
    trial's batch size.

    Data for `fit` (as passed to `tuner.search`): arrays or dicts of arrays
    (`x` `{"source": (N, S), "target": (N, T)}` and `y` `(N, T)` for the
    sequence models, `x` `(N, H, W, C)` and `y` `(N,)` for ViT), a function
    `global_batch_size -> tf.data.Dataset` (for `x` and `validation_data`), or
    an already batched `tf.data.Dataset` when the batch size is fixed to
    `None`. The `batch_size` hyperparameter counts examples per replica, as
    in `zoo train`: under a strategy with R replicas, the global batch is R
    times larger. A data function's training dataset is repeated when
    `steps_per_epoch` is given, so every epoch has that many steps.

    Attributes:
        model_name: the registry name.
        search_space: the resolved `SearchSpace`, or the entry's function.
        fixed: the config fields held constant.
        fit_fixed: fixed fit arguments (`{"batch_size": ...}`).
    """

    def __init__(self, model_name, search_space, fixed, fit_fixed):
        super().__init__(name=model_name)
        self.model_name = model_name
        self.search_space = search_space
        self.fixed = dict(fixed)
        self.fit_fixed = dict(fit_fixed)
        self._fields = {f.name for f in dataclasses.fields(registry.entry(model_name).config)}

    def declare_hyperparameters(self, hp):
        # The whole space is known before the first trial (Bayesian optimisation
        # and Hyperband then see `batch_size` from the start).
        self.search_space(hp, dict(self.fixed))

    def config_overrides(self, hp):
        """The config fields of the trial `hp`: the searched values and the fixed ones."""
        overrides = self.search_space(hp, dict(self.fixed))
        if not isinstance(overrides, dict):
            raise ValueError(
                f"The search space of {self.model_name!r} must return a dict of config "
                f"overrides; received {type(overrides).__name__}."
            )
        unknown = sorted(set(overrides) - self._fields)
        if unknown:
            raise ValueError(
                f"The search space of {self.model_name!r} returned unknown config field(s) "
                f"{', '.join(unknown)}. Valid fields: {', '.join(sorted(self._fields))}."
            )
        return {**overrides, **self.fixed}

    def fit_arguments(self, hp):
        """`{"batch_size": B}` for the trial `hp` (empty when batching is left to the data)."""
        if "batch_size" in self.fit_fixed:
            batch_size = self.fit_fixed["batch_size"]
        else:
            batch_size = hp.values.get("batch_size")
        return {} if batch_size is None else {"batch_size": batch_size}

    def build(self, hp):
        return registry.get(self.model_name, **self.config_overrides(hp))

    def fit(self, hp, model, x=None, y=None, *args, validation_data=None, **kwargs):
        """Train `model` with the trial's batch size; returns the `History`."""
        if "batch_size" in kwargs:
            raise ValueError(
                "Do not pass `batch_size` to search/fit: it is a hyperparameter. Fix it with "
                "zoo.hypermodel(name, batch_size=...) or narrow it with space={'batch_size': [...]}."
            )
        batch_size = self.fit_arguments(hp).get("batch_size")
        if batch_size is not None:  # per replica, as in `zoo train`
            strategy = getattr(model, "distribute_strategy", None)
            batch_size *= getattr(strategy, "num_replicas_in_sync", 1)
        x_is_function = _is_data_function(x)
        if x_is_function or _is_data_function(validation_data):
            if batch_size is None:
                raise ValueError(
                    "Data given as a function batch_size -> dataset needs a batch size; "
                    "received batch_size=None."
                )
            if x_is_function:
                x = x(batch_size)
                if kwargs.get("steps_per_epoch") and _is_dataset(x):
                    x = x.repeat()  # epochs of exactly steps_per_epoch steps
            if _is_data_function(validation_data):
                validation_data = validation_data(batch_size)
        elif _is_dataset(x) and batch_size is not None:
            raise ValueError(
                f"The batch size is a hyperparameter (batch_size={batch_size}) but `x` is an "
                "already batched tf.data.Dataset: pass arrays or a function "
                "batch_size -> dataset, or make the hypermodel with batch_size=None."
            )
        elif batch_size is not None:
            kwargs["batch_size"] = batch_size
        if _is_dataset(x):
            kwargs.setdefault("shuffle", False)  # a dataset shuffles itself; Keras warns otherwise
        return model.fit(x, y, *args, validation_data=validation_data, **kwargs)


def _validate_candidates(name, space, fixed):
    """Make the config at the space's defaults, then at every candidate value of each
    hyperparameter (the others at their defaults): bad values fail before any trial."""

    def check(values, what):
        hp = keras_tuner.HyperParameters()
        hp.values.update(values)
        overrides = space(hp, fixed)
        try:
            registry.config(name, **{**overrides, **fixed})
        except ValueError as error:
            raise ValueError(f"Tuning {name!r}: {what} gives an invalid config: {error}") from None

    check({}, f"the fixed values {fixed} with the search space's first values")
    for hp_name, param in space.params.items():
        for value in param.candidates(space.base):
            check({hp_name: value}, f"hyperparameter {hp_name}={value!r}")


def _check_batch_size(value):
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
        raise ValueError(
            f"`batch_size` must be a positive integer or None; received batch_size={value!r}."
        )


def hypermodel(name, *, space=None, **fixed):
    """The `keras_tuner.HyperModel` of the zoo entry `name`.

    Args:
        name: a registry name (`zoo.list()`), including entries added with
            `zoo.register` (their own search space, else their family's).
        space: dict from hyperparameter name to new values (a list), a range
            (`{"min_value", "max_value"[, "step", "sampling"]}`) or a
            `Choice`/`Int`/`Float`; only for `SearchSpace` search spaces.
        **fixed: config fields held constant (e.g. `vocabulary_size=1000`), and
            `batch_size` (an int, or None to leave batching to the data).

    Returns:
        A `ZooHyperModel`: `build(hp)` returns the compiled model.

    Raises:
        ValueError: unknown model, field or hyperparameter; a fixed value or a
            searched value the config rejects; a broken constraint (e.g. no
            `num_heads` value dividing `d_model`); an entry without a search space.
    """
    item = registry.entry(name)
    search = registry.search_space(name)
    if search is None:
        raise ValueError(
            f"Model {name!r} has no search space: register it with "
            "zoo.register(..., search_space=...) or use one of the zoo's config classes."
        )
    fixed = dict(fixed)
    fit_fixed = {key: fixed.pop(key) for key in FIT_ARGUMENTS if key in fixed}
    if "batch_size" in fit_fixed:
        _check_batch_size(fit_fixed["batch_size"])
    if isinstance(search, SearchSpace):
        # Fixed values are validated with the searched ones (a fixed image_size
        # need not suit the entry's patch_size, which is searched).
        fields = [f.name for f in dataclasses.fields(item.config)]
        unknown = sorted(set(fixed) - set(fields))
        if unknown:
            raise ValueError(
                f"Unknown field(s) {', '.join(unknown)} for model {name!r}. "
                f"Valid fields: {', '.join(fields)} (and batch_size)."
            )
        base = {**dataclasses.asdict(item.config), **fixed}
        search = search.replace(**(space or {})).resolve(base, set(fixed) | set(fit_fixed))
        _validate_candidates(name, search, fixed)
    else:
        if space:
            raise ValueError(
                f"`space` overrides need a zoo.tuning.SearchSpace; the search space of {name!r} "
                f"is a function ({getattr(search, '__name__', search)!r})."
            )
        registry.config(name, **fixed)  # unknown fields and bad values fail here
        # A dry run at the defaults: returned fields and values are checked now.
        overrides = search(keras_tuner.HyperParameters(), dict(fixed))
        if not isinstance(overrides, dict):
            raise ValueError(
                f"The search space of {name!r} must return a dict of config overrides; "
                f"received {type(overrides).__name__}."
            )
        fields = [f.name for f in dataclasses.fields(item.config)]
        unknown = sorted(set(overrides) - set(fields))
        if unknown:
            raise ValueError(
                f"The search space of {name!r} returned unknown config field(s) "
                f"{', '.join(unknown)}. Valid fields: {', '.join(fields)}."
            )
        registry.config(name, **{**overrides, **fixed})
    return ZooHyperModel(name, search, fixed, fit_fixed)


# === Tuners ===


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
        raise ValueError(f"`objective` must be a metric name; received {spec!r}.")
    name, _, direction = spec.partition(":")
    if direction:
        if direction not in ("min", "max"):
            raise ValueError(
                f"The objective's direction must be 'min' or 'max'; received {spec!r}."
            )
    else:
        lowered = name.lower()
        if any(word in lowered for word in _MINIMISE):
            direction = "min"
        elif any(word in lowered for word in _MAXIMISE):
            direction = "max"
        else:
            raise ValueError(
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
        raise ValueError(f"`tuner` must be one of {TUNERS}; received tuner={tuner!r}.")
    if isinstance(max_trials, bool) or not isinstance(max_trials, int) or max_trials <= 0:
        raise ValueError(f"`max_trials` must be a positive integer; received {max_trials!r}.")
    if isinstance(strategy, str):
        from zoo import distribute

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



# === Results ===


def _completed(tuner, num_trials):
    trials = tuner.oracle.get_best_trials(len(tuner.oracle.trials))
    done = [t for t in trials if t.status == keras_tuner.engine.trial.TrialStatus.COMPLETED]
    return done[:num_trials]


def _num_params(name, overrides):
    with contextlib.suppress(Exception):
        description = registry.describe(name, **overrides)
        if description.num_params is not None:
            return description.num_params
        return registry.get(name, compile=False, **overrides).count_params()
    return None


def best_config(tuner, hypermodel, tuner_name=None):
    """The best completed trial as the `best_config.json` dict (see the module doc)."""
    trials = _completed(tuner, 1)
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
        "num_params": _num_params(hypermodel.model_name, config),
        "tuner": tuner_name or type(tuner).__name__,
        "hyperparameters": {k: v for k, v in hp.values.items() if not k.startswith("tuner/")},
    }


def results_table(tuner, hypermodel, num_trials=5):
    """A text table of the best completed trials: rank, trial, objective, parameters, values."""
    trials = _completed(tuner, num_trials)
    objective_ = tuner.oracle.objective
    names = []
    for trial in trials:
        names += [k for k in trial.hyperparameters.values if k not in names and "/" not in k]
    header = ["rank", "trial", f"{objective_.name} ({objective_.direction})", "params"] + names
    rows = []
    for rank, trial in enumerate(trials, 1):
        values = trial.hyperparameters.values
        params = _num_params(hypermodel.model_name, hypermodel.config_overrides(trial.hyperparameters))
        rows.append(
            [str(rank), trial.trial_id, f"{trial.score:.4g}", "?" if params is None else f"{params:,}"]
            + [_short(values.get(n, "-")) for n in names]
        )
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in [header] + rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _short(value):
    if isinstance(value, float) and value and not 1e-2 <= abs(value) < 1e4:
        return f"{value:.3g}"
    return str(value)


def write_best_config(best, path):
    """Write `best` as JSON to `path` (atomically: a finished file or none)."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(best, indent=2) + "\n")
    os.replace(temporary, path)
    return path


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
        raise ValueError(
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


@dataclasses.dataclass
class TuningData:
    """Data for `tune` from a dataset spec (what `load_data` returns).

    Attributes:
        train, validation: functions `global_batch_size -> tf.data.Dataset` of
            `(x, y)` batches (validation None without a validation share).
        fixed: the config fields the data dictates (`vocabulary_size`, or
            `image_size`, `channels`, `num_classes`, `decay_steps`).
        kind: `"translation"` or `"image"`.
        num_train, num_validation: examples in each split.
    """

    train: Callable
    validation: Callable | None
    fixed: dict
    kind: str
    num_train: int
    num_validation: int


def load_data(name, spec, *, fixed=None, space=None, val_ratio=0.1, seed=0, epochs=1,
              steps_per_epoch=None, quiet=False, **options):
    """Load a dataset named as `zoo train --data` names it, ready for `tune`.

    Reuses `zoo.train`'s loading: translation pairs get a shared WordPiece
    vocabulary of at most the config's `vocabulary_size` tokens (learned once,
    on the training split) and the teacher-forcing pipeline; images are batched
    uint8 arrays. A seeded share `val_ratio` of the training split is held out
    for validation; the test split is not used.

    Args:
        name: the registry name (decides translation or images).
        spec: `numbers`, `dates`, `tsv:PATH`, `digits`, `fashion-mnist`, `images:DIR`.
        fixed: the user's fixed config fields (the tokenizer's size cap,
            `max_length`, `image_size` for `images:`) and `batch_size`; a value
            that contradicts the data raises a `ValueError`.
        space: the search-space overrides (their `batch_size` values count
            for `decay_steps`).
        val_ratio: the validation share, in (0, 1) for a `val_*` objective.
        seed: the split and generation seed.
        epochs, steps_per_epoch: for ViT's `decay_steps` unless fixed: epochs ×
            steps per epoch (at most `steps_per_epoch`) at the smallest batch
            size of the family's search space, so that no trial's learning rate
            decays past zero.
        quiet: print nothing.
        **options: `zoo.datasets.load` options (`data_dir`, `train_size`, ...).

    Returns:
        A `TuningData`.
    """
    import functools
    import math

    from zoo import distribute
    from zoo import train as training

    fixed_batch = dict(fixed or {}).get("batch_size")
    fixed = {k: v for k, v in dict(fixed or {}).items() if k not in FIT_ARGUMENTS}
    base = dataclasses.asdict(registry.config(name, **fixed))
    options = {key: options.get(key) for key in training.DATA_OPTIONS}
    kind, data = training.load_data(name, spec, options, base, seed, quiet)
    if kind == "translation":
        tokenizers = training.learn_tokenizers(data.train_pairs, base, quiet=quiet)
        count = len(data.train_pairs)

        def make(global_batch):
            return training.translation_datasets(
                data.train_pairs, *tokenizers, global_batch, base["max_length"], val_ratio, seed,
            )
    else:
        tokenizers = None
        count = len(data.x_train)

        def make(global_batch):
            return training.image_datasets(data.x_train, data.y_train, global_batch, val_ratio, seed)

    datasets_for = functools.lru_cache(maxsize=4)(make)
    train_index, validation_index = training.split_validation(count, val_ratio, seed)
    num_train, num_validation = len(train_index), len(validation_index)
    total_steps = None
    if "decay_steps" in base and "decay_steps" not in fixed:
        batch_sizes = [fixed_batch or 16]
        search = registry.search_space(name)
        if not fixed_batch and isinstance(search, SearchSpace) and "batch_size" in search.params:
            search = search.replace(**{k: v for k, v in (space or {}).items() if k == "batch_size"})
            batch_sizes = list(search.params["batch_size"].candidates(base))
        steps = math.ceil(num_train / min(batch_sizes))
        if steps_per_epoch:
            steps = min(steps, steps_per_epoch)
        total_steps = epochs * steps
    derived = training.config_from_data(
        base, kind, data, tokenizers, overrides=fixed, total_steps=total_steps
    )

    def train_data(global_batch):
        return distribute.shard_by_data(datasets_for(global_batch)[0])

    def validation_data(global_batch):
        return distribute.shard_by_data(datasets_for(global_batch)[1])

    return TuningData(
        train_data, validation_data if num_validation else None, derived, kind, num_train,
        num_validation,
    )


def _split_data(data):
    if isinstance(data, tuple):
        if len(data) != 2:
            raise ValueError(
                f"`data` as a tuple must be (x, y); received a tuple of {len(data)} items."
            )
        return data
    if _is_dataset(data) or _is_data_function(data):
        return data, None
    raise ValueError(
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
    x, y = _split_data(data)
    if _is_dataset(x):
        if fixed.setdefault("batch_size", None) is not None:  # the dataset's own batches
            raise ValueError(
                f"batch_size={fixed['batch_size']!r} cannot apply to an already batched "
                "tf.data.Dataset: leave batch_size out, or pass arrays or a function "
                "global_batch_size -> dataset."
            )
    if objective_requires_validation(objective) and validation_data is None and not validation_split:
        raise ValueError(
            f"The objective {objective!r} is a validation metric: pass validation_data "
            "(or validation_split with arrays)."
        )
    model = hypermodel(name, space=space, **fixed)
    settings_path, settings = _check_same_search(
        pathlib.Path(directory) / (project_name or name), model, tuner, objective, overwrite
    )
    search = make_tuner(
        model, tuner, objective=objective, max_trials=max_trials, directory=directory,
        project_name=project_name, overwrite=overwrite, strategy=strategy, seed=seed,
        max_epochs=max_epochs or epochs, executions_per_trial=executions_per_trial,
        max_consecutive_failed_trials=max_consecutive_failed_trials,
    )
    if verbose:
        print(f"Search space of {name}:")
        print(model.search_space if isinstance(model.search_space, SearchSpace)
              else f"  the entry's function {getattr(model.search_space, '__name__', '')}")
        if model.fixed or model.fit_fixed:
            print(f"Fixed: {', '.join(f'{k}={v!r}' for k, v in {**model.fixed, **model.fit_fixed}.items())}")
    settings_path.parent.mkdir(parents=True, exist_ok=True)  # after any overwrite
    settings_path.write_text(json.dumps(settings, indent=2) + "\n")
    fit_kwargs = dict(epochs=epochs, callbacks=list(callbacks or []), verbose=verbose)
    if validation_data is not None:
        fit_kwargs["validation_data"] = validation_data
    if validation_split:
        fit_kwargs["validation_split"] = validation_split
    if steps_per_epoch is not None:
        fit_kwargs["steps_per_epoch"] = steps_per_epoch
    if validation_steps is not None:
        fit_kwargs["validation_steps"] = validation_steps
    search.search(x, y, **fit_kwargs)
    best = best_config(search, model, tuner)
    path = write_best_config(best, pathlib.Path(directory) / BEST_CONFIG)
    table = results_table(search, model, num_best)
    if verbose:
        done = len(_completed(search, len(search.oracle.trials)))
        print(f"\nBest of {done} completed trial(s) of {name} ({tuner} search):")
        print(table)
        print(f"\nBest config written to {path}")
    return TuneResult(search, model, best, path, table)


def _check_same_search(project_dir, model, tuner, objective_spec, overwrite):
    """Refuse to resume a project that searched another space (keras-tuner would mix them).

    The settings of a search (model, fixed values, declared hyperparameters,
    tuner, objective) are written to `project_dir/zoo_search.json` when it
    starts; a later run with the same directory must have the same ones.

    Returns:
        `(path, settings)` for the caller to write once the tuner exists.
    """
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
        saved = json.loads(path.read_text())
        changed = sorted(k for k in settings if settings[k] != saved.get(k))
        if changed:
            raise ValueError(
                f"{project_dir} holds a search with other settings ({', '.join(changed)} "
                "differ), so it cannot be continued: pass the same model, fixed values, "
                "space, tuner and objective, overwrite=True (--overwrite) to start over, or "
                "another directory."
            )
    return path, settings


def objective_requires_validation(spec):
    name = spec.name if isinstance(spec, keras_tuner.Objective) else str(spec).partition(":")[0]
    return name.startswith("val_")


__all__ = [
    "BEST_CONFIG",
    "Choice",
    "Float",
    "Int",
    "SEQ2SEQ_SPACE",
    "SearchSpace",
    "TRANSFORMER_SPACE",
    "TUNERS",
    "TuneResult",
    "TuningData",
    "VIT_SPACE",
    "ZooHyperModel",
    "best_config",
    "hypermodel",
    "load_best_config",
    "load_data",
    "make_tuner",
    "parse_objective",
    "results_table",
    "tune",
    "vit_patch_sizes",
    "write_best_config",
]
