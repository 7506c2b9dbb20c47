"""`zoo evaluate`, `zoo compare` and `zoo predict`: score a run on its test split, test whether
one run beats another, answer new inputs."""

import argparse

from zoo.cli import choices
from zoo.cli.arguments import positive_int


def add_evaluate_parser(commands):
    p = commands.add_parser(
        "evaluate", help="score a trained run on its held-out test split",
        description=(
            "Translation: exact match and BLEU of greedy and beam-search decoding on the "
            "test split. Images: accuracy on the test split. Writes RUN_DIR/metrics.json."
        ),
        epilog="Example: zoo evaluate runs/numbers --beam-size 4",
    )
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--checkpoint", choices=choices.CHECKPOINTS, default="best")
    p.add_argument("--beam-size", type=positive_int, default=4,
                   help="beam width for the beam-search scores; 1 skips them (default 4)")
    p.add_argument("--alpha", type=float, help="beam length penalty (default 0.6; 1.0, Hugging "
                   "Face's, for a model fine-tuned from a Marian folder)")
    p.add_argument("--limit", type=positive_int, help="score only the first N test examples")
    p.add_argument("--batch-size", type=positive_int, default=128)
    p.add_argument("--confidence", nargs="?", type=positive_int, const=1000, metavar="N",
                   help="translation: 95%% bootstrap intervals of BLEU and chrF from N "
                   "resamples of the test set (default N 1000)")
    p.add_argument("--json", action="store_true", help="print the metrics as JSON only")


def add_compare_parser(commands):
    p = commands.add_parser(
        "compare", help="is run B better than run A? (paired bootstrap on the same test pairs)",
        description=(
            "Decodes the test pairs held out from both translation runs with each run, and "
            "compares BLEU and chrF by paired bootstrap resampling (sacrebleu's): B is better "
            "when its score is higher and p < 0.05."
        ),
        epilog="Example: zoo compare runs/baseline runs/new-recipe --beam-size 4",
    )
    p.add_argument("run_a", metavar="RUN_A")
    p.add_argument("run_b", metavar="RUN_B")
    p.add_argument("--checkpoint", choices=choices.CHECKPOINTS, default="best")
    p.add_argument("--beam-size", type=positive_int, default=4,
                   help="decoding of both runs: 1 for greedy (default beam search of 4)")
    p.add_argument("--alpha", type=float, help="beam length penalty (default 0.6)")
    p.add_argument("--limit", type=positive_int, help="use only the first N test pairs")
    p.add_argument("--batch-size", type=positive_int, default=128)
    p.add_argument("--samples", type=positive_int, default=1000,
                   help="bootstrap resamples (default 1000)")
    p.add_argument("--json", action="store_true", help="print the result as JSON only")


def add_predict_parser(commands):
    p = commands.add_parser(
        "predict", help="translate sentences or classify images with a run or SavedModel",
        description=(
            "PATH is a run directory (decoding in this process) or an exported SavedModel "
            "(a version folder, or an export root: its newest version), a ViT's LiteRT, "
            "ONNX or OpenVINO export or a Transformer's CTranslate2 export (zoo export "
            "--format; its runtime from the deploy extra). "
            "INPUTs are sentences for translation models, image files for image models."
        ),
        epilog=(
            "Examples:\n"
            "  zoo predict runs/numbers 'dreihundertvierundzwanzig' 'elf'\n"
            "  zoo predict saved_models/vit-tiny shirt.png\n"
            "  zoo predict runs/numbers 'elf' --sample --temperature 0.8 --top-p 0.9 --seed 1"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("path", metavar="RUN_DIR|SAVED_MODEL")
    p.add_argument("inputs", metavar="INPUT", nargs="+")
    p.add_argument("--beam-size", type=positive_int,
                   help="1 for greedy decoding (default: beam search of 4)")
    p.add_argument("--alpha", type=float, help="beam length penalty (default 0.6; 1.0, Hugging "
                   "Face's, for a model fine-tuned from a Marian folder)")
    p.add_argument("--top-k", type=positive_int, help=f"images: classes shown (default "
                   f"{choices.IMAGE_CLASSES}); with --sample: sample among the K most likely tokens")
    group = p.add_argument_group("sampling (translation; zoo.decode.sample)")
    group.add_argument("--sample", action="store_true",
                       help="sample each token instead of searching (SavedModels: the sample "
                       "signature)")
    group.add_argument("--temperature", type=float, help="T > 0 (default 1; toward 0: greedy)")
    group.add_argument("--top-p", type=float, help="sample within the nucleus of mass P, in (0, 1]")
    group.add_argument("--seed", type=int, help="the same seed gives the same output (default: "
                       "a random one, printed)")
    p.add_argument("--checkpoint", choices=choices.CHECKPOINTS, default="best")
    p.add_argument("--json", action="store_true", help="print JSON")
