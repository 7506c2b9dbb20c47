"""`zoo train`: train a model on a dataset into a run directory (or resume one)."""

from zoo import distribute, runs
from zoo.cli.arguments import parse_overrides
from zoo.runs.options import TrainingOptions


def run_train(args):
    """`zoo train`: train (or resume) the run the arguments describe."""
    runs.train(
        args.name, args.data, args.out, strategy=args.strategy, tpu=args.tpu,
        processes=distribute.Processes(args.coordinator, args.num_processes, args.process_id),
        overrides=parse_overrides(args.set), config_file=args.config,
        **{name: getattr(args, name) for name in TrainingOptions.names()},
    )
