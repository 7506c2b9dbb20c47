"""`zoo explore` of a translation run in a real browser: the translation is `zoo predict`'s,
the heat map's axes are the sentence's tokens, another head or map changes the picture, a
bad input shows a message and the page keeps working."""

import json

import pytest
import tensorflow as tf

from zoo.runs import rundir

from web_server import explore
from zoo_cli import run_main

SENTENCE = "dreihundertvierundzwanzig"
MAP = "#heatmap .attention-map svg"  # the heat map (Gradio draws its own icons as SVG too)


@pytest.fixture(scope="module")
def page_url(browser, numbers_run, tmp_path_factory):  # no browser: skipped before training
    """`zoo explore` of the session's `numbers_run` (transformer-tiny), served for the module."""
    log = tmp_path_factory.mktemp("explore_translation") / "explore.log"
    with explore(numbers_run.run_dir, log) as url:
        yield url


def _predicted(run_dir, sentence, *options):
    """`zoo predict RUN SENTENCE OPTIONS --json`'s translation."""
    code, out, err = run_main("predict", run_dir, sentence, *options, "--json")
    assert code == 0, err
    return json.loads(out)[0]["translation"]


def _source_tokens(run_dir, sentence):
    """The pieces the model reads: the run's tokenizer's, then `[END]`."""
    source, _ = rundir.load_tokenizers(run_dir)
    pieces = source.lookup(source.tokenize(tf.constant([sentence]))).to_list()[0]
    return [piece.decode("utf-8") for piece in pieces] + ["[END]"]


def _translate(page, sentence, decoding="greedy"):
    """Types `sentence`, picks `decoding`, submits; waits for the translation (a fresh page)."""
    page.fill("#source textarea", sentence)
    page.locator("#decoding").get_by_label(decoding, exact=True).check()
    page.click("#translate")
    page.wait_for_function("document.querySelector('#translation textarea').value !== ''")
    return page.input_value("#translation textarea")


def _ticks(page, axis):
    """The heat map's tick labels along `axis` ("x" or "y"; matplotlib's SVG ids: `axes_1`
    is the map, `axes_2` its colour bar)."""
    return page.locator(f'{MAP} g#axes_1 g[id^="{axis}tick_"] text').all_text_contents()


def _picture(page):
    """The heat map's SVG (not the whole block: its status overlay changes meanwhile)."""
    return page.eval_on_selector(MAP, "svg => svg.outerHTML")


def _choose(page, selector, option):
    """Picks `option` in the Gradio dropdown `selector`; waits until the heat map changes."""
    before = _picture(page)
    page.click(f"{selector} input")
    page.get_by_role("option", name=option, exact=True).click()
    page.wait_for_function("([map, before]) => (document.querySelector(map) || {}).outerHTML "
                           "!== before", arg=[MAP, before])


def test_the_translation_is_zoo_predicts_and_the_heat_map_is_labelled_with_tokens(
        page_url, open_page, numbers_run):
    page = open_page(page_url)
    shown = _translate(page, SENTENCE)
    assert shown == _predicted(numbers_run.run_dir, SENTENCE, "--beam-size", "1")
    page.wait_for_selector(MAP)
    tokens = _source_tokens(numbers_run.run_dir, SENTENCE)
    assert _ticks(page, "x") == tokens  # cross-attention: the source tokens across
    rows = _ticks(page, "y")  # the target tokens down, one per generated token
    assert 1 <= len(rows) <= numbers_run.overrides["max_length"]
    assert "decoder_block_0/cross_attention" in page.inner_text("#heatmap")

    _choose(page, "#map", "encoder_block_0/self_attention")
    assert _ticks(page, "x") == tokens and _ticks(page, "y") == tokens


def test_another_head_changes_the_picture(page_url, open_page):
    page = open_page(page_url)
    _translate(page, SENTENCE)
    page.wait_for_selector(MAP)
    mean = _picture(page)
    assert "mean of 2 heads" in page.inner_text("#heatmap")
    _choose(page, "#head", "head 1")
    assert "head 1" in page.inner_text("#heatmap")
    head_1 = _picture(page)
    _choose(page, "#head", "head 0")
    assert len({mean, head_1, _picture(page)}) == 3


def test_beam_search_and_sampling_are_zoo_predicts(page_url, open_page, numbers_run):
    page = open_page(page_url)
    assert _translate(page, SENTENCE, "beam") == _predicted(
        numbers_run.run_dir, SENTENCE, "--beam-size", "4")
    page = open_page(page_url)
    page.get_by_text("Sampling settings").click()
    page.get_by_label("Seed").fill("7")
    page.get_by_label("Temperature").fill("1.5")
    page.get_by_label("Top-k (0: off)").fill("5")
    shown = _translate(page, SENTENCE, "sampling")
    assert shown == _predicted(numbers_run.run_dir, SENTENCE, "--sample", "--seed", "7",
                               "--temperature", "1.5", "--top-k", "5")
    assert "seed 7" in page.inner_text("#message")


def test_bad_input_shows_a_message_and_the_page_keeps_working(page_url, open_page, numbers_run):
    page = open_page(page_url)
    page.fill("#source textarea", "   ")
    page.click("#translate")
    page.wait_for_function("document.querySelector('#message').innerText.includes('Error')")
    assert "type a sentence" in page.inner_text("#message")

    page.fill("#source textarea", "x" * 10_000)
    page.click("#translate")
    page.wait_for_function("document.querySelector('#message').innerText.includes('10,000')")
    assert "at most 1,000" in page.inner_text("#message")
    assert page.input_value("#translation textarea") == ""

    assert _translate(page, SENTENCE) == _predicted(numbers_run.run_dir, SENTENCE,
                                                    "--beam-size", "1")
    assert "Error" not in page.inner_text("#message")
