"""`zoo explore` refuses what it cannot show in one line, and serves an export's answers,
saying that it keeps no attention outputs."""

import json

import pytest

from web_server import explore
from zoo_cli import run_main

SENTENCE = "dreihundertvierundzwanzig"


def test_a_path_that_is_neither_a_run_nor_an_export_is_refused_in_one_line(tmp_path):
    pytest.importorskip("gradio", reason=(
        "zoo explore serves a Gradio page, and Gradio is in the optional web extra: "
        "make test-web installs it (pip install -e '.[web]')"))
    (tmp_path / "notes.txt").write_text("not a model\n")
    code, out, err = run_main("explore", tmp_path)
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith("zoo explore: error: ") and "neither a run directory" in line


def test_a_model_without_attention_weights_is_refused_in_one_line(tmp_path):
    pytest.importorskip("gradio", reason=(
        "zoo explore serves a Gradio page, and Gradio is in the optional web extra: "
        "make test-web installs it (pip install -e '.[web]')"))
    sizes = dict(attention="linear", num_encoder_layers=1, num_decoder_layers=1, d_model=16,
                 num_heads=2, intermediate_dim=32, vocabulary_size=60, max_length=12)
    settings = [argument for key, value in sizes.items() for argument in ("--set", f"{key}={value}")]
    code, _, err = run_main("train", "transformer-tiny", "--data", "numbers", "--out",
                            tmp_path / "run", "--epochs", 1, "--train-size", 64, "--test-size", 4,
                            *settings)
    assert code == 0, err[-3000:]
    code, out, err = run_main("explore", tmp_path / "run")
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert "gives no attention weights to show" in line and "linear" in line
    assert "\x1b" not in line


def test_an_export_shows_zoo_predicts_translation_and_says_it_has_no_attention(
        open_page, numbers_export, tmp_path):  # no browser: skipped before training
    with explore(numbers_export.saved_models, tmp_path / "explore.log") as url:
        page = open_page(url)
        page.fill("#source textarea", SENTENCE)
        page.click("#translate")
        page.wait_for_function("document.querySelector('#translation textarea').value !== ''")
        shown = page.input_value("#translation textarea")
    code, out, err = run_main("predict", numbers_export.saved_models, SENTENCE, "--beam-size",
                              "1", "--json")
    assert code == 0, err
    assert shown == json.loads(out)[0]["translation"]
    assert "keeps no attention outputs" in page.inner_text("#no-attention")
    assert page.locator("#heatmap .attention-map").count() == 0
