"""`zoo explore`'s parser: a local web page for a run directory or an exported SavedModel
(run by `zoo.cli.commands.explore`)."""

from zoo.cli.arguments import positive_int


def add_explore_parser(commands):
    p = commands.add_parser(
        "explore", help="a local web page: translate or classify, and see the attention",
        description=(
            "Serves a page (Gradio, the web extra) for a run directory or an exported "
            "SavedModel. Translation runs: type a sentence, decode it greedily, by beam search "
            "or by sampling (the translation zoo predict gives), and see the cross-attention, "
            "the self-attention or the alignments as heat maps, per layer and head. ViT runs: "
            "upload or pick an image, see the top classes, the attention rollout and each "
            "head's attention. Every run: its training curves and config. An export shows its "
            "answers only (no attention outputs). Binds 127.0.0.1 unless --host says "
            "otherwise; needs no network."
        ),
        epilog="Example: zoo explore runs/demo --port 7860",
    )
    p.add_argument("path", metavar="RUN_DIR|SAVED_MODEL")
    p.add_argument("--port", type=positive_int, default=7860, help="default 7860")
    p.add_argument("--host", default="127.0.0.1",
                   help="the address to bind (default 127.0.0.1: this machine only)")
