"""The parser of every command, and `main`: run one; a user's mistake in one line, a bug
reported as one."""

import argparse
import os
import sys
import traceback

from keras_attention.checks import ArgumentError
from zoo import files
from zoo.cli.arguments import (
    EXIT_BUG,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    ArgumentParser,
)
from zoo.cli.demo import add_demo_parser
from zoo.cli.evaluate import add_compare_parser, add_evaluate_parser, add_predict_parser
from zoo.cli.explore import add_explore_parser
from zoo.cli.models import add_describe_parser, add_list_parser
from zoo.cli.saved_models import add_export_parser, add_import_parser
from zoo.cli.train import add_train_parser
from zoo.cli.tune import add_tune_parser
from zoo.errors import ZooError  # noqa: F401 - named in the docstring of USER_ERRORS

# The user's mistakes: one line, exit code 2. `ZooError` is what the zoo raises for them
# (a bad name, flag, `--set` field or file; `UserError` is one); the others are the paths
# given that are missing, or not folders, or a version that exists already.
USER_ERRORS = (ArgumentError, FileNotFoundError, NotADirectoryError, FileExistsError)
BUG_FRAMES = 3  # the frames a bug report shows (ZOO_DEBUG=1: all of them)


def build_parser():
    parser = ArgumentParser(
        prog="zoo",
        description="keras-attention model zoo: list, describe, train, evaluate, export and "
        "run attention models.",
        epilog="Example: zoo train transformer-tiny --data numbers --epochs 5 --out runs/tiny\n"
        "Set ZOO_DEBUG=1 to see Python tracebacks for errors.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_list_parser(commands)
    add_describe_parser(commands)
    add_train_parser(commands)
    add_evaluate_parser(commands)
    add_compare_parser(commands)
    add_export_parser(commands)
    add_import_parser(commands)
    add_predict_parser(commands)
    add_tune_parser(commands)
    add_demo_parser(commands)
    add_explore_parser(commands)
    return parser


def _run(args):
    """`args.func(args)`, with a full disk met by any library raised as `files.NoSpaceError`."""
    try:
        return args.func(args)
    except files.NoSpaceError:
        raise
    except Exception as error:
        written = [getattr(args, key, None) for key in ("out", "directory", "to", "run_dir")]
        full = files.no_space_error(error, fallback=next(filter(None, written), None))
        if full is None:
            raise
        raise full from error


def main(argv=None):
    """Run the command of `argv` (default `sys.argv[1:]`); return its exit code.

    A user's mistake (`zoo.errors.ZooError`, a missing file or folder, an
    existing version) is one line, exit code 2; a full disk one line, exit
    code 1; anything else is a bug of the zoo: its last frames and how to see
    all of them, exit code 1. With `ZOO_DEBUG=1` every error is raised as is
    (the full traceback).
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    debug = bool(os.environ.get("ZOO_DEBUG"))
    try:
        code = _run(args) or 0
    except files.NoSpaceError as error:
        if debug:
            raise
        print(f"zoo {args.command}: error: {error}", file=sys.stderr)
        return EXIT_FAILED
    except USER_ERRORS as error:
        if debug:
            raise
        print(f"zoo {args.command}: error: {_one_line(error)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        hint = " (run the same command again to resume)" if args.command in ("train", "tune") else ""
        print(f"zoo {args.command}: interrupted{hint}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as error:  # noqa: BLE001 - any other error is a bug, reported as one
        if debug:
            raise
        print(bug_report(args.command, error), file=sys.stderr)
        return EXIT_BUG
    return code


def _one_line(error):
    return " ".join(str(error).split()) or type(error).__name__


def bug_report(command, error, frames=BUG_FRAMES):
    """What `main` prints for an error that is not the user's: the error in one line, the
    last `frames` frames of its traceback, and how to see them all."""
    lines = [f"zoo {command}: internal error (a bug, not a mistake in the command): "
             f"{type(error).__name__}: {_one_line(error)}"]
    for frame in traceback.extract_tb(error.__traceback__)[-frames:]:
        lines.append(f"  {frame.filename}:{frame.lineno} in {frame.name}")
    lines.append("Run it again with ZOO_DEBUG=1 for the full traceback, and report it with "
                 "the command you ran.")
    return "\n".join(lines)
