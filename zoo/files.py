"""Files written whole or not at all, and JSON read and written one way.

Every file the zoo writes goes through here: into a temporary file beside its
target, then renamed over it (`os.replace`), so a kill at any moment leaves
the previous complete version or the new one, never half of either.
`write_directory` does the same for a folder (an export version).

    from zoo import files
    files.write_json(run_dir / "summary.json", summary)
    files.save_model(model, run_dir / "checkpoints/last.keras")
"""

import contextlib
import json
import os
import pathlib
import shutil
import tempfile

import numpy as np


def replace(path, write):
    """Call `write(temporary)` with a path beside `path`, then rename it to `path`.

    The temporary file keeps `path`'s suffix (Keras wants `.keras` or
    `.weights.h5`); it is removed when `write` raises.
    """
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=f".tmp{path.suffix}",
                                         dir=path.parent)
    os.close(handle)
    try:
        write(pathlib.Path(temporary))
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return path


def write_text(path, content):
    """Write `content` (UTF-8, line endings as given) to `path`, atomically and synced."""

    def write(temporary):
        with open(temporary, "w", encoding="utf-8", newline="") as file:
            file.write(content)
            file.flush()
            os.fsync(file.fileno())

    return replace(path, write)


def to_json(data):
    """`data` as indented JSON text ending in a newline (NumPy scalars, paths, tuples
    and sets included)."""
    return json.dumps(data, indent=2, default=_json_default) + "\n"


def write_json(path, data):
    """Write `data` as indented JSON to `path`, atomically."""
    return write_text(path, to_json(data))


def read_json(path):
    """The JSON content of the file `path`."""
    return json.loads(pathlib.Path(path).read_text(encoding="utf-8"))


def normalise(value):
    """`value` as it reads back from JSON (tuples become lists, NumPy scalars numbers)."""
    return json.loads(json.dumps(value, default=_json_default))


def save_model(model, path):
    """`model.save(path)`, atomically."""
    return replace(path, model.save)


def copy(source, path):
    """Copy the file `source` to `path`, atomically."""
    return replace(path, lambda temporary: shutil.copyfile(source, temporary))


def write_directory(path, save, before_rename=None):
    """Call `save(temporary)` with a new folder beside `path`, then rename it to `path`.

    `before_rename()` runs just before the rename (to check that `path` is
    still free). The rename fails when `path` exists (`FileExistsError`); on
    any exception the temporary folder is removed.
    """
    path = pathlib.Path(path)
    temporary = pathlib.Path(tempfile.mkdtemp(prefix=f".tmp-{path.name}-", dir=path.parent))
    try:
        save(temporary)
        if before_rename is not None:
            before_rename()
        try:
            os.rename(temporary, path)
        except OSError as error:  # e.g. created concurrently (ENOTEMPTY)
            raise FileExistsError(f"could not rename {temporary} to {path}: {error}") from error
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    return path


def _json_default(value):
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, pathlib.Path):
        return str(value)
    if isinstance(value, (tuple, set)):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")
