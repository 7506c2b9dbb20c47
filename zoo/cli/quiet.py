"""TensorFlow's C++ logging kept off a command's stderr, unless asked for.

`default_log_level` sets `TF_CPP_MIN_LOG_LEVEL=2` (errors only) before
TensorFlow loads, unless the environment sets it or `ZOO_DEBUG` is set (then
TensorFlow logs everything, as it would without the zoo). TensorFlow 2.21 prints
a few lines at import whatever that level says (`oneDNN custom operations are
on`, `Could not find cuda drivers`, each library once: absl's logging is not
set up yet), so `start_up_lines_filtered` captures file descriptor 2 while the
command's module imports TensorFlow and writes back every line but those
informational ones and warnings; errors (`E0000 ...`) pass.
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
    """Run the block with file descriptor 2 captured, then write what it printed back to
    `sys.stderr` without TensorFlow's start-up lines (`START_UP_LINE`). Does nothing when
    TensorFlow is loaded already or its lines are `wanted`."""
    if "tensorflow" in sys.modules or wanted():
        yield
        return
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
            text = captured.read().decode("utf-8", errors="replace")
            kept = [line for line in text.splitlines(keepends=True)
                    if not START_UP_LINE.fullmatch(line.rstrip("\n"))]
            if kept:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()
