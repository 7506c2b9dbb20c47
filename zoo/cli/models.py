"""`zoo list` and `zoo describe`: the registered models, without building them."""

import json

import zoo
from zoo.cli.arguments import UserError, parse_overrides


def run_list(args):
    """`zoo list`: the registered names matching the pattern, each with its reference."""
    names = zoo.list(args.pattern)
    if not names:
        raise UserError(f"No model matches {args.pattern!r}; `zoo list` shows them all.")
    width = max(len(n) for n in names)
    for name in names:
        print(f"{name:<{width}}  {zoo.entry(name).reference}")


def run_describe(args):
    """`zoo describe`: a model's config, reference, parameter count and signature."""
    description = zoo.describe(args.name, **parse_overrides(args.set))
    if args.json:
        print(json.dumps(description.to_dict(), indent=2, default=str))
    else:
        print(description)


def add_list_parser(commands):
    p = commands.add_parser(
        "list", help="list registered models",
        description="List the registered models, optionally matching a glob pattern.",
        epilog="Example: zoo list 'vit-*'",
    )
    p.add_argument("pattern", nargs="?", default="*", help="glob pattern, e.g. 'vit-*'")


def add_describe_parser(commands):
    p = commands.add_parser(
        "describe", help="config, paper, parameter count and signature of a model",
        description="Describe a model without building it.",
        epilog="Example: zoo describe transformer-tiny --set d_model=256 --set num_heads=8",
    )
    p.add_argument("name", help="a name from `zoo list`")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config field")
    p.add_argument("--json", action="store_true", help="print JSON")


