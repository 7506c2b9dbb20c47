"""`zoo.files`: whole files or none, and JSON one way."""

import contextlib
import errno
import json
import os
import pathlib
import re
import shutil
import stat
import zipfile

import numpy as np
import pytest

from zoo import files, locks


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


def test_write_directory_never_replaces_an_empty_folder(tmp_path):
    # os.rename(folder, empty_folder) succeeds on POSIX: write_directory checks first.
    (tmp_path / "1").mkdir()
    with pytest.raises(FileExistsError):
        files.write_directory(tmp_path / "1", lambda d: (d / "x").write_text("x"))
    assert list((tmp_path / "1").iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1"]


def _directory_removed_before_the_first_open(monkeypatch, meanwhile):
    """Make `locks._acquire` meet the race: the directory it was about to open the lock file
    in is removed first (its last holder released it), then `meanwhile()` runs."""
    real, calls = locks._acquire, []

    def racing(path, command):
        calls.append(path)
        if len(calls) == 1:
            shutil.rmtree(path.parent)
            meanwhile(path.parent)
        return real(path, command)

    monkeypatch.setattr(locks, "_acquire", racing)
    return calls


def test_a_writer_whose_directory_vanished_before_its_open_takes_the_lock(tmp_path, monkeypatch):
    directory = tmp_path / "run"
    directory.mkdir()
    calls = _directory_removed_before_the_first_open(monkeypatch, lambda path: None)
    with locks.hold(directory, "zoo train") as held:
        assert (held / locks.LOCK_NAME).is_file()
    assert len(calls) == 2
    assert not directory.exists()  # made again by this writer, removed again on release


def test_a_writer_whose_directory_vanished_meets_the_one_line_refusal(tmp_path, monkeypatch):
    directory = tmp_path / "run"
    directory.mkdir()
    with contextlib.ExitStack() as stack:
        # A third writer makes the directory again and takes the lock in between.
        _directory_removed_before_the_first_open(
            monkeypatch, lambda path: stack.enter_context(locks.hold(path, "zoo export")))
        with pytest.raises(locks.DirectoryInUseError, match=str(os.getpid())):
            with locks.hold(directory, "zoo train"):
                pass
        assert (directory / locks.LOCK_NAME).is_file()  # still the third writer's


def test_normalise_is_what_json_reads_back():
    assert files.normalise({"a": (1, np.int32(2))}) == {"a": [1, 2]}


def full_disk(temporary):
    temporary.write_text("half of it")
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(temporary))


def test_a_full_disk_names_the_file_and_the_free_space_and_keeps_the_previous_file(tmp_path):
    path = files.write_text(tmp_path / "history.csv", "epoch\n0\n")
    with pytest.raises(files.NoSpaceError) as caught:
        files.replace(path, full_disk)
    message = str(caught.value)
    assert message.startswith(f"no space left on device while writing {path} (")
    free = shutil.disk_usage(tmp_path).free / 1e6
    shown = float(re.search(r"\((\d+\.\d) MB free on ", message).group(1))
    assert abs(shown - free) < max(1.0, 0.01 * free)  # the disk's free space, as it was
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(path)
    assert path.read_text() == "epoch\n0\n"
    assert [p.name for p in tmp_path.iterdir()] == ["history.csv"]  # the temporary is gone


def test_a_full_disk_met_by_another_library_is_recognised():
    error = RuntimeError("Unable to write file (No space left on device)")
    assert files.no_space_error(error, fallback="/x/y").filename == "/x/y"
    try:
        try:
            raise OSError(errno.EDQUOT, "quota")
        except OSError as inner:
            raise ValueError("saving failed") from inner
    except ValueError as outer:
        assert files.is_no_space(outer)
    assert files.no_space_error(ValueError("bad value")) is None


def test_a_full_disk_while_writing_a_folder_leaves_no_temporary_folder(tmp_path):
    def save(directory, number):
        (directory / "saved_model.pb").write_bytes(b"x")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(files.NoSpaceError, match=f"writing {tmp_path / '1'} "):
        files.write_numbered_directory(tmp_path, save)
    assert list(tmp_path.iterdir()) == []


def test_files_get_the_mode_open_would_give(tmp_path):
    path = files.write_text(tmp_path / "f.txt", "x")
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask


def test_numbered_folders_written_at_once_get_distinct_numbers(tmp_path):
    (tmp_path / "1").mkdir()
    renumbered = []

    def save(directory, number):  # another writer takes the same number meanwhile
        (directory / "version").write_text(str(number))
        if not renumbered:
            files.write_numbered_directory(tmp_path, lambda d, n: (d / "version").write_text(str(n)))

    def renumber(directory, number):
        renumbered.append(number)
        (directory / "version").write_text(str(number))

    path, number = files.write_numbered_directory(tmp_path, save, renumber=renumber)
    assert (path, number, renumbered) == (tmp_path / "3", 3, [3])
    assert {p.name: (p / "version").read_text() for p in tmp_path.iterdir() if p.name != "1"} == {
        "2": "2", "3": "3"}
    with pytest.raises(FileExistsError, match="version 2 already exists"):
        files.write_numbered_directory(tmp_path, save, number=2)


def test_corrupt_files_are_named(tmp_path):
    empty = tmp_path / "config.json"
    empty.write_text("")
    with pytest.raises(files.CorruptFileError, match=f"{empty} is corrupt: empty"):
        files.read_json(empty)
    empty.write_text('{"a": [1, 2')
    with pytest.raises(files.CorruptFileError, match="not valid JSON"):
        files.read_json(empty)
    empty.write_text("[1]")
    with pytest.raises(files.CorruptFileError, match="a JSON dict expected, found a list"):
        files.read_json(empty, dict)
    archive = tmp_path / "a.keras"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("config.json", "{}" * 1000)
    assert files.is_whole_zip(archive)
    data = archive.read_bytes()
    archive.write_bytes(data[: len(data) // 2])
    assert not files.is_whole_zip(archive)
    assert not files.is_whole_zip(tmp_path / "missing.keras")
