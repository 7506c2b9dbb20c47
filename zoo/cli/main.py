"""The parser of every command, and `main`: run one; a user's mistake in one line, a bug
reported as one."""

import argparse
import importlib
import os
import sys
import traceback

from keras_attention.checks import ArgumentError
from zoo import errors
from zoo.cli import quiet
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

# Every command: the function that adds its parser (a light module, imported above) and the
# function that runs it, "module:function", imported by name (importlib) only when the command
# runs, so that `zoo --help`, every `--help`, `zoo list` and `zoo describe` import no TensorFlow.
COMMANDS = {
    "list": (add_list_parser, "zoo.cli.models:run_list"),
    "describe": (add_describe_parser, "zoo.cli.models:run_describe"),
    "train": (add_train_parser, "zoo.cli.commands.train:run_train"),
    "evaluate": (add_evaluate_parser, "zoo.cli.commands.evaluate:run_evaluate"),
    "compare": (add_compare_parser, "zoo.cli.commands.evaluate:run_compare"),
    "export": (add_export_parser, "zoo.cli.commands.saved_models:run_export"),
    "import": (add_import_parser, "zoo.cli.commands.saved_models:run_import"),
    "predict": (add_predict_parser, "zoo.cli.commands.evaluate:run_predict"),
    "tune": (add_tune_parser, "zoo.cli.commands.tune:run_tune"),
    "demo": (add_demo_parser, "zoo.cli.commands.demo:run_demo"),
    "explore": (add_explore_parser, "zoo.cli.commands.explore:run_explore"),
}

# The user's mistakes: one line, exit code 2. `errors.ZooError` is what the zoo raises for them
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
    for add_parser, _ in COMMANDS.values():
        add_parser(commands)
    return parser


def command_function(command):
    """The function that runs `command` (`COMMANDS`), its module imported now: TensorFlow's
    C++ start-up lines are kept off stderr meanwhile (`zoo.cli.quiet`)."""
    module, _, name = COMMANDS[command][1].partition(":")
    with quiet.start_up_lines_filtered():
        return getattr(importlib.import_module(module), name)


def _run(args):
    """The command of `args`, with a full disk met by any library raised as `errors.NoSpaceError`."""
    try:
        return command_function(args.command)(args)
    except errors.NoSpaceError:
        raise
    except Exception as error:
        written = [getattr(args, key, None) for key in ("out", "directory", "to", "run_dir")]
        full = errors.no_space_error(error, fallback=next(filter(None, written), None))
        if full is None:
            raise
        raise full from error


def main(argv=None):
    """Run the command of `argv` (default `sys.argv[1:]`); return its exit code.

    A user's mistake (`zoo.errors.ZooError`, a missing file or folder, an
    existing version) is one line, exit code 2; a full disk one line, exit
    code 1; anything else is a bug of the zoo: its last frames and how to see
    all of them, exit code 1. With `ZOO_DEBUG=1` every error is raised as is
    (the full traceback). TensorFlow's C++ logging is set to errors only
    (`TF_CPP_MIN_LOG_LEVEL=2`) unless the environment sets it or `ZOO_DEBUG` is set.
    """
    quiet.default_log_level()
    parser = build_parser()
    args = parser.parse_args(argv)
    debug = bool(os.environ.get("ZOO_DEBUG"))
    try:
        code = _run(args) or 0
    except errors.NoSpaceError as error:
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
