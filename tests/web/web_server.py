"""`zoo explore` served in its own process for the browser tests, and the browser to use."""

import contextlib
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SERVE_TIMEOUT = 300  # s: TensorFlow, Gradio and the model load on 2 busy cores


def chromium():
    """The browser: $ZOO_CHROMIUM, else Debian's chromium on PATH; None if there is none."""
    given = os.environ.get("ZOO_CHROMIUM")
    if given:
        return given if os.access(given, os.X_OK) else None
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_until_served(process, url, log):
    deadline = time.monotonic() + SERVE_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"zoo explore exited with {process.returncode}:\n"
                        f"{log.read_text(errors='replace')[-3000:]}", pytrace=False)
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(1)
    pytest.fail(f"zoo explore did not serve {url} in {SERVE_TIMEOUT} s:\n"
                f"{log.read_text(errors='replace')[-3000:]}", pytrace=False)


@contextlib.contextmanager
def explore(path, log):
    """`zoo explore PATH --port P` in its own process (output appended to `log`) until the
    block ends: yields the page's URL once it answers."""
    pytest.importorskip("gradio", reason=(
        "zoo explore serves a Gradio page, and Gradio is in the optional web extra: "
        "make test-web installs it (pip install -e '.[web]')"))
    port = _free_port()
    with open(log, "ab") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "zoo", "explore", str(path), "--port", str(port)],
            cwd=ROOT, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}, stdout=output,
            stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/"
    try:
        _wait_until_served(process, url, pathlib.Path(log))
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)
