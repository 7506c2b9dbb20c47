"""`zoo explore` without the web extra: one line saying what to install. (The page itself is
tested in a real browser by `make test-web`: tests/web/.)"""

import sys

from zoo_cli import run_main


def test_without_gradio_zoo_explore_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "gradio", None)  # `import gradio` fails
    for name in ("zoo.cli.commands.explore", "zoo.explore.page"):  # imported anew
        monkeypatch.delitem(sys.modules, name, raising=False)
    code, out, err = run_main("explore", tmp_path)
    assert (code, out) == (2, "")
    assert err.splitlines() == ["zoo explore: error: zoo explore needs Gradio (the web extra), "
                                "which is not installed: pip install 'keras-attention[web]'"]
