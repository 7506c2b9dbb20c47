"""`zoo train`: train a model on a dataset into a run directory (or resume one)."""

import argparse

from zoo.cli import choices
from zoo.cli.arguments import DATASETS_HELP, add_data_arguments, add_fit_arguments, positive_int

# `zoo train`'s help for the arguments it shares with `zoo tune` (`add_fit_arguments`).
FIT_HELPS = dict(
    epochs="epochs (default 10; with --time-limit or --max-steps, as many as the budget "
    "allows)",
    batch_size="examples per replica per step (default 64 for text, 128 for images)",
    strategy="where it trains (default: one device): mirrored, the local devices; multiworker, "
    "several machines (TensorFlow: TF_CONFIG; JAX: --coordinator, --num-processes, --process-id); "
    "tpu (TensorFlow)",
    set="override a config field (after --config); repeatable",
    seed="random seed of the weights, dropout and batch order (default 0); the test "
    "split has its own, --data-seed",
    val_ratio="share of the training split used for validation (default 0.05)",
)


def add_train_parser(commands):
    """`zoo train NAME`: the data, the run directory, the fit, the budget, the device and what
    the model starts from."""
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
            "  zoo train seq2seq-bahdanau-small --data tsv:pairs.tsv --test-ratio 0.1\n"
            "  zoo train transformer-base --weights opus-mt-en-de --data tsv:pairs.tsv"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_data_arguments(p, required=False, note=" (may be left out when resuming)")
    p.add_argument("--out", metavar="RUN_DIR", help="run directory (default runs/NAME-DATE-TIME); "
                   "an unfinished run there is resumed")
    add_fit_arguments(p, strategies=choices.STRATEGIES, helps=FIT_HELPS)
    _add_budget_arguments(p)
    _add_device_arguments(p)
    _add_starting_point_arguments(p)


def _add_budget_arguments(p):
    """The budget (steps, minutes) and what it sets: batches of tokens, the learning-rate
    schedule and its warm-up, the epoch length, the averaged snapshots."""
    p.add_argument("--max-steps", type=positive_int, help="stop after this many steps in total")
    p.add_argument("--batch-tokens", type=positive_int, metavar="N",
                   help="translation: batches of at most N tokens per replica, by length, "
                        "instead of --batch-size sentences (fairseq's --max-tokens; the default "
                        "of a Transformer under a short budget: 1024)")
    p.add_argument("--time-limit", type=float, metavar="MINUTES",
                   help="stop training after this many minutes of training in total (a resumed "
                   "run trains what is left): time training the epochs the run kept, not wall "
                   "time; a process's start-up and the part of an epoch a kill loses are not "
                   "counted. A short budget (at most 60 minutes, or "
                   "--max-steps at most 5000) trains a Transformer on batches of 1024 tokens "
                   "without dropout, warming up over 30%% of it to the paper's peak rate, "
                   "unless --batch-size, --batch-tokens, --warmup-ratio or --set say "
                   "otherwise")
    p.add_argument("--schedule", choices=choices.SCHEDULES,
                   help="learning-rate schedule: auto (the default: with --time-limit or "
                   "--max-steps, a 5%% warm-up and a linear decay to zero when the budget ends; "
                   "else the family's own), paper (the family's own), budget-linear, "
                   "budget-cosine")
    p.add_argument("--warmup-ratio", type=float, metavar="R",
                   help="with a budget: the share of its steps spent warming up (default 0.05; "
                   "0.3 for a Transformer under a short budget)")
    p.add_argument("--steps-per-epoch", type=positive_int, metavar="N",
                   help="an epoch (validation, history row, checkpoint, backup) of N steps over "
                   "the repeated data (default: one pass, or ~5 minutes of steps when a pass "
                   "takes longer)")
    p.add_argument("--average-checkpoints", type=int, metavar="K",
                   help="with a budget: average K snapshots of the weights over its last 20%% "
                   "into checkpoints/average.keras (default 5; 0 for none)")


def _add_device_arguments(p):
    """Where and how it runs: the TPU, mixed precision, XLA."""
    p.add_argument("--tpu", help="TPU name or grpc:// address for --strategy tpu")
    p.add_argument("--coordinator", metavar="HOST:PORT",
                   help="JAX, --strategy multiworker: process 0's address (default: Keras's "
                   "KERAS_DISTRIBUTION_JOB_ADDRESSES, else what JAX finds of its cluster)")
    p.add_argument("--num-processes", type=positive_int, metavar="N",
                   help="JAX, --strategy multiworker: the job's processes (default: "
                   "KERAS_DISTRIBUTION_NUM_PROCESSES)")
    p.add_argument("--process-id", type=int, metavar="I",
                   help="JAX, --strategy multiworker: this process, 0 to N-1; 0 keeps the "
                   "files (default: KERAS_DISTRIBUTION_PROCESS_ID)")
    p.add_argument("--model-parallel", type=positive_int, metavar="N",
                   help="JAX: split the attention and feed-forward kernels and the embeddings "
                   "over N devices (keras.distribution.ModelParallel, zoo.layout_map), each "
                   "batch over the devices / N others; N must divide the devices; instead of "
                   "--strategy")
    p.add_argument("--mixed-precision", nargs="?", const="auto", metavar="POLICY",
                   choices=("auto", "float16", "bfloat16", "float32"),
                   help="mixed precision: auto (the default without POLICY: bfloat16 on TPU and "
                   "CPU, float16 on GPU), float16, bfloat16, or float32 to turn it off; "
                   "without the option: bfloat16 on TPU, float32 elsewhere")
    p.add_argument("--jit", action=argparse.BooleanOptionalAction, default=None,
                   help="XLA compilation (sets the config's jit_compile)")


def _add_starting_point_arguments(p):
    """What the model starts from: a config file, pretrained weights, its tokenizers."""
    p.add_argument("--config", metavar="FILE",
                   help="JSON file of config fields (or a run's config.json)")
    p.add_argument("--separate-vocabularies", action="store_const", const=True, default=None,
                   help="translation: one vocabulary per language instead of a shared one")
    p.add_argument("--weights", metavar="PATH",
                   help="start from pretrained weights (ViT: Google .npz, timm .safetensors or "
                   ".pth, a Hugging Face folder; Transformer: a Marian / OPUS-MT folder, "
                   "fine-tuned with its own tokenizers); the file sets the architecture and the "
                   "fine-tuning recipe")
    p.add_argument("--tokenizer", choices=choices.TOKENIZERS,
                   help="translation: sentencepiece (cased, reversible; the default for new "
                   "runs) or wordpiece (lower-cased)")
