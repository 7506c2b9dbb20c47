"""The browser tests of `zoo explore` (`make test-web`): Playwright drives Debian's chromium
(never a browser Playwright downloads) against `zoo explore` served in its own process
(`web_server.explore`).

Every test skips, with a one-line reason, where the `web-test` extra or a browser is
missing. Every page refuses and records requests that leave 127.0.0.1: a test fails if the
page tried to reach the network (CDN fonts or scripts, analytics).
"""

import os
import urllib.parse

import pytest

from web_server import chromium

ANSWER_TIMEOUT = 120_000  # ms: an answer on the page


@pytest.fixture(scope="session")
def browser():
    """A headless chromium driven by Playwright, for the session."""
    pytest.importorskip("gradio", reason=(
        "zoo explore serves a Gradio page, and Gradio is in the optional web extra: "
        "make test-web installs it (pip install -e '.[web]')"))
    sync_api = pytest.importorskip("playwright.sync_api",
                                   reason="the page tests drive chromium with Playwright, in the optional "
                                   "web-test extra: make test-web installs it")
    path = chromium()
    if path is None:
        pytest.skip("no browser: make test-web installs Debian's chromium with apt when it runs "
                    "as root (or set ZOO_CHROMIUM to a chromium)")
    with sync_api.sync_playwright() as playwright:
        try:
            launched = playwright.chromium.launch(
                executable_path=path, args=["--no-sandbox"] if os.geteuid() == 0 else [])
        except sync_api.Error as error:
            pytest.skip(f"the browser {path} does not start: {str(error).splitlines()[0]}")
        yield launched
        launched.close()


@pytest.fixture
def open_page(browser):
    """`open_page(url)`: a fresh page at `url`, loaded; at the end, the test fails if any
    page tried to reach anything but 127.0.0.1."""
    opened = []

    def open_(url):
        context = browser.new_context(viewport={"width": 1280, "height": 1000})
        outside = []

        def route(request_route):
            host = urllib.parse.urlsplit(request_route.request.url).hostname
            if host in ("127.0.0.1", "localhost"):
                request_route.continue_()
            else:
                outside.append(request_route.request.url)
                request_route.abort()

        context.route("**/*", route)
        opened.append((context, outside))
        page = context.new_page()
        page.set_default_timeout(ANSWER_TIMEOUT)
        page.goto(url)
        page.wait_for_selector("#message", state="attached")
        return page

    yield open_
    tried = []
    for context, outside in opened:
        context.close()
        tried += outside
    assert tried == [], f"the page tried to reach the network: {tried}"
