"""`zoo tune`: search a model's hyperparameters with keras-tuner."""

import os

from keras_attention import backends
from zoo import distribute, tuning
from zoo.cli.arguments import parse_overrides
from zoo.runs.options import TrainingOptions


def run_tune(args):
    """`zoo tune`: search a model's hyperparameters, print the best trials."""
    backends.require_tensorflow("zoo tune")  # before the data: keras-tuner's trials are TF's
    # The strategy first: MultiWorkerMirroredStrategy must exist before any TF op runs.
    strategy = distribute.get_strategy(args.strategy) if args.strategy else None
    fixed = parse_overrides(args.set)
    if args.batch_size is not None:
        fixed["batch_size"] = args.batch_size
    space = parse_overrides(args.space)
    tuning.hypermodel(args.name, space=space, **fixed)  # bad --set/--space fail before loading
    data = tuning.load_data(
        args.name, args.data, fixed=fixed, space=space, val_ratio=args.val_ratio, seed=args.seed,
        epochs=args.epochs, steps_per_epoch=args.steps_per_epoch, quiet=args.quiet,
        **data_options(args),
    )
    result = tuning.tune(
        args.name, data.train, validation_data=data.validation, tuner=args.tuner,
        max_trials=args.max_trials, objective=args.objective,
        directory=args.directory or os.path.join("tuning", args.name), strategy=strategy,
        epochs=args.epochs, steps_per_epoch=args.steps_per_epoch, max_epochs=args.max_epochs,
        space=space, overwrite=args.overwrite, seed=args.seed, num_best=args.top,
        verbose=0 if args.quiet else 1, **{**fixed, **data.fixed},
    )
    if args.quiet:
        print(result.table)
        print(f"Best config written to {result.path}")


def data_options(args):
    """The dataset options of `add_data_arguments` as keyword arguments."""
    return {name: getattr(args, name) for name in TrainingOptions.names("data")}
