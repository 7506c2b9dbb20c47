"""Runs `zoo explore`: the page of `zoo.explore.page`, built with Gradio (the `web` extra).
Without Gradio the command says in one line what to install."""

from zoo.cli.arguments import UserError

try:
    from zoo.explore import page
except ModuleNotFoundError as error:  # the optional web extra
    if error.name != "gradio":
        raise
    page = None

INSTALL = "pip install 'keras-attention[web]'"


def run_explore(args):
    if page is None:
        raise UserError(f"zoo explore needs Gradio (the web extra), which is not installed: "
                        f"{INSTALL}")
    page.serve(args.path, host=args.host, port=args.port)
