"""`zoo.hypermodel(name, **fixed)`: a zoo entry as a `keras_tuner.HyperModel`.

Each trial builds `zoo.get(name, **fixed, **sampled)`; the sampled
`batch_size` (a fit argument, not a config field) goes to `fit`.
"""

import dataclasses

import keras_tuner
import tensorflow as tf

from keras_attention.checks import check_positive_int
from zoo import registry
from zoo.errors import ZooError
from zoo.runs.callbacks import build_optimizer
from zoo.tuning.space import FIT_ARGUMENTS, SearchSpace


def is_dataset(data):
    return isinstance(data, tf.data.Dataset)


def is_data_function(data):
    return callable(data) and not is_dataset(data) and not hasattr(data, "shape")


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
            raise ZooError(
                f"The search space of {self.model_name!r} must return a dict of config "
                f"overrides; received {type(overrides).__name__}."
            )
        unknown = sorted(set(overrides) - self._fields)
        if unknown:
            raise ZooError(
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
            raise ZooError(
                "Do not pass `batch_size` to search/fit: it is a hyperparameter. Fix it with "
                "zoo.hypermodel(name, batch_size=...) or narrow it with space={'batch_size': [...]}."
            )
        batch_size = self.fit_arguments(hp).get("batch_size")
        if batch_size is not None:  # per replica, as in `zoo train`
            strategy = getattr(model, "distribute_strategy", None)
            batch_size *= getattr(strategy, "num_replicas_in_sync", 1)
        x_is_function = is_data_function(x)
        if x_is_function or is_data_function(validation_data):
            if batch_size is None:
                raise ZooError(
                    "Data given as a function batch_size -> dataset needs a batch size; "
                    "received batch_size=None."
                )
            if x_is_function:
                x = x(batch_size)
                if kwargs.get("steps_per_epoch") and is_dataset(x):
                    x = x.repeat()  # epochs of exactly steps_per_epoch steps
            if is_data_function(validation_data):
                validation_data = validation_data(batch_size)
        elif is_dataset(x) and batch_size is not None:
            raise ZooError(
                f"The batch size is a hyperparameter (batch_size={batch_size}) but `x` is an "
                "already batched tf.data.Dataset: pass arrays or a function "
                "batch_size -> dataset, or make the hypermodel with batch_size=None."
            )
        elif batch_size is not None:
            kwargs["batch_size"] = batch_size
        if is_dataset(x):
            kwargs.setdefault("shuffle", False)  # a dataset shuffles itself; Keras warns otherwise
        build_optimizer(model)  # made inside fit's first trace, they would trace it twice
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
        except ZooError as error:
            raise ZooError(f"Tuning {name!r}: {what} gives an invalid config: {error}") from None

    check({}, f"the fixed values {fixed} with the search space's first values")
    for hp_name, param in space.params.items():
        for value in param.candidates(space.base):
            check({hp_name: value}, f"hyperparameter {hp_name}={value!r}")


def _check_batch_size(value):
    check_positive_int("batch_size", value, allow_none=True)


def _unknown_fields(config, names):
    """`(the config's field names, the sorted names among `names` that are not fields)`."""
    fields = [field.name for field in dataclasses.fields(config)]
    return fields, sorted(set(names) - set(fields))


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
        raise ZooError(
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
        fields, unknown = _unknown_fields(item.config, fixed)
        if unknown:
            raise ZooError(
                f"Unknown field(s) {', '.join(unknown)} for model {name!r}. "
                f"Valid fields: {', '.join(fields)} (and batch_size)."
            )
        base = {**dataclasses.asdict(item.config), **fixed}
        search = search.replace(**(space or {})).resolve(base, set(fixed) | set(fit_fixed))
        _validate_candidates(name, search, fixed)
    else:
        if space:
            raise ZooError(
                f"`space` overrides need a zoo.tuning.SearchSpace; the search space of {name!r} "
                f"is a function ({getattr(search, '__name__', search)!r})."
            )
        registry.config(name, **fixed)  # unknown fields and bad values fail here
        # A dry run at the defaults: returned fields and values are checked now.
        overrides = search(keras_tuner.HyperParameters(), dict(fixed))
        if not isinstance(overrides, dict):
            raise ZooError(
                f"The search space of {name!r} must return a dict of config overrides; "
                f"received {type(overrides).__name__}."
            )
        fields, unknown = _unknown_fields(item.config, overrides)
        if unknown:
            raise ZooError(
                f"The search space of {name!r} returned unknown config field(s) "
                f"{', '.join(unknown)}. Valid fields: {', '.join(fields)}."
            )
        registry.config(name, **{**overrides, **fixed})
    return ZooHyperModel(name, search, fixed, fit_fixed)
