"""The registry of ready-made models: `zoo.get`, `zoo.list`, `zoo.config`, `zoo.describe`.

An entry is a name, a frozen config dataclass (the single source of sizes) and
a builder `config -> keras.Model`. Each model family (Transformer, RNN with
Bahdanau attention, ViT) registers its config class with its training recipe
(`compile_fn`), so that entries users add with `zoo.register` get compiled,
tuned and exported like the built-in ones. A config whose class derives from
a family's config class belongs to that family (its recipe, search space and
weights hooks), unless its own class is registered.

This package imports nothing heavy (no Keras, no TensorFlow), so that `zoo list`
and `zoo describe` run without them: the zoo's families register their configs
from their light `config` modules, with the builder, the recipe and the weights
hooks as `Lazy` references (`"zoo.transformer.model", "build"`), which import
their module when first called. `get`, which builds, lives in
`zoo.registry.building` and loads on first use (`registry.get` still names it).
"""

import dataclasses
import difflib
import fnmatch
import importlib
import warnings
from typing import Any, Callable

from keras_attention.checks import ArgumentError
from zoo.errors import ZooError
from zoo.registry.family import (  # noqa: F401 - part of this module's API
    _FAMILIES,
    Family,
    Lazy,
    add_family,
    check_search_space,
    family_attr,
    family_named,
    family_of,
    family_of_model,
    package_family,
    register_family,
    register_search_space,
    register_weights,
)


class UnknownModelError(ZooError):
    """`zoo.get` and friends were given a name that is not registered."""


@dataclasses.dataclass(frozen=True)
class Entry:
    name: str
    builder: Callable
    config: Any
    reference: str = ""
    compile_fn: Callable | None = None
    search_space: Callable | None = None

    @property
    def family(self):
        family = family_of(self.config)
        return family.name if family else "custom"


_REGISTRY: dict[str, Entry] = {}


# === What the translation families' configs share ===


class TranslationConfig:
    """Vocabulary sizes and the model signature of a source -> target translation config.

    A base class without fields for the frozen config dataclasses of the
    Transformer, RNNsearch and ConvS2S families; each declares
    `vocabulary_size`, `source_vocabulary_size` and `target_vocabulary_size`
    (None = `vocabulary_size`).
    """

    @property
    def source_vocab(self):
        return self.source_vocabulary_size or self.vocabulary_size

    @property
    def target_vocab(self):
        return self.target_vocabulary_size or self.vocabulary_size

    def signature(self):
        """The inputs and outputs of the built model, as `zoo.describe` prints them."""
        inputs = {"source": "int32 (batch, source_length), 0 = padding",
                  "target": "int32 (batch, target_length), decoder input starting with [START]"}
        if getattr(self, "copy", False):  # a pointer-generator (zoo.text.copying)
            inputs["source_extended"] = ("int32 (batch, source_length), the source's ids in the "
                                         "extended target vocabulary")
            return inputs, {"log_probs": "float32 (batch, target_length, "
                                         f"{self.target_vocab} + source_length)"}
        return inputs, {"logits": f"float32 (batch, target_length, {self.target_vocab})"}


# === Registration ===


def register(
    name,
    builder,
    config,
    *,
    reference="",
    compile_fn=None,
    search_space=None,
    overwrite=False,
):
    """Add a model to the zoo.

    Args:
        name: the registry name, e.g. `"my-transformer"`.
        builder: `config -> keras.Model` (uncompiled).
        config: a frozen dataclass instance; overrides given to `zoo.get` replace
            its fields. With one of the zoo's config classes (e.g.
            `zoo.transformer.TransformerConfig`), the family's recipe, search
            space and attention inspection apply.
        reference: the paper or source of the sizes.
        compile_fn: `(model, config) -> None` compiling the model; defaults to
            the family's recipe.
        search_space: for `zoo.hypermodel` / `zoo tune`: a
            `zoo.tuning.SearchSpace`, or a function `(hp, fixed) -> dict of
            config overrides` declaring its hyperparameters on the
            `keras_tuner.HyperParameters` `hp` and leaving the config fields in
            `fixed` alone; defaults to the family's.
        overwrite: replace an existing entry silently (otherwise a warning).
    """
    if not isinstance(name, str) or not name:
        raise ZooError(f"A model name must be a non-empty string; received {name!r}.")
    if not callable(builder):
        raise ZooError(f"`builder` must be callable (config -> keras.Model); received {builder!r}.")
    if not dataclasses.is_dataclass(config) or isinstance(config, type):
        raise ZooError(
            f"`config` must be a dataclass instance; received {type(config).__name__}."
        )
    check_search_space(search_space)
    if name in _REGISTRY and not overwrite:
        warnings.warn(f"zoo.register: replacing the existing entry {name!r}.", stacklevel=2)
    _REGISTRY[name] = Entry(name, builder, config, reference, compile_fn, search_space)
    return _REGISTRY[name]


def unregister(name):
    """Remove an entry (for entries added by users and tests)."""
    _entry(name)
    del _REGISTRY[name]


def _entry(name):
    if name in _REGISTRY:
        return _REGISTRY[name]
    close = difflib.get_close_matches(str(name), _REGISTRY.keys(), n=3, cutoff=0.5)
    hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    raise UnknownModelError(
        f"Unknown model {name!r}.{hint} Available models: {', '.join(list())}."
    )


def entry(name):
    """The registry entry of `name` (builder, config, reference, recipe)."""
    return _entry(name)


def list(pattern="*"):  # noqa: A001 - the public name asked for is zoo.list
    """Sorted registry names matching a glob pattern, e.g. `zoo.list("vit-*")`."""
    return sorted(n for n in _REGISTRY if fnmatch.fnmatchcase(n, pattern))


def config(name, *, weights=None, **overrides):
    """The frozen config of `name` with `overrides` applied (validated, nothing built).

    With `weights` (a checkpoint path, see `get`): the config `get` builds for
    that file, i.e. the fields the file implies and the fine-tuning recipe
    under `overrides`.
    """
    if weights is not None:
        overrides = weights_overrides(name, weights, overrides)
    base = _checked_fields(name, overrides)
    try:
        return dataclasses.replace(base, **_one_of_each(base, overrides))
    except ArgumentError as error:  # a field's check (`keras_attention.checks`): the user's value
        if isinstance(error, ZooError):
            raise
        raise ZooError(str(error)) from None


def _one_of_each(base, overrides):
    """`overrides`, where a field of one of the config's `ONE_OF` groups, given alone (not None),
    sets the group's others to None: `clipnorm=1.0`, Keras' per-variable clipping and the field
    of runs saved before `global_clipnorm` (RNNsearch, ConvS2S), switches the recipe's off."""
    for group in getattr(base, "ONE_OF", ()):
        given = [field for field in group if field in overrides]
        if len(given) == 1 and overrides[given[0]] is not None:
            overrides = {**{field: None for field in group}, **overrides}
    return overrides


def _checked_fields(name, overrides):
    """`name`'s default config, after checking that `overrides` names only its fields."""
    base = _entry(name).config
    fields = [f.name for f in dataclasses.fields(base)]
    unknown = sorted(set(overrides) - set(fields))
    if unknown:
        raise ZooError(
            f"Unknown field(s) {', '.join(unknown)} for model {name!r}. "
            f"Valid fields: {', '.join(fields)}."
        )
    return base


def family(name):
    """The `Family` of `name`'s config (recipe, search space, weights hooks), or None."""
    return family_of(_entry(name).config)


def weights_overrides(name, weights, overrides):
    """The config overrides `get(name, weights=weights, **overrides)` builds with: the
    file's architecture fields and fine-tuning recipe under `overrides`, which win
    (ViT); a folder the family imports fixes its fields, and an override that
    contradicts one raises a `ValueError` naming the field (Transformer, `zoo.transformer.weights.marian`).
    """
    import_config = family_attr(_entry(name).config, "import_config")
    if import_config is None:
        return read_weights(name, weights, overrides)[1]
    base = _checked_fields(name, overrides)
    imported = import_config(weights, base, **overrides)
    return {field.name: getattr(imported, field.name) for field in dataclasses.fields(base)
            if field.name in overrides
            or getattr(imported, field.name) != getattr(base, field.name)}


def read_weights(name, weights, overrides):
    """`(checkpoint, overrides with the file's fields and recipe under them)`."""
    reader = family_attr(_entry(name).config, "read_weights")
    if reader is None:
        raise ZooError(f"Model {name!r} ({_entry(name).family}) cannot load `weights`; "
                       f"received {weights!r}.")
    checkpoint = reader(weights)
    return checkpoint, checkpoint.overrides(overrides)


def search_space(name):
    """The search-space function of an entry (its own or its family's), or None."""
    item = _entry(name)
    return item.search_space or family_attr(item.config, "search_space")


def __getattr__(name):
    # `get` builds models (Keras, strategies): its module loads when it is first asked for.
    if name == "get":
        return importlib.import_module("zoo.registry.building").get
    raise AttributeError(f"module 'zoo.registry' has no attribute {name!r}")


__all__ = [
    "Entry",
    "Family",
    "Lazy",
    "UnknownModelError",
    "add_family",
    "config",
    "entry",
    "family",
    "family_named",
    "family_of",
    "family_of_model",
    "get",
    "list",
    "package_family",
    "register",
    "register_family",
    "register_search_space",
    "register_weights",
    "search_space",
    "unregister",
    "weights_overrides",
]
