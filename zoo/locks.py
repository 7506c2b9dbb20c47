"""One writer per directory: the lock that `zoo train`, `zoo export` and `zoo tune` hold
(docs/runs.md#one-writer-per-directory).

    with locks.hold(run_dir, "zoo train"):
        ...  # the only `zoo train`/`export`/`tune` process writing run_dir

`hold` takes `DIR/.zoo.lock` with `fcntl.flock(LOCK_EX | LOCK_NB)` and writes the
holder into it (pid, host, the process's start time, the command). A second process
asking for the same directory while the first is alive gets `DirectoryInUseError`
at once, naming the first one's pid (a user's mistake: one line, exit code 2).

Why `flock` rather than a file created with `O_CREAT | O_EXCL`: the kernel releases
a `flock` when its process dies, however it dies (SIGKILL, OOM killer, power cut of
a container), so a lock left by a dead writer is free to take with no guessing
whether its pid still names it (pids are reused). The lock file then only says
who holds it. It is removed on release (normal exit and errors); a file left by a
killed writer is taken over silently. The open file is closed in forked children
(`os.register_at_fork`) so that a child outliving a killed writer does not keep
its lock, and it is not inherited across `exec` (Python's default).

Before the work starts, `hold` removes what dead writers left in the directory:
the temporaries of `zoo.files` carry their writer's pid (`.last.pid1234-x8d2.tmp.keras`,
`.tmp-2.pid1234-x8d2`), and those whose process is gone are deleted; those of a
live process (a `zoo evaluate` writing `metrics.json`, say) are left alone.
A lock file on a network file system works where the file system supports
`flock` (Linux NFS emulates it with POSIX locks); the pids are of one machine.
"""

import contextlib
import fcntl
import json
import os
import pathlib
import shutil
import socket
import sys
import time

from zoo import files
from zoo.errors import ZooError

LOCK_NAME = ".zoo.lock"
_HELD = {}  # descriptor -> path of the locks this process holds


class DirectoryInUseError(ZooError):
    """Another live process holds the directory's lock (`holder`: what its lock file says)."""

    def __init__(self, directory, holder):
        pid = holder.get("pid", "unknown")
        what = holder.get("command") or "a zoo command"
        since = f", since {holder['since']}" if holder.get("since") else ""
        host = f" on {holder['host']}" if holder.get("host") not in (None, socket.gethostname()) else ""
        super().__init__(f"{directory} is in use by process {pid}{host} ({what}{since}); "
                         "one writer per directory: wait for it to end or stop it, or choose "
                         "another directory")
        self.holder = holder


def process_start(pid):
    """The start time of process `pid` in clock ticks since boot (`/proc/<pid>/stat`, field
    22), or None where there is no `/proc` or no such process."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()  # after the command name, which may hold spaces
    return None if fields[0] in ("Z", "X") else int(fields[19])  # a zombie is dead


def is_running(pid, start=None):
    """Whether process `pid` is alive (not a zombie), and, given `start`, is the process
    that started then (not another one that got its pid later)."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    started = process_start(pid)
    if started is not None:
        return start is None or started == start
    if pathlib.Path("/proc/self/stat").exists():
        return False  # /proc exists and has no live `pid`
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_dead_temporaries(directory):
    """Delete the `zoo.files` temporaries under `directory` whose writer is gone (their
    name's pid names no live process); return their paths."""
    removed = []
    for path in sorted(pathlib.Path(directory).rglob(".*")):
        pid = files.temporary_pid(path.name)
        if pid is None or pid == os.getpid() or is_running(pid) or not path.exists():
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        removed.append(path)
    return removed


@contextlib.contextmanager
def hold(directory, command):
    """Hold `directory`'s lock while the block runs: `DirectoryInUseError` when a live
    process holds it. A `directory` that does not exist is made, and removed again on
    release if nothing was written into it; a file is left to the command to refuse."""
    directory = pathlib.Path(directory)
    if directory.exists() and not directory.is_dir():  # the command says so, its own way
        yield directory
        return
    descriptor, made = _acquire_in(directory, command)
    try:
        remove_dead_temporaries(directory)
        yield directory
    finally:
        _release(descriptor, directory / LOCK_NAME)
        _remove_if_empty(directory, made)


def _acquire_in(directory, command, attempts=100):
    """`(descriptor, made)`: `directory` made if missing (`made`) and its lock taken.

    A holder that made the directory removes it on release when it is empty.
    A second writer caught between its `mkdir` and its `os.open` then finds no
    directory to create the lock file in: it makes the directory again and
    asks again, so it takes the lock or gets `DirectoryInUseError` from a third
    writer that got there first, never a bare `FileNotFoundError`.
    """
    made = False
    for attempt in range(attempts):
        try:
            directory.mkdir(parents=True)
            made = True
        except FileExistsError:
            pass
        try:
            return _acquire(directory / LOCK_NAME, command), made
        except FileNotFoundError:  # the directory was removed by a releasing holder
            if attempt + 1 == attempts:
                raise
        except BaseException:
            _remove_if_empty(directory, made)
            raise
    raise AssertionError("unreachable")


def _acquire(path, command):
    """The descriptor of `path`, created if needed, under an exclusive `flock`."""
    while True:
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            raise DirectoryInUseError(path.parent, _holder(path)) from None
        except BaseException:
            os.close(descriptor)
            raise
        try:  # the file we locked is still the one at `path` (not unlinked by its last holder)
            if os.fstat(descriptor).st_ino == os.stat(path).st_ino:
                break
        except FileNotFoundError:
            pass
        os.close(descriptor)
    _write_holder(descriptor, command)
    _HELD[descriptor] = path
    return descriptor


def _write_holder(descriptor, command):
    holder = {"pid": os.getpid(), "host": socket.gethostname(),
              "start": process_start(os.getpid()), "command": command,
              "since": time.strftime("%Y-%m-%d %H:%M:%S"), "argv": sys.argv}
    os.ftruncate(descriptor, 0)
    os.pwrite(descriptor, (json.dumps(holder) + "\n").encode(), 0)


def _holder(path, wait=1.0):
    """What the lock file `path` says of its live holder. A holder that has just taken the
    lock may not have written itself yet (the file is empty, or names the dead writer
    it took over from): read again for up to `wait` seconds."""
    deadline = time.monotonic() + wait
    holder = {}
    while True:
        try:
            holder = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            holder = {}
        if not isinstance(holder, dict):
            holder = {}
        local = holder.get("host") in (None, socket.gethostname())
        if holder and (not local or is_running(holder.get("pid"), holder.get("start"))):
            return holder
        if time.monotonic() > deadline:
            return {**holder, "pid": holder.get("pid", "unknown")}
        time.sleep(0.05)


def _release(descriptor, path):
    """Remove the lock file, then unlock it: a process that opened the old file meanwhile
    sees it unlinked and opens the path again (`_acquire`)."""
    _HELD.pop(descriptor, None)
    try:
        with contextlib.suppress(FileNotFoundError):
            if os.fstat(descriptor).st_ino == os.stat(path).st_ino:
                os.unlink(path)
    finally:
        os.close(descriptor)  # closing releases the flock


def _remove_if_empty(directory, made):
    if made:
        with contextlib.suppress(OSError):
            directory.rmdir()


def _close_in_child():
    """A forked child does not keep its parent's locks (closing its copy leaves the
    parent's lock held: a flock is released when every copy is closed)."""
    for descriptor in list(_HELD):
        with contextlib.suppress(OSError):
            os.close(descriptor)
    _HELD.clear()


os.register_at_fork(after_in_child=_close_in_child)
