"""The command line: `python -m zoo` (or the `zoo` console script).

    zoo list [PATTERN]
    zoo describe NAME [--set key=value ...] [--json]
    zoo demo [--minutes M]

User errors (unknown model, bad --set) print one line and exit with code 2.
"""

import argparse
import ast
import json
import sys

EXIT_USAGE = 2


class UserError(Exception):
    """A mistake in what the user asked for: reported in one line, exit code 2."""


def parse_overrides(pairs):
    """`["d_model=256", "norm_first=true"]` -> `{"d_model": 256, "norm_first": True}`."""
    overrides = {}
    for pair in pairs or []:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise UserError(f"--set expects key=value; received {pair!r}.")
        lowered = raw.strip().lower()
        if lowered in ("true", "false"):
            value = lowered == "true"
        elif lowered in ("none", "null"):
            value = None
        else:
            try:
                value = ast.literal_eval(raw)
            except (ValueError, SyntaxError):
                value = raw
        overrides[key.strip()] = value
    return overrides


def _cmd_list(args):
    import zoo

    names = zoo.list(args.pattern)
    if not names:
        raise UserError(f"No model matches {args.pattern!r}; `zoo list` shows them all.")
    width = max(len(n) for n in names)
    for name in names:
        print(f"{name:<{width}}  {zoo.entry(name).reference}")


def _cmd_describe(args):
    import zoo

    description = zoo.describe(args.name, **parse_overrides(args.set))
    if args.json:
        print(json.dumps(description.to_dict(), indent=2, default=str))
    else:
        print(description)


def _cmd_demo(args):
    from zoo import demo

    demo.run(
        minutes=args.minutes, train_size=args.train_size, test_size=args.test_size, seed=args.seed
    )


def build_parser():
    parser = argparse.ArgumentParser(
        prog="zoo",
        description="keras-attention model zoo: list, describe and train attention models.",
        epilog="Example: zoo describe transformer-base",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = commands.add_parser(
        "list", help="list registered models",
        description="List the registered models, optionally matching a glob pattern.",
        epilog="Example: zoo list 'vit-*'",
    )
    p.add_argument("pattern", nargs="?", default="*", help="glob pattern, e.g. 'vit-*'")
    p.set_defaults(func=_cmd_list)

    p = commands.add_parser(
        "describe", help="config, paper, parameter count and signature of a model",
        description="Describe a model without building it.",
        epilog="Example: zoo describe transformer-tiny --set d_model=256 --set num_heads=8",
    )
    p.add_argument("name", help="a name from `zoo list`")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config field")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cmd_describe)

    p = commands.add_parser(
        "demo", help="train transformer-tiny on the offline numbers task and translate",
        description=(
            "The main job: generate the German->English number-words task, learn a WordPiece "
            "vocabulary, train transformer-tiny for a bounded time, and report exact match and "
            "BLEU of greedy decoding on held-out numbers."
        ),
        epilog="Example: zoo demo --minutes 4",
    )
    p.add_argument("--minutes", type=float, default=4.0, help="training time budget (default 4)")
    p.add_argument("--train-size", type=int, default=20000, help="training pairs (default 20000)")
    p.add_argument("--test-size", type=int, default=1000, help="held-out pairs (default 1000)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_cmd_demo)
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        args.func(args)
    except (UserError, ValueError, FileNotFoundError) as error:
        # ValueError covers the zoo's own checks (unknown model, bad override values).
        print(f"zoo {args.command}: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    return 0


if __name__ == "__main__":
    sys.exit(main())
