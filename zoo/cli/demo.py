"""`zoo demo`: the main job, end to end, on the offline numbers task."""

from zoo.cli.arguments import positive_int


def add_demo_parser(commands):
    p = commands.add_parser(
        "demo", help="train transformer-tiny on the offline numbers task, export, translate",
        description=(
            "The main job: generate the German->English number-words task, learn a SentencePiece "
            "vocabulary, train transformer-tiny for a bounded time, report exact match and "
            "BLEU (greedy and beam search) on held-out numbers, export a SavedModel and "
            "translate held-out examples with it."
        ),
        epilog="Example: zoo demo --minutes 4",
    )
    p.add_argument("--minutes", type=float, default=4.0, help="training time budget (default 4)")
    p.add_argument("--train-size", type=positive_int, default=20000,
                   help="training pairs (default 20000)")
    p.add_argument("--test-size", type=positive_int, default=1000,
                   help="held-out pairs (default 1000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="runs/demo", help="run directory, replaced (default runs/demo)")
    p.add_argument("--export-to", default="saved_models/transformer-tiny",
                   help="export root (default saved_models/transformer-tiny)")
