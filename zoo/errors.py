"""`ZooError`: a mistake in what the user asked for, as opposed to a bug of the zoo.

The zoo raises it (or a subclass: `zoo.registry.UnknownModelError`,
`zoo.files.CorruptFileError`, `zoo.transformer.weights.marian.FolderError`, ...) for
an unknown model or dataset, a bad flag or `--set` field, a file that is
missing, corrupt or of another kind. The command line prints it as one line
and exits with code 2; any other exception is a bug, which it reports as one
(exit code 1, the traceback with `ZOO_DEBUG=1`).

It subclasses `keras_attention.checks.ArgumentError` (what the shared argument
checks raise, for the layers' arguments and the zoo's config fields alike), and
so `ValueError`: code that catches `ValueError` still catches it.

`NoSpaceError` is the other error the command line reports in one line (exit
code 1): the disk filled while writing a file (`zoo.files` writes whole files
or none). Both live here, below everything, importing nothing heavy.
"""

import errno
import os
import pathlib
import shutil

from keras_attention.checks import ArgumentError

NO_SPACE_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
NO_SPACE_TEXT = "No space left on device"


class ZooError(ArgumentError):
    """A mistake in what the user asked for: the message says what and how to fix it."""


class NoSpaceError(OSError):
    """The disk filled while writing `filename`: `errno.ENOSPC`, with the free space said."""

    def __init__(self, path):
        path = pathlib.Path(path)
        super().__init__(errno.ENOSPC, f"no space left on device while writing {path} "
                         f"({free_space(path)}); the previous version is intact: free some "
                         "space and run the same command again", str(path))

    def __str__(self):
        return self.strerror


def free_space(path):
    """`"1.2 MB free on /mnt"`: the free space of the file system holding `path` (named by
    its mount point)."""
    path = pathlib.Path(path).absolute()
    while (not path.exists() or not os.path.ismount(path)) and path != path.parent:
        path = path.parent
    try:
        free = shutil.disk_usage(path).free
    except OSError:
        return "free space unknown"
    return f"{free / 1e6:.1f} MB free on {path}"


def is_no_space(error):
    """Whether `error`, or an error it was raised from, is a full disk (any library's kind)."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if getattr(error, "errno", None) in NO_SPACE_ERRNOS or NO_SPACE_TEXT in str(error):
            return True
        error = error.__cause__ or error.__context__
    return False


def no_space_error(error, fallback=None):
    """`error` as a `NoSpaceError` naming its file (or `fallback`), or None if the disk
    is not full."""
    if isinstance(error, NoSpaceError):
        return error
    if not is_no_space(error):
        return None
    return NoSpaceError(getattr(error, "filename", None) or fallback or os.getcwd())
