"""The families of the zoo: one `Family` object per family, which the registry holds.

A family is what the generic machinery asks about a model: `zoo.registry.building` its
builder and recipe, `zoo.decode` its cached decoding step, `zoo.export` its export task,
`zoo.tuning` its search space, `zoo.get(name, weights=...)` its weights hooks. Each of the
zoo's family packages (`zoo.transformer`, `zoo.seq2seq`, `zoo.convs2s`, `zoo.vit`) has the
same shape, `config.py`, `model.py` (`build`), `recipe.py` (`compile_model`),
`decoding.py` (`stepper`, where it decodes) and `weights/` (pretrained imports), and
registers its object in its `__init__.py` with `package_family`, whose references are
`Lazy`: registering imports no Keras.

A built model records its family (`zoo.registry.model.FamilyModel`, kept in `.keras`
files); `family_of_model` reads it, and for files saved before it was recorded, the layer
names (`zoo.families.model_family`).
"""

import dataclasses
import importlib
from typing import Callable

from zoo import families
from zoo.errors import ZooError


@dataclasses.dataclass(frozen=True)
class Lazy:
    """A function named by its module, imported when first called: a family's builder,
    recipe or weights hook, registered without importing Keras.

    `Lazy("zoo.transformer.model", "build")(config)` is `zoo.transformer.model.build(config)`.
    """

    module: str
    name: str

    def resolve(self):
        """The function itself (its module imported)."""
        return getattr(importlib.import_module(self.module), self.name)

    def __call__(self, *args, **kwargs):
        return self.resolve()(*args, **kwargs)


@dataclasses.dataclass(eq=False)
class Family:
    """What the zoo knows about a family of configs: one object per family, which the
    registry holds and the hooks registered later (`register_weights`,
    `register_search_space`) complete in place, so the family package's `FAMILY` is it.

    Fields: `name` (`"transformer"`, ...); `compile_fn`, the recipe `(model, config) -> None`
    (also `recipe`); `search_space`; the weights hooks (`register_family`);
    `config_class`; `build`, `config -> keras.Model`; `step`, the cached decoding step
    `(model, layers by name, pad_id, source_extended or None) -> stepper or None`
    (`zoo.decode.steps`), None where the family does not decode; `export_task`,
    `"translation"` or `"image"` (`zoo.export`); `attention_weights`,
    `(model, inputs) -> {name: weights}`.
    """

    name: str
    compile_fn: Callable | None = None
    search_space: Callable | None = None
    read_weights: Callable | None = None
    import_weights: Callable | None = None
    import_config: Callable | None = None
    import_tokenizers: Callable | None = None
    config_class: type | None = None
    build: Callable | None = None
    step: Callable | None = None
    export_task: str | None = None
    attention_weights: Callable | None = None

    @property
    def recipe(self):
        """The family's training recipe, `(model, config) -> None` (`compile_fn`)."""
        return self.compile_fn


_FAMILIES: dict[type, Family] = {}


def add_family(family):
    """Register a `Family` object under its `config_class`; returns it."""
    _FAMILIES[family.config_class] = family
    return family


def package_family(package, name, config_class, export_task, *, decodes=True, **hooks):
    """Register the `Family` of a zoo package in the family shape: `<package>.model.build`,
    `<package>.recipe.compile_model`, `<package>.model.attention_weights` and, where it
    decodes, `<package>.decoding.stepper`; `hooks`: its weights hooks (`register_family`)."""

    def lazy(module, function):
        return Lazy(f"{package}.{module}", function)

    return add_family(Family(
        name, compile_fn=lazy("recipe", "compile_model"), config_class=config_class,
        build=lazy("model", "build"), step=lazy("decoding", "stepper") if decodes else None,
        export_task=export_task, attention_weights=lazy("model", "attention_weights"), **hooks,
    ))


def register_family(config_class, name, compile_fn=None, search_space=None, read_weights=None,
                    import_weights=None):
    """Declare a config class as a model family with its recipe and search space.

    Pretrained weights (`zoo.get(name, weights=path)`), one of two ways:
    `read_weights`: `path -> checkpoint`, loaded into the entry's own model;
    the checkpoint has `overrides(user_overrides) -> config overrides` and
    `load_into(model, config, name)` (ViT, `zoo.vit.weights.checkpoint.Checkpoint`).
    `import_weights(path, base_config, **overrides) -> (model, config)`: the
    family builds the model from the folder itself (Transformer, `zoo.transformer.weights.marian`);
    then `import_config(path, base_config, **overrides) -> config` reads the
    config alone, and `import_tokenizers(path) -> (source, target)` gives the
    folder's own tokenizers (what fine-tuning such a model trains with).
    """
    return add_family(Family(name, compile_fn, search_space, read_weights, import_weights,
                             config_class=config_class))


def register_weights(config_class, read_weights=None, import_weights=None, import_config=None,
                     import_tokenizers=None):
    """Give a registered family its pretrained-weights hooks (see `register_family`)."""
    family = _FAMILIES.get(config_class)
    if family is None:
        raise ZooError(f"{config_class.__name__} is not a model family; call register_family first.")
    hooks = {"read_weights": read_weights, "import_weights": import_weights,
             "import_config": import_config, "import_tokenizers": import_tokenizers}
    for hook, function in hooks.items():
        if function is not None:
            setattr(family, hook, function)


def register_search_space(config_class, search_space):
    """Give the family of `config_class` its search space (`zoo.tuning` does, for the zoo's).

    Args:
        config_class: a config class registered with `register_family`.
        search_space: a `zoo.tuning.SearchSpace` or a function
            `(hp, fixed) -> dict of config overrides` (see `register`).
    """
    if config_class not in _FAMILIES:
        raise ZooError(
            f"{getattr(config_class, '__name__', config_class)!r} is not a registered family "
            "config class; call register_family first."
        )
    check_search_space(search_space)
    _FAMILIES[config_class].search_space = search_space


def check_search_space(search_space):
    if search_space is not None and not callable(search_space):
        raise ZooError(
            "`search_space` must be a zoo.tuning.SearchSpace or a function "
            f"(hp, fixed) -> dict of config overrides; received {search_space!r}."
        )


def family_of(cfg):
    """The `Family` of a config: its class's, else the nearest registered base class's
    (a subclass of `TransformerConfig` keeps the Transformer's recipe), or None."""
    for cls in type(cfg).__mro__:
        if cls in _FAMILIES:
            return _FAMILIES[cls]
    return None


def family_attr(cfg, attribute):
    """The family of `cfg`'s `attribute` (`compile_fn`, `read_weights`, ...), or None."""
    family = family_of(cfg)
    return getattr(family, attribute) if family else None


def family_named(name):
    """The registered `Family` called `name` (`"transformer"`, ...), or None."""
    return next((family for family in _FAMILIES.values() if family.name == name), None)


def family_of_model(model):
    """The `Family` of a built model, or None for a model of no registered family: the
    family it records (`zoo.registry.model.FamilyModel`, kept in `.keras` files), else,
    for files saved before models recorded it, the one its layer names tell
    (`zoo.families.model_family`)."""
    name = getattr(model, "family", None)
    if not isinstance(name, str):
        name = families.model_family(model)
    return family_named(name) if name else None
