"""The registry finds a config's family through its class's bases, and holds the builders,
recipes and weights hooks of the zoo's families as `Lazy` references."""

import dataclasses

import pytest

import zoo
from zoo import registry, transformer


@dataclasses.dataclass(frozen=True)
class LongerTransformerConfig(transformer.TransformerConfig):
    """A user's Transformer config: the zoo's fields and one of its own."""

    note: str = "longer"


@pytest.fixture
def subclassed_entry():
    tiny = dataclasses.asdict(zoo.config("transformer-tiny", vocabulary_size=64, max_length=16))
    config = LongerTransformerConfig(**tiny)
    zoo.register("longer-transformer", transformer.build, config, overwrite=True)
    yield "longer-transformer"
    zoo.unregister("longer-transformer")


def test_a_subclassed_config_keeps_its_familys_recipe_and_hooks(subclassed_entry):
    assert zoo.entry(subclassed_entry).family == "transformer"
    family = registry.family(subclassed_entry)
    assert family is registry.family("transformer-tiny")
    assert family.compile_fn is not None and family.import_weights is not None
    model = zoo.get(subclassed_entry)  # compiled with the Transformer's recipe
    assert model.compiled and type(model.optimizer).__name__ == "Adam"
    assert zoo.describe(subclassed_entry).family == "transformer"


def test_a_registered_subclass_wins_over_its_base():
    @dataclasses.dataclass(frozen=True)
    class Own(transformer.TransformerConfig):
        pass

    registry.register_family(Own, "own")
    try:
        assert registry.family_of(Own()).name == "own"
        assert registry.family_of(transformer.TransformerConfig()).name == "transformer"
    finally:
        del registry._FAMILIES[Own]


def test_a_config_of_no_family_is_custom():
    @dataclasses.dataclass(frozen=True)
    class Sizes:
        units: int = 4

    assert registry.family_of(Sizes()) is None
    zoo.register("sizes-only", lambda config: None, Sizes(), overwrite=True)
    try:
        assert zoo.entry("sizes-only").family == "custom"
    finally:
        zoo.unregister("sizes-only")


def test_the_zoos_builders_are_lazy_references_to_the_family_modules():
    builder = zoo.entry("transformer-tiny").builder
    assert builder == registry.Lazy("zoo.transformer.model", "build")
    assert builder.resolve() is transformer.build
    assert registry.family("vit-tiny").compile_fn.resolve() is zoo.vit.compile_model
