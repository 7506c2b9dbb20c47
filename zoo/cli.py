"""The command line: `python -m zoo` (or the `zoo` console script).

    zoo list [PATTERN]
    zoo describe NAME [--set key=value ...] [--json]
    zoo train NAME --data DATASET [--epochs N --batch-size N --max-steps N --strategy S
                                   --mixed-precision [P] --jit --out RUN_DIR --config FILE
                                   --weights PATH --tokenizer sentencepiece|wordpiece
                                   --set key=value ...]
    zoo evaluate RUN_DIR [--checkpoint best|last --beam-size K --limit N]
    zoo export RUN_DIR [--to saved_models/NAME --version N]
    zoo import OPUS_MT_FOLDER --to saved_models/NAME [--version N --beam-size K]
    zoo predict RUN_DIR|SAVED_MODEL INPUT... [--beam-size K --top-k K --json]
    zoo tune NAME --data DATASET [--tuner random|hyperband|bayesian --max-trials N
                                  --objective val_loss --directory RUN_DIR --strategy S
                                  --set key=value ... --space key=[values] ...]
    (train and tune share the dataset options --data-dir --train-size --test-size
     --test-ratio --test-file, and --epochs --batch-size --strategy --set --seed --val-ratio)
    zoo demo [--minutes M]

User errors (unknown model, missing file, bad --set, a dataset that does not
fit the model) print one line and exit with code 2; set ZOO_DEBUG=1 to see
the traceback instead.
"""

import argparse
import ast
import json
import os
import sys

import zoo
from zoo import demo, distribute, marian, runs, tokenizers, tuning
from zoo.runs.options import TrainingOptions

EXIT_FAILED = 1  # zoo predict: some inputs failed (each said in one line), the others answered
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

DATASETS_HELP = (
    "numbers, dates, tsv:PATH (source<TAB>target lines), gettext:LANG (English->LANG from the "
    "installed .mo catalogs), digits, fashion-mnist, "
    "images:DIR (one sub-folder per class)"
)


class UserError(Exception):
    """A mistake in what the user asked for: reported in one line, exit code 2."""


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


# === Commands ===


def _cmd_list(args):
    names = zoo.list(args.pattern)
    if not names:
        raise UserError(f"No model matches {args.pattern!r}; `zoo list` shows them all.")
    width = max(len(n) for n in names)
    for name in names:
        print(f"{name:<{width}}  {zoo.entry(name).reference}")


def _cmd_describe(args):
    description = zoo.describe(args.name, **parse_overrides(args.set))
    if args.json:
        print(json.dumps(description.to_dict(), indent=2, default=str))
    else:
        print(description)


def _cmd_train(args):
    runs.train(
        args.name, args.data, args.out, strategy=args.strategy, tpu=args.tpu,
        overrides=parse_overrides(args.set), config_file=args.config,
        **{name: getattr(args, name) for name in TrainingOptions.names()},
    )


def _cmd_evaluate(args):
    result = runs.evaluate(
        args.run_dir, checkpoint=args.checkpoint, beam_size=args.beam_size, alpha=args.alpha,
        limit=args.limit, batch_size=args.batch_size, quiet=args.json,
    )
    if args.json:
        print(json.dumps(result, indent=2))


def _cmd_export(args):
    path = runs.export_run(
        args.run_dir, to=args.to, version=args.version, checkpoint=args.checkpoint,
        beam_size=args.beam_size, alpha=args.alpha, top_k=args.top_k, jit_compile=args.jit,
    )
    print(f"Load it with tf.saved_model.load({str(path)!r}), or: zoo predict {path} INPUT...")


def _cmd_import(args):
    options = {key: getattr(args, key) for key in ("beam_size", "alpha", "max_length")
               if getattr(args, key) is not None}
    path = marian.export_folder(args.folder, args.to, args.version, **options)
    print(f"Load it with tf.saved_model.load({str(path)!r}), or: zoo predict {path} TEXT...")


def _cmd_predict(args):
    results = runs.predict(
        args.path, args.inputs, beam_size=args.beam_size, alpha=args.alpha, top_k=args.top_k,
        checkpoint=args.checkpoint,
    )
    failed = [result for result in results if "error" in result]
    for result in failed:  # one line each; the other inputs are still answered
        print(f"zoo predict: error: {result['input']}: {result['error']}", file=sys.stderr)
    if args.json:
        print(json.dumps(results, indent=2, ensure_ascii=False))
    else:
        for result in results:
            if "translation" in result:
                print(f"{result['input']}\n  -> {result['translation']}")
            elif "classes" in result:
                classes = ", ".join(f"{name} {100 * p:.1f}%" for name, p in result["classes"])
                print(f"{result['input']}: {classes}")
    return EXIT_FAILED if failed else 0


def _cmd_tune(args):
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
        **_data_options(args),
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


def _cmd_demo(args):
    demo.run(
        minutes=args.minutes, train_size=args.train_size, test_size=args.test_size,
        seed=args.seed, out=args.out, export_root=args.export_to,
    )


# === The parser ===


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer; received {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer; received {text!r}")
    return value


def _add_data_arguments(parser, *, required, note=""):
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
    group.add_argument("--train-size", type=_positive_int,
                       help="numbers/dates: pairs to generate; others: keep a random subset")
    group.add_argument("--test-size", type=int, help="numbers/dates: held-out pairs to generate; "
                       "others: keep a random subset of the test split")
    group.add_argument("--test-ratio", type=float,
                       help="tsv:, digits, images:: held-out share (defaults 0.05, 0.2, 0.2)")
    group.add_argument("--test-file", metavar="PATH", dest="test_path", help="tsv:: a second file of test pairs")


def _data_options(args):
    """The dataset options of `_add_data_arguments` as keyword arguments."""
    return {name: getattr(args, name) for name in TrainingOptions.names("data")}


def _add_fit_arguments(parser, *, strategies, helps, defaults=None):
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
        ("--epochs", dict(type=_positive_int)),
        ("--batch-size", dict(type=_positive_int)),
        ("--strategy", dict(choices=strategies)),
        ("--set", dict(action="append", metavar="KEY=VALUE")),
        ("--seed", dict(type=int)),
        ("--val-ratio", dict(type=float)),
    )
    for flag, kwargs in options:
        dest = flag[2:].replace("-", "_")
        parser.add_argument(flag, default=defaults.get(dest), help=helps[dest], **kwargs)


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
    _add_list_parser(commands)
    _add_describe_parser(commands)
    _add_train_parser(commands)
    _add_evaluate_parser(commands)
    _add_export_parser(commands)
    _add_import_parser(commands)
    _add_predict_parser(commands)
    _add_tune_parser(commands)
    _add_demo_parser(commands)
    return parser


def _add_list_parser(commands):
    p = commands.add_parser(
        "list", help="list registered models",
        description="List the registered models, optionally matching a glob pattern.",
        epilog="Example: zoo list 'vit-*'",
    )
    p.add_argument("pattern", nargs="?", default="*", help="glob pattern, e.g. 'vit-*'")
    p.set_defaults(func=_cmd_list)


def _add_describe_parser(commands):
    p = commands.add_parser(
        "describe", help="config, paper, parameter count and signature of a model",
        description="Describe a model without building it.",
        epilog="Example: zoo describe transformer-tiny --set d_model=256 --set num_heads=8",
    )
    p.add_argument("name", help="a name from `zoo list`")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config field")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cmd_describe)


def _add_train_parser(commands):
    p = commands.add_parser(
        "train", help="train a model on a dataset into a run directory",
        description=(
            "Train a zoo model with its family's recipe. Writes RUN_DIR/config.json, the "
            "tokenizer vocabularies, checkpoints/{last,best}.keras, logs/ (TensorBoard), "
            "history.csv and curves.png. Run the same command again with the same --out after "
            "an interruption to resume from the last completed epoch (arguments left out are "
            "taken from the saved config; arguments that differ from it are refused). "
            "Vocabulary size (translation) and image size, channels and classes (images) come "
            f"from the data. Datasets: {DATASETS_HELP}."
        ),
        epilog=(
            "Examples:\n"
            "  zoo train transformer-tiny --data numbers --epochs 20 --out runs/numbers\n"
            "  zoo train vit-tiny --data fashion-mnist --epochs 80 --batch-size 128 --jit\n"
            "  zoo train seq2seq-bahdanau-small --data tsv:pairs.tsv --test-ratio 0.1"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_data_arguments(p, required=False, note=" (may be left out when resuming)")
    p.add_argument("--out", metavar="RUN_DIR", help="run directory (default runs/NAME-DATE-TIME); "
                   "an unfinished run there is resumed")
    _add_fit_arguments(p, strategies=distribute.STRATEGIES, helps=dict(
        epochs="epochs (default 10)",
        batch_size="examples per replica per step (default 64 for text, 128 for images)",
        strategy="tf.distribute strategy (default: one device)",
        set="override a config field (after --config); repeatable",
        seed="random seed (default 0)",
        val_ratio="share of the training split used for validation (default 0.05)",
    ))
    p.add_argument("--max-steps", type=_positive_int, help="stop after this many steps in total")
    p.add_argument("--time-limit", type=float, metavar="MINUTES",
                   help="stop training after this many minutes")
    p.add_argument("--tpu", help="TPU name or grpc:// address for --strategy tpu")
    p.add_argument("--mixed-precision", nargs="?", const="auto", metavar="POLICY",
                   choices=("auto", "float16", "bfloat16", "float32"),
                   help="mixed precision: auto (the default without POLICY: bfloat16 on TPU and "
                   "CPU, float16 on GPU), float16, bfloat16, or float32 to turn it off; "
                   "without the option: bfloat16 on TPU, float32 elsewhere")
    p.add_argument("--jit", action=argparse.BooleanOptionalAction, default=None,
                   help="XLA compilation (sets the config's jit_compile)")
    p.add_argument("--config", metavar="FILE",
                   help="JSON file of config fields (or a run's config.json)")
    p.add_argument("--separate-vocabularies", action="store_const", const=True, default=None,
                   help="translation: one vocabulary per language instead of a shared one")
    p.add_argument("--weights", metavar="PATH",
                   help="start from pretrained weights (ViT: Google .npz, timm .safetensors or "
                   ".pth, a Hugging Face folder); the file sets the architecture and the "
                   "fine-tuning recipe")
    p.add_argument("--tokenizer", choices=tokenizers.TOKENIZERS,
                   help="translation: sentencepiece (cased, reversible; the default for new "
                   "runs) or wordpiece (lower-cased)")
    p.set_defaults(func=_cmd_train)


def _add_import_parser(commands):
    p = commands.add_parser(
        "import", help="a pretrained OPUS-MT (Marian) folder as a TF Serving SavedModel",
        description=(
            "Import a Hugging Face Marian / OPUS-MT folder (config.json, model.safetensors or "
            "pytorch_model.bin, source.spm, target.spm, vocab.json) into the zoo's Transformer "
            "and export it: strings in, strings out, its SentencePiece tokenizers and beam "
            "search (Hugging Face's length penalty) inside the graph (zoo.marian)."
        ),
        epilog="Example: zoo import opus-mt-en-de --to saved_models/opus-mt-en-de",
    )
    p.add_argument("folder", metavar="FOLDER")
    p.add_argument("--to", metavar="PATH", required=True, help="the export root, e.g. "
                   "saved_models/NAME; the version goes into PATH/VERSION/")
    p.add_argument("--version", type=_positive_int, help="default: the next free version")
    p.add_argument("--beam-size", type=_positive_int, help="serving_default's beam (default 4)")
    p.add_argument("--alpha", type=float, help="length penalty (default 1.0, Hugging Face's)")
    p.add_argument("--max-length", type=_positive_int,
                   help="longest source and output in tokens (default: the model's position table)")
    p.set_defaults(func=_cmd_import)


def _add_evaluate_parser(commands):
    p = commands.add_parser(
        "evaluate", help="score a trained run on its held-out test split",
        description=(
            "Translation: exact match and BLEU of greedy and beam-search decoding on the "
            "test split. Images: accuracy on the test split. Writes RUN_DIR/metrics.json."
        ),
        epilog="Example: zoo evaluate runs/numbers --beam-size 4",
    )
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--checkpoint", choices=("best", "last"), default="best")
    p.add_argument("--beam-size", type=_positive_int, default=4,
                   help="beam width for the beam-search scores; 1 skips them (default 4)")
    p.add_argument("--alpha", type=float, default=0.6, help="beam length penalty (default 0.6)")
    p.add_argument("--limit", type=_positive_int, help="score only the first N test examples")
    p.add_argument("--batch-size", type=_positive_int, default=128)
    p.add_argument("--json", action="store_true", help="print the metrics as JSON only")
    p.set_defaults(func=_cmd_evaluate)


def _add_export_parser(commands):
    p = commands.add_parser(
        "export", help="export a trained run as a versioned SavedModel",
        description=(
            "Write the run's model as a TensorFlow SavedModel into TO/<version> (TF Serving "
            "layout). Translation models take text (serving_default: beam search; greedy); "
            "image models take uint8 images or encoded image bytes."
        ),
        epilog="Example: zoo export runs/numbers --to saved_models/transformer-tiny",
    )
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--to", metavar="DIR", help="export root (default saved_models/MODEL_NAME)")
    p.add_argument("--version", type=_positive_int, help="version number (default: the next one)")
    p.add_argument("--checkpoint", choices=("best", "last"), default="best")
    p.add_argument("--beam-size", type=_positive_int, default=4)
    p.add_argument("--alpha", type=float, default=0.6)
    p.add_argument("--top-k", type=_positive_int, default=None,
                   help="images: classes returned (default 5, or every class when fewer)")
    p.add_argument("--jit", action="store_true",
                   help="translation: decode with XLA inside the SavedModel (faster; TF Serving "
                   "on CPU then needs --xla_cpu_compilation_enabled=true)")
    p.set_defaults(func=_cmd_export)


def _add_predict_parser(commands):
    p = commands.add_parser(
        "predict", help="translate sentences or classify images with a run or SavedModel",
        description=(
            "PATH is a run directory (decoding in this process) or an exported SavedModel "
            "(a version folder, or an export root: its newest version). INPUTs are sentences "
            "for translation models, image files for image models."
        ),
        epilog=(
            "Examples:\n"
            "  zoo predict runs/numbers 'dreihundertvierundzwanzig' 'elf'\n"
            "  zoo predict saved_models/vit-tiny shirt.png"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("path", metavar="RUN_DIR|SAVED_MODEL")
    p.add_argument("inputs", metavar="INPUT", nargs="+")
    p.add_argument("--beam-size", type=_positive_int,
                   help="1 for greedy decoding (default: beam search of 4)")
    p.add_argument("--alpha", type=float, default=0.6)
    p.add_argument("--top-k", type=_positive_int, default=3, help="images: classes shown")
    p.add_argument("--checkpoint", choices=("best", "last"), default="best")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cmd_predict)


def _add_tune_parser(commands):
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
    _add_data_arguments(p, required=True)
    _add_fit_arguments(
        p, strategies=tuple(s for s in distribute.STRATEGIES if s != "tpu"),
        defaults=dict(epochs=3, seed=0, val_ratio=0.1),
        helps=dict(
            epochs="epochs per trial (default 3); hyperband: its largest epoch budget",
            batch_size="hold the batch size (per replica) constant instead of searching it",
            strategy="tf.distribute strategy for every trial (default: one device)",
            set="hold a config field constant; repeatable",
            seed="tuner, split and data seed (default 0)",
            val_ratio="share of the training split used for validation (default 0.1)",
        ),
    )
    p.add_argument("--tuner", choices=tuning.TUNERS, default="random",
                   help="random search, Hyperband or Bayesian optimisation (default random)")
    p.add_argument("--max-trials", type=_positive_int, default=10,
                   help="trials in all, counting those of an earlier run (default 10)")
    p.add_argument("--objective", default="val_loss",
                   help="metric to optimise, NAME or NAME:min / NAME:max (default val_loss)")
    p.add_argument("--directory", metavar="RUN_DIR",
                   help="where the search and best_config.json go (default tuning/NAME)")
    p.add_argument("--max-epochs", type=_positive_int, help="hyperband: override --epochs")
    p.add_argument("--steps-per-epoch", type=_positive_int, help="cap the steps of an epoch")
    p.add_argument("--space", action="append", metavar="NAME=VALUES",
                   help="replace a hyperparameter's values, e.g. 'd_model=[64,128]'; repeatable")
    p.add_argument("--overwrite", action="store_true", help="start over instead of resuming")
    p.add_argument("--top", type=_positive_int, default=5, help="best trials shown (default 5)")
    p.add_argument("--quiet", action="store_true", help="no progress, only the table")
    p.set_defaults(func=_cmd_tune)


def _add_demo_parser(commands):
    p = commands.add_parser(
        "demo", help="train transformer-tiny on the offline numbers task, export, translate",
        description=(
            "The main job: generate the German->English number-words task, learn a WordPiece "
            "vocabulary, train transformer-tiny for a bounded time, report exact match and "
            "BLEU (greedy and beam search) on held-out numbers, export a SavedModel and "
            "translate held-out examples with it."
        ),
        epilog="Example: zoo demo --minutes 4",
    )
    p.add_argument("--minutes", type=float, default=4.0, help="training time budget (default 4)")
    p.add_argument("--train-size", type=_positive_int, default=20000,
                   help="training pairs (default 20000)")
    p.add_argument("--test-size", type=_positive_int, default=1000,
                   help="held-out pairs (default 1000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="runs/demo", help="run directory, replaced (default runs/demo)")
    p.add_argument("--export-to", default="saved_models/transformer-tiny",
                   help="export root (default saved_models/transformer-tiny)")
    p.set_defaults(func=_cmd_demo)


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code = args.func(args) or 0
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


if __name__ == "__main__":
    sys.exit(main())
