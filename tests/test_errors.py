"""`zoo.errors.ZooError`: the zoo's own errors for the user's mistakes are ZooErrors (and
so still ValueErrors), which the command line reports in one line (tests/test_cli.py)."""

import json

import pytest

import zoo
from zoo import datasets, files, registry
from zoo.cli.arguments import UserError, parse_overrides
from zoo.errors import ZooError
from zoo.runs import rundir
from zoo.runs.training import RunFinishedError
from zoo.transformer.weights import marian


@pytest.mark.parametrize("error", [
    registry.UnknownModelError, files.CorruptFileError, marian.FolderError, UserError,
    RunFinishedError,
])
def test_the_named_errors_are_zoo_errors_and_value_errors(error):
    assert issubclass(error, ZooError) and issubclass(error, ValueError)
    assert zoo.ZooError is ZooError


@pytest.mark.parametrize("mistake, message", [
    (lambda: zoo.config("transformr-tiny"), "did you mean 'transformer-tiny'"),
    (lambda: zoo.config("vit-tiny", depth=3), "Unknown field"),
    (lambda: zoo.config("vit-tiny", patch_size=5), "patch_size must divide image_size"),
    (lambda: zoo.config("transformer-tiny", d_model=-1), "d_model"),
    (lambda: datasets.dataset_kind("wmt14"), "unknown dataset 'wmt14'"),
    (lambda: datasets.get_translation_dataset("tsv:"), "'tsv:' needs a path"),
    (lambda: parse_overrides(["oops"]), "--set expects key=value"),
])
def test_the_users_mistakes_raise_zoo_errors(mistake, message):
    with pytest.raises(ZooError, match=f"(?i){message}"):
        mistake()


def test_a_bad_file_is_a_zoo_error(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps([1, 2]))
    with pytest.raises(ZooError, match="config.json"):
        rundir.read_config_file(tmp_path / "config.json")
    (tmp_path / "weights.npz").write_bytes(b"not a zip")
    with pytest.raises(ZooError, match="not a NumPy .npz file"):
        zoo.get("vit-tiny", weights=tmp_path / "weights.npz")
