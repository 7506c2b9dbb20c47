"""`zoo ARGS` run in this process: the one helper through which the tests drive the CLI.

`run_main(*args, cwd=None)` calls `zoo.cli.main(argv)`, the function that the `zoo`
console script and `python -m zoo` call, with stdout and stderr captured (a fresh
process per command would spend most of its time importing TensorFlow), and returns
`Ran(code, out, err)`. argparse's own exits (`--help`, usage errors) are caught and give
their exit code. `cwd` runs the command from that working directory, as a user would
with relative paths. The tests about a real process (its exit code, SIGKILL) start one
themselves.
"""

import contextlib
import io
import os
import typing


class Ran(typing.NamedTuple):
    """What a command gave: its exit code, and what it printed on stdout and stderr."""

    code: int
    out: str
    err: str


def run_main(*args, cwd=None):
    """`zoo ARGS` through `zoo.cli.main` in this process: a `Ran` (code, out, err)."""
    # Imported here: tests/conftest.py imports this module before TensorFlow may load
    # (it sets TF_CPP_MIN_LOG_LEVEL first).
    from zoo import cli

    out, err = io.StringIO(), io.StringIO()
    previous = os.getcwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli.main([str(a) for a in args])
            except SystemExit as exit_:  # argparse: --help and usage errors
                code = exit_.code
    finally:
        os.chdir(previous)
    return Ran(code or 0, out.getvalue(), err.getvalue())
