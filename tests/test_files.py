"""`zoo.files`: whole files or none, and JSON one way."""

import json
import pathlib

import numpy as np
import pytest

from zoo import files


def test_write_json_writes_numpy_scalars_paths_and_tuples(tmp_path):
    path = files.write_json(tmp_path / "a/b.json", {"n": np.int64(3), "x": np.float32(0.5),
                                                    "p": pathlib.Path("r"), "t": (1, 2)})
    assert json.loads(path.read_text()) == {"n": 3, "x": 0.5, "p": "r", "t": [1, 2]}
    assert files.read_json(path)["t"] == [1, 2]
    assert [p.name for p in path.parent.iterdir()] == ["b.json"]  # no temporary left


def test_a_failed_write_keeps_the_previous_file_and_leaves_nothing_behind(tmp_path):
    path = files.write_text(tmp_path / "f.txt", "before\n")

    def fail(temporary):
        temporary.write_text("half")
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        files.replace(path, fail)
    assert path.read_text() == "before\n"
    assert [p.name for p in tmp_path.iterdir()] == ["f.txt"]


def test_write_directory_renames_a_finished_folder_and_cleans_up_a_failed_one(tmp_path):
    files.write_directory(tmp_path / "1", lambda d: (d / "x").write_text("x"))
    assert (tmp_path / "1/x").read_text() == "x"
    with pytest.raises(FileExistsError):
        files.write_directory(tmp_path / "1", lambda d: (d / "y").write_text("y"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1"]


def test_normalise_is_what_json_reads_back():
    assert files.normalise({"a": (1, np.int32(2))}) == {"a": [1, 2]}
