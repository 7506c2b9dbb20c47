"""`zoo explore` without the web extra: one line saying what to install. (The page itself is
tested in a real browser by `make test-web`: tests/web/.)"""

import importlib.util

from zoo_cli import run_main


def test_without_gradio_zoo_explore_says_what_to_install(monkeypatch, tmp_path):
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args, **kwargs: (
        None if name == "gradio" else find_spec(name, *args, **kwargs)))
    code, out, err = run_main("explore", tmp_path)
    assert (code, out) == (2, "")
    assert err.splitlines() == ["zoo explore: error: zoo explore needs Gradio (the web extra), "
                                "which is not installed: pip install 'keras-attention[web]'"]
