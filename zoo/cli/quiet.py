"""TensorFlow's C++ logging kept off a command's stderr, unless asked for.

`default_log_level` sets `TF_CPP_MIN_LOG_LEVEL=2` (errors only) before
TensorFlow loads, unless the environment sets it or `ZOO_DEBUG` is set (then
TensorFlow logs everything, as it would without the zoo). TensorFlow 2.21 prints
a few lines at import whatever that level says (`oneDNN custom operations are
on`, `Could not find cuda drivers`, each library once: absl's logging is not
set up yet), and two notices as errors on first use (`failed call to cuInit` on
a machine without CUDA drivers, `oneDNN supports DT_INT64 only on platforms with
AVX-512` at the first ragged concatenation, even where the CPU has AVX-512). So
`start_up_lines_filtered` captures file descriptor 2 while the command's module
imports TensorFlow, makes that first use (`_first_use`), and writes back every
line but those informational ones, warnings and the two notices; other errors
(`E0000 ...`) pass, and the cuInit one too where CUDA's drivers were found.
"""

import contextlib
import os
import re
import sys
import tempfile

LOG_LEVEL = "TF_CPP_MIN_LOG_LEVEL"
DEBUG = "ZOO_DEBUG"
# An informational or warning line of absl's format (`I0000 00:00:1796647609.736964 10283
# port.cc:153] ...`), absl's notice that it is not set up yet, and the second line of
# TensorFlow's CPU-feature notice.
START_UP_LINE = re.compile(
    r"(?:[IW]\d{4} \d\d:\d\d:[\d.]+ +\d+ [\w.-]+:\d+\] .*"
    r"|WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    r"|To enable the following instructions: .* rebuild TensorFlow with the appropriate "
    r"compiler flags\.)"
)
# TensorFlow's two notices logged as errors on first use (see the module's docstring).
_ERROR = r"E\d{4} \d\d:\d\d:[\d.]+ +\d+ "
NO_CUDA = re.compile(r"[IW]\d{4} .*cudart_stub\.cc:\d+\] Could not find cuda drivers.*")
CUINIT_FAILED = re.compile(_ERROR + r"cuda_platform\.cc:\d+\] failed call to cuInit.*")
INT64_NOTICE = re.compile(_ERROR + r"util\.cc:\d+\] oneDNN supports DT_INT64 only on "
                          r"platforms with AVX-512\..*")


def default_log_level(environ=os.environ):
    """`TF_CPP_MIN_LOG_LEVEL=2` in `environ` unless it is set there, or `ZOO_DEBUG` is."""
    if not environ.get(DEBUG):
        environ.setdefault(LOG_LEVEL, "2")


def wanted(environ=os.environ):
    """Whether the user asked for TensorFlow's informational lines (`ZOO_DEBUG`, or a log
    level of 0 or 1)."""
    return bool(environ.get(DEBUG)) or environ.get(LOG_LEVEL, "0").strip() in ("0", "1")


@contextlib.contextmanager
def start_up_lines_filtered():
    """Run the block with file descriptor 2 captured (and TensorFlow's `_first_use` where the
    block loaded it), then write what it printed back to `sys.stderr` without TensorFlow's
    start-up lines and first-use notices (`without_notices`). Does nothing when TensorFlow
    is loaded already or its lines are `wanted`."""
    if "tensorflow" in sys.modules or wanted():
        yield
        return
    with fd2_captured(_write_kept):
        try:
            yield
        finally:
            if "tensorflow" in sys.modules:
                _first_use()


@contextlib.contextmanager
def fd2_captured(release):
    """Run the block with file descriptor 2 pointing at a temporary file, then point it back
    and call `release(text)` with what was written there, also when the block raises. C++
    libraries (TensorFlow's, CTranslate2's) log to the descriptor, not to `sys.stderr`."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            release(captured.read().decode("utf-8", errors="replace"))


def _write_kept(text):
    """Write `text` to `sys.stderr` but for TensorFlow's notices (`without_notices`)."""
    kept = without_notices(text)
    if kept:
        sys.stderr.write("".join(kept))
        sys.stderr.flush()


def without_notices(text):
    """The lines of `text` but TensorFlow's start-up lines and its two first-use notices
    (the cuInit one only where TensorFlow said it found no CUDA drivers)."""
    lines = text.splitlines(keepends=True)
    bare = [line.rstrip("\n") for line in lines]
    no_cuda = any(NO_CUDA.fullmatch(line) for line in bare)
    return [line for line, plain in zip(lines, bare)
            if not (START_UP_LINE.fullmatch(plain) or INT64_NOTICE.fullmatch(plain)
                    or (no_cuda and CUINIT_FAILED.fullmatch(plain)))]


def _first_use():
    """TensorFlow's devices found, and one ragged concatenation of int64 rows: what prints
    its two first-use notices (once a process), here where they are captured."""
    tf = sys.modules["tensorflow"]  # loaded by the block
    tf.config.list_physical_devices()
    tf.concat([tf.ragged.constant([[1]], tf.int64), tf.ones([1, 1], tf.int64)], axis=1)
