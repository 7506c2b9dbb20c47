"""Tests for zoo/datasets/specs.py and the package: `load`, dataset specs, re-exports."""


import pytest

from zoo import datasets
from zoo.datasets import generated, idx_files, image_data, pairs, specs, translation_files


def test_get_translation_dataset(tmp_path):
    data = datasets.get_translation_dataset("numbers", num_train=20, num_test=5)
    assert data.name == "numbers" and len(data.train_pairs) == 20
    assert datasets.get_translation_dataset("dates", num_train=10, num_test=2).name == "dates"
    path = tmp_path / "x.tsv"
    path.write_bytes(b"a\tb\nc\td\n")
    data = datasets.get_translation_dataset(f"tsv:{path}", test_ratio=0.5)
    assert len(data.train_pairs) == 1 and len(data.test_pairs) == 1
    with pytest.raises(ValueError, match="numbers, dates, tsv:PATH"):
        datasets.get_translation_dataset("wmt14")
    with pytest.raises(ValueError, match="needs a path"):
        datasets.get_translation_dataset("tsv:")


def test_load_passes_progress_to_text_datasets_only(capsys, tmp_path):
    data = datasets.load("numbers", train_size=50, test_size=5, progress=True)
    assert "55/55" in capsys.readouterr().out and len(data.train_pairs) == 50
    path = tmp_path / "x.tsv"
    path.write_bytes(b"a\tb\nc\td\n")
    datasets.load(f"tsv:{path}", test_ratio=0.5, progress=True)
    assert "2/2" in capsys.readouterr().out
    datasets.load("digits", progress=True)  # images load in about a second: no bar
    assert capsys.readouterr().out == ""
    datasets.load("dates", train_size=20, test_size=2)
    assert capsys.readouterr().out == ""




def test_the_package_names_what_its_modules_define():
    # `zoo.datasets.X` stays the import path users know; each name lives in one module.
    modules = (generated, idx_files, image_data, pairs, specs, translation_files)
    for name in datasets.__all__:
        homes = [module for module in modules if name in vars(module)
                 and getattr(module, name) is getattr(datasets, name)]
        assert homes, name
