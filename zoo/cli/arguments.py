"""What every command shares: one-line usage errors, `--set` parsing, and the argument
groups of `zoo train` and `zoo tune` (the dataset options and the fit options)."""

import argparse
import ast

from zoo.errors import ZooError

EXIT_FAILED = 1  # zoo predict: some inputs failed (each said in one line), the others answered;
# any command: the disk filled (the file and the free space said in one line)
EXIT_BUG = 1  # an error that is not the user's: a bug report (`zoo.cli.main.bug_report`)
EXIT_USAGE = 2  # the user's mistake (`zoo.errors.ZooError`, a missing file): one line
EXIT_INTERRUPTED = 130

DATASETS_HELP = (
    "numbers, dates, tsv:PATH (source<TAB>target lines), gettext:LANG (English->LANG from the "
    "installed .mo catalogs), gettext-long:LANG (their messages of 12-60 words), digits, "
    "fashion-mnist, "
    "images:DIR (one sub-folder per class)"
)


class UserError(ZooError):
    """A mistake in the command line itself (a bad `--set`, a pattern matching nothing):
    a `ZooError`, reported in one line, exit code 2."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (`zoo train: error: ...`), exit code 2."""

    def error(self, message):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def parse_overrides(pairs):
    """`["d_model=256", "norm_first=true"]` -> `{"d_model": 256, "norm_first": True}`."""
    overrides = {}
    for pair in pairs or []:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
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


def positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer; received {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer; received {text!r}")
    return value


def add_data_arguments(parser, *, required, note=""):
    """The model and dataset arguments of `zoo train` and `zoo tune`.

    `NAME --data DATASET` and the dataset options (`zoo.datasets.load`), in an
    argument group of their own. They shape the training split in both
    commands alike (the held-out share, the generated sizes), so a search
    sees the data that `zoo train` will train on with the same options.
    """
    parser.add_argument("name", help="a name from `zoo list`")
    parser.add_argument("--data", metavar="DATASET", required=required,
                        help=f"the dataset: {DATASETS_HELP}{note}")
    group = parser.add_argument_group("dataset options")
    group.add_argument("--data-dir", help="fashion-mnist: folder with the IDX files")
    group.add_argument("--train-size", type=positive_int,
                       help="numbers/dates: pairs to generate; others: keep a random subset")
    group.add_argument("--test-size", type=int, help="numbers/dates: held-out pairs to generate; "
                       "others: keep a random subset of the test split")
    group.add_argument("--test-ratio", type=float,
                       help="tsv:, digits, images:: held-out share (defaults 0.05, 0.2, 0.2)")
    group.add_argument("--test-file", metavar="PATH", dest="test_path", help="tsv:: a second file of test pairs")
    group.add_argument("--data-seed", type=int, help="the seed that generates (numbers, dates) and "
                       "splits the dataset into training and test pairs (default 0; zoo tune: "
                       "its --seed), so that runs of several --seed values share one test set")



def add_fit_arguments(parser, *, strategies, helps, defaults=None):
    """The training options of `zoo train` and `zoo tune`: --epochs, --batch-size,
    --strategy, --set, --seed and --val-ratio.

    They mean the same in both commands; their help and defaults differ (a
    search trains briefly, and `zoo train` leaves defaults to the saved run
    when resuming), so each command gives them.

    Args:
        parser: the command's parser.
        strategies: the accepted `--strategy` names.
        helps: the help text of each option, keyed by its destination
            (`"epochs"`, `"batch_size"`, `"strategy"`, `"set"`, `"seed"`, `"val_ratio"`).
        defaults: the defaults that are not None, keyed the same way.
    """
    defaults = defaults or {}
    options = (
        ("--epochs", dict(type=positive_int)),
        ("--batch-size", dict(type=positive_int)),
        ("--strategy", dict(choices=strategies)),
        ("--set", dict(action="append", metavar="KEY=VALUE")),
        ("--seed", dict(type=int)),
        ("--val-ratio", dict(type=float)),
    )
    for flag, kwargs in options:
        dest = flag[2:].replace("-", "_")
        parser.add_argument(flag, default=defaults.get(dest), help=helps[dest], **kwargs)


