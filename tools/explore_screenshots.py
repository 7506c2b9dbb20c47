"""The screenshots of `zoo explore` in docs/images/, taken with Playwright and Debian's chromium.

    python tools/explore_screenshots.py TRANSLATION_RUN IMAGE_RUN [--out docs/images]

Serves each run with `zoo explore` in its own process and saves, 1280 pixels wide:
`explore_translation.png` (a test sentence translated, the last layer's cross-attention,
one head), `explore_run.png` (the Run tab: training curves and config) and
`explore_vit.png` (a test image picked: top classes, rollout, the heads of the first
layer). The docs' runs: `zoo demo` (transformer-tiny on numbers) and vit-tiny trained on
scikit-learn's digits (`zoo train vit-tiny --data digits --epochs 8 --out runs/digits`).
Needs the web-test extra (make test-web installs it) and a chromium (ZOO_CHROMIUM or PATH).
"""

import argparse
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parent.parent
SENTENCE = "dreihundertvierundzwanzigtausendfünfhundertelf"


def _serve(run_dir, log):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "zoo", "explore", str(run_dir), "--port", str(port)], cwd=ROOT,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    for _ in range(600):
        if process.poll() is not None:
            sys.exit(f"zoo explore {run_dir} exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=5):
                return process, url
        except OSError:
            time.sleep(1)
    process.kill()
    sys.exit(f"zoo explore {run_dir} did not serve {url}")


def _translation(page, out):
    page.fill("#source textarea", SENTENCE)
    page.click("#translate")
    page.wait_for_selector("#heatmap .attention-map svg")
    page.click("#head input")
    page.get_by_role("option", name="head 1", exact=True).click()
    page.wait_for_function("document.querySelector('#heatmap').innerText.includes('head 1')")
    page.wait_for_timeout(1000)
    page.screenshot(path=out / "explore_translation.png", full_page=True)
    page.get_by_role("tab", name="Run").click()
    page.wait_for_selector("#curves img")
    page.wait_for_timeout(1000)
    page.screenshot(path=out / "explore_run.png", full_page=True)


def _image(page, out):
    page.click("#test-images button[aria-label^='Thumbnail 3 ']")
    page.wait_for_selector("#heads img")
    page.wait_for_timeout(1000)
    page.screenshot(path=out / "explore_vit.png", full_page=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("translation_run", type=pathlib.Path)
    parser.add_argument("image_run", type=pathlib.Path)
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "docs" / "images")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    chromium = os.environ.get("ZOO_CHROMIUM") or shutil.which("chromium")
    with sync_playwright() as playwright, open(args.out / ".explore.log", "wb") as log:
        browser = playwright.chromium.launch(
            executable_path=chromium, args=["--no-sandbox"] if os.geteuid() == 0 else [])
        for run_dir, shoot in ((args.translation_run, _translation), (args.image_run, _image)):
            process, url = _serve(run_dir, log)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.set_default_timeout(180_000)
                page.goto(url)
                page.wait_for_selector("#message", state="attached")
                shoot(page, args.out)
            finally:
                process.terminate()
                process.wait(timeout=60)
        browser.close()
    (args.out / ".explore.log").unlink()


if __name__ == "__main__":
    main()
