"""Files written whole or not at all, and JSON read and written one way.

Every file the zoo writes goes through here: into a temporary file beside its
target, then renamed over it (`os.replace`), so a kill at any moment leaves
the previous complete version or the new one, never half of either.
`write_directory` does the same for a folder (an export version), and
`write_numbered_directory` for the next free version number, which two writers
started at once each get one of. A temporary's name holds its writer's pid
(`.last.pid1234-x8d2k.tmp.keras`, `.tmp-2.pid1234-x8d2k`; `temporary_pid`), so that
what a killed writer left can be told from what a live one is writing
(`zoo.locks.remove_dead_temporaries`).

A full disk while writing raises `NoSpaceError`, naming the file and the free
space, once the temporary file is removed (the previous version stays whole,
so the same command resumes once space is freed). A file that does not read
back as what it should be raises `CorruptFileError`, naming it.

    from zoo import files
    files.write_json(run_dir / "summary.json", summary)
    files.save_model(model, run_dir / "checkpoints/last.keras")
"""

import contextlib
import errno
import json
import os
import pathlib
import re
import shutil
import signal
import tempfile
import zipfile

import numpy as np

from keras_attention import schedules
from zoo.errors import (  # noqa: F401 - the full-disk error's helpers, `files.*` as before
    NO_SPACE_ERRNOS,
    NO_SPACE_TEXT,
    NoSpaceError,
    ZooError,
    free_space,
    is_no_space,
    no_space_error,
)

_UMASK = os.umask(0o022)
os.umask(_UMASK)  # read once: files are created as open() would (0o666 less the umask)
KILL_HOOK = "ZOO_TEST_KILL_BEFORE_RENAME"  # tests: SIGKILL this process before renaming a match
# A temporary's name: a file's `.<stem>.pid<pid>-<random>.tmp<suffixes>`, a folder's
# `.tmp-<name>.pid<pid>-<random>`.
TEMPORARY_NAME = re.compile(r"^\.(?:[^.]*|tmp-.*)\.pid(\d+)-\w+(?:\.tmp(?:\..*)?)?$")



class CorruptFileError(ZooError):
    """A file that exists but does not read back (truncated, empty, another format)."""

    def __init__(self, path, what, reason="", hint=""):
        reason = " ".join(str(reason).split())
        super().__init__(f"{path} is corrupt: {what}" + (f" ({reason})" if reason else "")
                         + (f"; {hint}" if hint else ""))
        self.path = pathlib.Path(path)


def is_whole_zip(path):
    """Whether `path` is a zip archive (a `.keras` file) whose every member reads back."""
    try:
        with zipfile.ZipFile(path) as archive:
            return archive.testzip() is None
    except (OSError, EOFError, zipfile.BadZipFile, ValueError):
        return False





def _pid():
    return f"pid{os.getpid()}"


def temporary_pid(name):
    """The pid of the process writing the temporary file or folder `name`, or None when
    `name` is not a temporary of this module's."""
    match = TEMPORARY_NAME.match(name)
    return int(match[1]) if match else None


def _kill_if_asked(path):
    """Tests only: SIGKILL this process when `path` contains `$ZOO_TEST_KILL_BEFORE_RENAME`
    (the worst moment: the new version complete under its temporary name)."""
    pattern = os.environ.get(KILL_HOOK)
    if pattern and pattern in str(path):
        os.kill(os.getpid(), signal.SIGKILL)


def replace(path, write):
    """Call `write(temporary)` with a path beside `path`, then rename it to `path`.

    The temporary file keeps `path`'s suffix (Keras wants `.keras` or
    `.weights.h5`); it is removed when `write` raises.
    """
    path = pathlib.Path(path)
    stem, dot, suffixes = path.name.partition(".")  # "epoch-1.weights.h5": keep ".weights.h5"
    temporary = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=f".{stem}.{_pid()}-",
                                             suffix=f".tmp{dot}{suffixes}",
                                             dir=path.parent)
        os.close(handle)
        os.chmod(temporary, 0o666 & ~_UMASK)  # mkstemp makes it 0o600
        write(pathlib.Path(temporary))
        _kill_if_asked(path)
        os.replace(temporary, path)
    except BaseException as error:
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        if no_space_error(error) is not None:
            raise NoSpaceError(path) from error
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


def read_json(path, kind=None):
    """The JSON content of the file `path`; `CorruptFileError` if it is not JSON (or not
    of the type `kind`, e.g. `dict`)."""
    path = pathlib.Path(path)
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        what = "empty" if not path.stat().st_size else "not valid JSON (truncated?)"
        raise CorruptFileError(path, what, error) from None
    if kind is not None and not isinstance(content, kind):
        raise CorruptFileError(path, f"a JSON {kind.__name__} expected, "
                               f"found a {type(content).__name__}")
    return content


def normalise(value):
    """`value` as it reads back from JSON (tuples become lists, NumPy scalars numbers)."""
    return json.loads(json.dumps(value, default=_json_default))


def save_model(model, path):
    """`model.save(path)`, atomically; a budget schedule's variables out of the optimizer's
    state meanwhile, so that `keras.saving.load_model` loads the file with its optimizer
    state (`keras_attention.schedules.detached`)."""
    optimizer = getattr(model, "optimizer", None)
    with schedules.detached(optimizer) if optimizer is not None else contextlib.nullcontext():
        return replace(path, model.save)


def copy(source, path):
    """Copy the file `source` to `path`, atomically."""
    return replace(path, lambda temporary: shutil.copyfile(source, temporary))


def write_directory(path, save, before_rename=None):
    """Call `save(temporary)` with a new folder beside `path`, then rename it to `path`.

    `before_rename()` runs just before the rename (to check that `path` is
    still free). An existing `path` is never replaced: `FileExistsError` when
    it exists before the rename (`os.rename` itself would replace an empty
    folder), or when it appears at the last moment and is not empty (the rename
    fails, ENOTEMPTY). Only an empty folder another process makes between that
    check and the rename can be replaced, and nothing in it is lost. On any
    exception the temporary folder is removed.
    """
    path = pathlib.Path(path)
    temporary = None
    try:
        temporary = pathlib.Path(tempfile.mkdtemp(prefix=f".tmp-{path.name}.{_pid()}-",
                                                     dir=path.parent))
        save(temporary)
        if before_rename is not None:
            before_rename()
        _kill_if_asked(path)
        try:
            if os.path.lexists(path):  # os.rename would replace an empty folder
                raise FileExistsError(errno.EEXIST, "exists", str(path))
            os.rename(temporary, path)
        except OSError as error:  # e.g. created concurrently (ENOTEMPTY)
            raise FileExistsError(f"could not rename {temporary} to {path}: {error}") from error
    except BaseException as error:
        if temporary is not None:
            shutil.rmtree(temporary, ignore_errors=True)
        if no_space_error(error) is not None:
            raise NoSpaceError(path) from error
        raise
    return path


def numbered_directories(base):
    """The integer-named folders under `base`, as a sorted list of ints."""
    base = pathlib.Path(base)
    if not base.is_dir():
        return []
    return sorted(int(child.name) for child in base.iterdir()
                  if child.is_dir() and child.name.isascii() and child.name.isdigit())


def write_numbered_directory(base, save, number=None, renumber=None):
    """Write the folder `base/<number>` whole or not at all, as `write_directory`.

    `save(temporary, number)` fills a new folder beside the target. `number=None`
    takes the next number after the largest in `base`; when another writer takes
    it first, `renumber(temporary, new_number)` is called and the next free
    number is tried, so two writers started at once get two complete folders.
    A given `number` that is taken raises `FileExistsError`.

    Returns:
        `(path, number)`.
    """
    base = pathlib.Path(base)
    taken = f"{base}: version {{}} already exists; versions are never overwritten"
    if number is not None and number in numbered_directories(base):
        raise FileExistsError(taken.format(number))
    chosen = number if number is not None else (numbered_directories(base) or [0])[-1] + 1
    temporary = None
    try:
        base.mkdir(parents=True, exist_ok=True)
        temporary = pathlib.Path(tempfile.mkdtemp(prefix=f".tmp-{chosen}.{_pid()}-", dir=base))
        save(temporary, chosen)
        while True:
            target = base / str(chosen)
            _kill_if_asked(target)
            try:
                if target.exists():  # os.rename would replace an empty folder
                    raise FileExistsError(errno.EEXIST, "exists", str(target))
                os.rename(temporary, target)  # fails onto a non-empty folder (ENOTEMPTY)
                return target, chosen
            except OSError as error:
                if error.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
                if number is not None:
                    raise FileExistsError(taken.format(number)) from None
            chosen = max(chosen, *numbered_directories(base)) + 1  # written meanwhile
            if renumber is not None:
                renumber(temporary, chosen)
    except BaseException as error:
        if temporary is not None:
            shutil.rmtree(temporary, ignore_errors=True)
        if no_space_error(error) is not None:
            raise NoSpaceError(base / str(chosen)) from error
        raise


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
