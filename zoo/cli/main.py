"""The parser of every command, and `main`: run one, errors in one line."""

import argparse
import os
import sys

from zoo import files
from zoo.cli.arguments import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    ArgumentParser,
    UserError,
)
from zoo.cli.demo import add_demo_parser
from zoo.cli.evaluate import add_evaluate_parser, add_predict_parser
from zoo.cli.models import add_describe_parser, add_list_parser
from zoo.cli.saved_models import add_export_parser, add_import_parser
from zoo.cli.train import add_train_parser
from zoo.cli.tune import add_tune_parser


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
    add_export_parser(commands)
    add_import_parser(commands)
    add_predict_parser(commands)
    add_tune_parser(commands)
    add_demo_parser(commands)
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
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code = _run(args) or 0
    except files.NoSpaceError as error:
        if os.environ.get("ZOO_DEBUG"):
            raise
        print(f"zoo {args.command}: error: {error}", file=sys.stderr)
        return EXIT_FAILED
    except (UserError, ValueError, FileNotFoundError, NotADirectoryError) as error:
        # ValueError covers the zoo's own checks (unknown model, bad override values,
        # data that does not fit the model); FileNotFoundError missing data or runs.
        if os.environ.get("ZOO_DEBUG"):
            raise
        message = " ".join(str(error).split()) or type(error).__name__
        print(f"zoo {args.command}: error: {message}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        hint = " (run the same command again to resume)" if args.command in ("train", "tune") else ""
        print(f"zoo {args.command}: interrupted{hint}", file=sys.stderr)
        return EXIT_INTERRUPTED
    return code


