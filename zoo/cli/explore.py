"""`zoo explore`: a local web page for a run directory or an exported SavedModel."""

import importlib.util

from zoo.cli.arguments import UserError, positive_int

INSTALL = "pip install 'keras-attention[web]'"


def _cmd_explore(args):
    if importlib.util.find_spec("gradio") is None:
        raise UserError(f"zoo explore needs Gradio (the web extra), which is not installed: "
                        f"{INSTALL}")
    # Gradio and TensorFlow load on this command's path only.
    from zoo.explore import page  # noqa: PLC0415

    page.serve(args.path, host=args.host, port=args.port)


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
    p.set_defaults(func=_cmd_explore)
