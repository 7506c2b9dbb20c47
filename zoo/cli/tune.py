"""`zoo tune`: search a model's hyperparameters with keras-tuner."""

import argparse

from zoo.cli import choices
from zoo.cli.arguments import DATASETS_HELP, add_data_arguments, add_fit_arguments, positive_int


def add_tune_parser(commands):
    p = commands.add_parser(
        "tune", help="search a model's hyperparameters with keras-tuner",
        description=(
            "Search the hyperparameters of a zoo model (its family's search space: see "
            "`pydoc zoo.tuning`) on a dataset, print the best trials and write "
            "RUN_DIR/best_config.json ({\"model\", \"config\", \"fit\", ...}), which "
            "`zoo.get(best['model'], **best['config'])` and `zoo train --config` accept. "
            "Running the same command again with the same --directory continues an "
            "interrupted search (--overwrite starts over). Config fields given with --set are "
            "held constant; --space narrows a hyperparameter to a list of values or a range "
            f"{{'min_value': A, 'max_value': B}}. Datasets: {DATASETS_HELP}; the dataset "
            "options pick the same training split as `zoo train` with the same options (the "
            "test split is not used)."
        ),
        epilog=(
            "Examples:\n"
            "  zoo tune transformer-tiny --data numbers --max-trials 10 --directory tuning/tiny\n"
            "  zoo tune vit-tiny --data fashion-mnist --tuner hyperband --epochs 9 "
            "--space 'hidden_dim=[64,128]'\n"
            "  zoo tune seq2seq-bahdanau-small --data dates --tuner bayesian --set cell=gru"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_data_arguments(p, required=True)
    add_fit_arguments(
        p, strategies=tuple(s for s in choices.STRATEGIES if s != "tpu"),
        defaults=dict(epochs=3, seed=0, val_ratio=0.1),
        helps=dict(
            epochs="epochs per trial (default 3); hyperband: its largest epoch budget",
            batch_size="hold the batch size (per replica) constant instead of searching it",
            strategy="tf.distribute strategy for every trial (default: one device)",
            set="hold a config field constant; repeatable",
            seed="tuner and validation-split seed, and the data seed unless --data-seed "
            "(default 0)",
            val_ratio="share of the training split used for validation (default 0.1)",
        ),
    )
    p.add_argument("--tuner", choices=choices.TUNERS, default="random",
                   help="random search, Hyperband or Bayesian optimisation (default random)")
    p.add_argument("--max-trials", type=positive_int, default=10,
                   help="trials in all, counting those of an earlier run (default 10)")
    p.add_argument("--objective", default="val_loss",
                   help="metric to optimise, NAME or NAME:min / NAME:max (default val_loss)")
    p.add_argument("--directory", metavar="RUN_DIR",
                   help="where the search and best_config.json go (default tuning/NAME)")
    p.add_argument("--max-epochs", type=positive_int, help="hyperband: override --epochs")
    p.add_argument("--steps-per-epoch", type=positive_int, help="cap the steps of an epoch")
    p.add_argument("--space", action="append", metavar="NAME=VALUES",
                   help="replace a hyperparameter's values, e.g. 'd_model=[64,128]'; repeatable")
    p.add_argument("--overwrite", action="store_true", help="start over instead of resuming")
    p.add_argument("--top", type=positive_int, default=5, help="best trials shown (default 5)")
    p.add_argument("--quiet", action="store_true", help="no progress, only the table")
