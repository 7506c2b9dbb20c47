"""`zoo explore` of a ViT run in a real browser: an uploaded Fashion-MNIST image (the session's
tiny IDX files) or a picked test image gets `zoo predict`'s top class, the rollout and the
heads' maps; a file that is not an image, or a huge one, shows a message and the page keeps
working."""

import json

import numpy as np
import pytest
from PIL import Image

from web_server import explore
from zoo_cli import run_main

CLASSES = "#classes [data-testid=label-output-value]"  # Gradio's Label: the top class


@pytest.fixture(scope="module")
def page_url(browser, fashion_run, tmp_path_factory):  # no browser: skipped before training
    """`zoo explore` of the session's `fashion_run` (vit-tiny), served for the module."""
    log = tmp_path_factory.mktemp("explore_vit") / "explore.log"
    with explore(fashion_run.run_dir, log) as url:
        yield url


@pytest.fixture(scope="module")
def test_images(fashion_run, tmp_path_factory):
    """The run's first test images (t10k) as PNG files."""
    folder = tmp_path_factory.mktemp("fashion_png")
    paths = []
    for index, image in enumerate(fashion_run.arrays["t10k-images-idx3-ubyte"][:3]):
        paths.append(folder / f"test_{index}.png")
        Image.fromarray(image).save(paths[-1])
    return paths


def _predicted(run_dir, path):
    """`zoo predict RUN IMAGE --top-k 5 --json`'s classes, most likely first."""
    code, out, err = run_main("predict", run_dir, path, "--top-k", "5", "--json")
    assert code == 0, err
    return [name for name, _ in json.loads(out)[0]["classes"]]


def _upload(page, path):
    """Uploads `path`; waits for the top class or a message (a fresh page)."""
    page.set_input_files("#upload input[type=file]", str(path))
    page.wait_for_function(
        "sel => document.querySelector(sel) || "
        "document.querySelector('#message').innerText.includes('Error')", arg=CLASSES)


def test_an_uploaded_image_gets_zoo_predicts_top_class_and_the_attention(
        page_url, open_page, fashion_run, test_images):
    page = open_page(page_url)
    _upload(page, test_images[1])
    expected = _predicted(fashion_run.run_dir, test_images[1])
    assert page.inner_text(CLASSES) == expected[0]
    listed = page.locator("#classes").inner_text()
    assert all(name in listed for name in expected)  # the top 5
    page.wait_for_selector("#rollout img")
    page.wait_for_selector("#heads img")
    assert page.input_value("#layer input") == "layer 0"


def test_a_picked_test_image_gets_zoo_predicts_top_class(
        page_url, open_page, fashion_run, test_images):
    page = open_page(page_url)
    page.click("#test-images button[aria-label^='Thumbnail 1 ']")  # the first test image
    page.wait_for_selector(CLASSES)
    assert page.inner_text(CLASSES) == _predicted(fashion_run.run_dir, test_images[0])[0]


def test_bad_images_show_a_message_and_the_page_keeps_working(
        page_url, open_page, fashion_run, test_images, tmp_path):
    page = open_page(page_url)
    text = tmp_path / "notes.png"
    text.write_text("not an image\n")
    _upload(page, text)
    assert "not an image" in page.inner_text("#message")

    huge = tmp_path / "huge.png"
    Image.fromarray(np.zeros((6000, 6000), np.uint8)).save(huge)  # 36 million pixels
    _upload(page, huge)
    page.wait_for_function("document.querySelector('#message').innerText.includes('pixels')")
    assert "6000 × 6000" in page.inner_text("#message")

    _upload(page, test_images[2])
    assert page.inner_text(CLASSES) == _predicted(fashion_run.run_dir, test_images[2])[0]
    assert "Error" not in page.inner_text("#message")
