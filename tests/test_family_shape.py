"""One shape per family (issue #63): every family package holds the same modules and one
family object that the registry holds; `zoo.decode` and `zoo.export` ask the registry, never a
family package; a built model records its family, which a `.keras` file keeps, and files saved
before it did are recognised by their layer names.
"""

import ast
import json
import pathlib
import zipfile

import keras
import numpy as np
import pytest

import zoo
from zoo import decode, families, registry
from zoo.decode import steps as decode_steps
from zoo.registry.model import FamilyModel

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIXTURES = pathlib.Path(__file__).parent / "fixtures"
FAMILY_PACKAGES = ("transformer", "seq2seq", "convs2s", "vit")


def _imported_modules(path):
    """Every module `path` imports, those inside functions too (`from zoo import x` -> zoo.x)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize("package", ["decode", "export"])
def test_decode_and_export_import_no_family_package(package):
    found = {f"{path.relative_to(ROOT)}: {name}"
             for path in sorted((ROOT / "zoo" / package).rglob("*.py"))
             for name in _imported_modules(path)
             if any(name == f"zoo.{family}" or name.startswith(f"zoo.{family}.")
                    for family in FAMILY_PACKAGES)}
    assert found == set()


@pytest.mark.parametrize("name", FAMILY_PACKAGES)
def test_every_family_package_has_the_shape_and_one_registered_family_object(name):
    folder = ROOT / "zoo" / name
    package = getattr(zoo, name)
    family = package.FAMILY
    assert {"config.py", "model.py", "recipe.py"} <= {path.name for path in folder.iterdir()}
    assert (folder / "decoding.py").is_file() == (family.step is not None)
    assert registry.family_named(name) is family
    assert registry.family_of(family.config_class()) is family
    assert family.build.resolve() is package.build
    assert family.recipe.resolve() is package.compile_model
    assert family.export_task in zoo.export.EXPORT_TASKS
    if family.step is not None:
        assert family.step.resolve().__module__ == f"zoo.{name}.decoding"


def _small(name):
    sizes = {
        "transformer-tiny": dict(vocabulary_size=40, num_encoder_layers=1, num_decoder_layers=1,
                                 d_model=16, num_heads=2, intermediate_dim=32, max_length=16),
        "vit-tiny": {},
    }
    return zoo.get(name, compile=False, **sizes[name])


@pytest.mark.parametrize("name, family", [("transformer-tiny", "transformer"),
                                          ("vit-tiny", "vit")])
def test_a_saved_model_records_its_family_in_its_keras_file(name, family, tmp_path,
                                                             monkeypatch):
    model = _small(name)
    assert isinstance(model, FamilyModel) and model.family == family
    path = tmp_path / "model.keras"
    model.save(path)
    saved = json.loads(zipfile.ZipFile(path).read("config.json"))
    assert saved["class_name"] == "FamilyModel" and saved["config"]["family"] == family
    loaded = keras.saving.load_model(path, compile=False)
    assert [layer.name for layer in loaded.layers] == [layer.name for layer in model.layers]

    def no_layer_names(model):
        raise AssertionError("the family is recorded: no layer names to read")

    monkeypatch.setattr(families, "model_family", no_layer_names)
    assert loaded.family == family
    assert registry.family_of_model(loaded) is registry.family_named(family)


def test_the_recorded_family_decodes_as_before():
    model = _small("transformer-tiny")
    source = np.array([[5, 6, 7, 3, 0]], np.int32)
    assert isinstance(decode._stepper(model, use_cache=True),
                      zoo.transformer.decoding.TransformerStep)
    cached = decode.greedy_decode(model, source, max_length=6)
    full = decode.greedy_decode(model, source, max_length=6, use_cache=False)
    np.testing.assert_array_equal(cached, full)


@pytest.mark.parametrize("file, family, step", [
    ("transformer_v2.keras", "transformer", "zoo.transformer.decoding.TransformerStep"),
    ("seq2seq_v2.keras", "seq2seq", "zoo.seq2seq.decoding.RNNSearchStep"),
    ("convs2s_v2.keras", "convs2s", "zoo.convs2s.decoding.IncrementalDecoder"),
    ("vit_v1_augmented.keras", "vit", None),
])
def test_a_file_saved_by_an_earlier_version_is_recognised_by_its_layer_names(file, family, step):
    """The fixtures of `tests/fixtures/make_v1_runs.py` and `make_v2_runs.py` were saved before
    models recorded their family: plain functional models, recognised by their layer names."""
    model = keras.saving.load_model(FIXTURES / file, compile=False)
    assert not isinstance(model, FamilyModel) and getattr(model, "family", None) is None
    assert families.model_family(model) == family
    assert registry.family_of_model(model) is registry.family_named(family)
    if step is not None:
        stepper = decode_steps.stepper(model, use_cache=True)
        assert f"{type(stepper).__module__}.{type(stepper).__name__}" == step


def test_the_old_paths_of_moved_names_give_the_new_objects():
    from zoo.decode.copy_steps import CopyTransformerStep  # noqa: PLC0415 - the old path
    from zoo.decode.steps import TransformerStep, tied_logits  # noqa: PLC0415 - the old path
    from zoo.transformer.model import compile_model  # noqa: PLC0415 - the old path

    assert TransformerStep is zoo.transformer.decoding.TransformerStep
    assert tied_logits is zoo.transformer.decoding.tied_logits
    assert CopyTransformerStep is zoo.transformer.decoding.CopyTransformerStep
    assert compile_model is zoo.transformer.recipe.compile_model
    assert decode._RNNSearchStep is zoo.seq2seq.decoding.RNNSearchStep
    assert zoo.convs2s.model.compile_model is zoo.convs2s.recipe.compile_model
    for module, names in zoo.moved.MOVED_NAMES.items():
        for name in names:
            assert zoo.moved.moved_name(module, name) is not None
    with pytest.raises(AttributeError, match="no_such_name"):
        decode_steps.no_such_name  # noqa: B018
