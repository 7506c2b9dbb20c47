"""The flat module paths of before `zoo/` became packages still import (`zoo.moved`).

Each old name must give the very module object of its new name (so classes,
registries and module-level state exist once), that module must keep its own
name, and names that never existed must still fail. The `.keras` files written
by commit 94240b1 (`tests/fixtures/make_v2_runs.py`) record those old paths
for the zoo's layers (`"module": "zoo.convs2s_layers"`, `"zoo.transformer"`):
each recorded `module.class_name` must still import and be the class the file
loads into.
"""

import importlib
import importlib.util
import json
import os
import pathlib
import re
import subprocess
import sys
import zipfile

import keras
import numpy as np
import pytest

import zoo  # installs the finder of the old names
from zoo.datasets import pipeline
from zoo.moved import MOVED
from zoo.transformer.weights import marian
from zoo.vit.weights import checkpoint

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_name_is_the_new_module_itself(old):
    module = importlib.import_module(old)
    new = importlib.import_module(MOVED[old])
    assert module is new
    assert sys.modules[old] is sys.modules[MOVED[old]]
    assert module.__name__ == MOVED[old]
    assert module.__spec__.name == MOVED[old]


def test_from_imports_of_old_names_give_the_new_objects():
    # Inside the test: the old paths are what is tested, not a dependency of the module.
    from zoo.marian import import_folder  # noqa: PLC0415
    from zoo.pipeline import make_translation_dataset  # noqa: PLC0415
    from zoo.vit_checkpoints import Checkpoint  # noqa: PLC0415

    assert import_folder is marian.import_folder
    assert make_translation_dataset is pipeline.make_translation_dataset
    assert Checkpoint is checkpoint.Checkpoint


def test_an_old_name_is_an_attribute_of_zoo_after_its_import():
    importlib.import_module("zoo.plot_attention")
    assert zoo.plot_attention is importlib.import_module("zoo.plot.attention")


def test_an_unknown_name_still_fails():
    with pytest.raises(ModuleNotFoundError, match="zoo.nothing_here"):
        importlib.import_module("zoo.nothing_here")
    assert importlib.util.find_spec("zoo.nothing_here") is None
    assert "zoo.nothing_here" not in sys.modules


def _recorded_classes(keras_file):
    """`{(module, class_name)}` of the zoo's objects in a `.keras` file's config."""
    found = set()

    def walk(node):
        if isinstance(node, dict):
            if str(node.get("module", "")).startswith("zoo"):
                found.add((node["module"], node["class_name"]))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    with zipfile.ZipFile(keras_file) as archive:
        walk(json.loads(archive.read("config.json")))
    return found


def test_a_keras_file_naming_old_module_paths_loads_into_the_same_classes():
    path = FIXTURES / "convs2s_v2.keras"
    recorded = _recorded_classes(path)
    assert ("zoo.convs2s_layers", "ConvS2SEncoderBlock") in recorded
    assert ("zoo.transformer", "PaddingMask") in recorded
    model = keras.saving.load_model(path, compile=False)
    loaded = {type(layer).__name__: type(layer) for layer in model.layers}
    for module, class_name in recorded:
        assert getattr(importlib.import_module(module), class_name) is loaded[class_name]
    assert loaded["ConvS2SEncoderBlock"].__module__ == "zoo.convs2s.layers"
    with np.load(FIXTURES / "convs2s_v2_input.npz") as arrays:
        x = dict(arrays)
    got = keras.ops.convert_to_numpy(model(x, training=False))
    np.testing.assert_allclose(got, np.load(FIXTURES / "convs2s_v2_output.npy"),
                               rtol=1e-5, atol=1e-5)


def test_an_rnnsearch_keras_file_of_the_flat_modules_loads_into_the_package_classes():
    """`seq2seq_v2.keras` records `"module": "zoo.seq2seq"`, a flat module then, the package
    now; files saved before the package record `zoo.seq2seq_decoder` for the decoder. Both
    give the classes the file loads into (Keras finds them by `zoo>BahdanauDecoder`)."""
    path = FIXTURES / "seq2seq_v2.keras"
    recorded = _recorded_classes(path)
    assert recorded == {("zoo.seq2seq", "BahdanauDecoder"), ("zoo.seq2seq", "Maxout")}
    model = keras.saving.load_model(path, compile=False)
    loaded = {type(layer).__name__: type(layer) for layer in model.layers}
    for module, class_name in recorded:
        assert getattr(importlib.import_module(module), class_name) is loaded[class_name]
    assert importlib.import_module("zoo.seq2seq_decoder").BahdanauDecoder \
        is loaded["BahdanauDecoder"]
    assert loaded["BahdanauDecoder"].__module__ == "zoo.seq2seq.decoder"
    assert keras.saving.get_registered_name(loaded["BahdanauDecoder"]) == "zoo>BahdanauDecoder"
    assert keras.saving.get_registered_name(loaded["Maxout"]) == "zoo>Maxout"


FRESH = """
import importlib, os, sys
import keras, numpy as np
import zoo
from zoo.moved import MOVED
assert "zoo.plot.attention" not in sys.modules and "zoo.text.tokenizers" not in sys.modules
for old, new in sorted(MOVED.items()):
    module = importlib.import_module(old)
    assert module is sys.modules[new] and module.__name__ == new == module.__spec__.name, old
model = keras.saving.load_model("tests/fixtures/convs2s_v2.keras", compile=False)
with np.load("tests/fixtures/convs2s_v2_input.npz") as arrays:
    x = dict(arrays)
got = keras.ops.convert_to_numpy(model(x, training=False))
expected = np.load("tests/fixtures/convs2s_v2_output.npy")
np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
print("ok")
"""


@pytest.mark.large
def test_in_a_fresh_interpreter_import_zoo_is_enough_for_old_files_and_old_names():
    """Old names imported before their new modules (`zoo.plot_attention` and others that
    `import zoo` leaves to first use) are those modules; `import zoo` alone registers every
    class the `.keras` file names."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run([sys.executable, "-c", FRESH], cwd=ROOT, capture_output=True,
                            text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("ok")


# `zoo.a.b`, `keras_attention.a.b` or `ka.a.b` (`import keras_attention as ka`) in the manual;
# not a file name such as `.zoo.lock` or `runs/zoo.log`.
DOTTED = re.compile(r"(?<![./\w-])(zoo|keras_attention|ka)((?:\.[A-Za-z_]\w*)+)")


def documented_names():
    """`{dotted name: [Markdown files]}` of every zoo or keras_attention name in README.md
    and docs/."""
    names = {}
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for package, rest in DOTTED.findall(path.read_text(encoding="utf-8")):
            package = "keras_attention" if package == "ka" else package
            names.setdefault(package + rest.rstrip("."), []).append(path.name)
    return names


def resolve(name):
    """The object a dotted name gives: the longest importable module, then attributes."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:end]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[end:]:
            found = getattr(found, attribute)
        return found
    raise ModuleNotFoundError(name)


def test_every_name_the_manual_uses_resolves():
    """README.md and docs/ name modules, functions and classes (`zoo.runs.translate`,
    `ka.MultiHeadAttention`): each still imports, whatever moved."""
    names = documented_names()
    assert len(names) > 50  # the pattern finds the manual's names
    missing = {}
    for name, files in sorted(names.items()):
        try:
            resolve(name)
        except (ImportError, AttributeError) as error:
            missing[name] = (sorted(set(files)), repr(error))
    assert not missing, missing
