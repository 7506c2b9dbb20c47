"""The answer time of `zoo explore`'s page (issue #64): a translation with its attention.

Serves `zoo explore RUN_DIR` in its own process, as a user starts it, and asks the page's
*Translate* event (`/translate`, what the button calls) through `gradio_client`, over HTTP
on 127.0.0.1: each answer is the whole round trip of the page, Gradio's queue, the decoding
(`zoo predict`'s code), `zoo.attention_weights` and the heat map's SVG. The sentences are
the run's test sources, each asked once per round after one warm-up answer per decoding
(the page has loaded: its model traced). Reported per decoding: the median, 90th percentile
and largest answer time, and the largest after the first round (a source length seen before:
the decoding loop is traced once per source length). The target (#64): under 1 s for transformer-small on this CPU.

Needs the web extra (gradio, which brings gradio_client) and a trained translation run,
e.g. transformer-small on the numbers task (2.5 minutes on the 2-core VM):

    zoo train transformer-small --data numbers --train-size 8000 --test-size 200 --epochs 4 \\
        --tokenizer sentencepiece --set vocabulary_size=1000 --out runs/small-numbers
    python benchmarks/explore_answer.py runs/small-numbers --rounds 3 --sentences 20

Not a `bench_*.py`: `make bench` does not install the web extra, and this needs a run.
"""

import argparse
import json
import os
import pathlib
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from zoo.datasets.preparation import load_run_data  # noqa: E402 - after the path
from zoo.runs import rundir  # noqa: E402

DECODINGS = {"greedy": ("greedy", 4), "beam 4": ("beam", 4)}


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _serve(run_dir, log):
    """`zoo explore RUN_DIR` in its own process; (process, url) once the page answers."""
    port = _free_port()
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "GRADIO_ANALYTICS_ENABLED": "False"}
    process = subprocess.Popen([sys.executable, "-m", "zoo", "explore", str(run_dir),
                                "--port", str(port)], cwd=ROOT, env=env, stdout=log,
                               stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(url, timeout=5):
                return process, url
        except OSError:
            time.sleep(1)
    process.kill()
    sys.exit(f"zoo explore did not serve {url}; its output is in {log.name}")


def _test_sentences(run_dir, count):
    """The run's first `count` test sources (the split it was trained with)."""
    _, data = load_run_data(rundir.read_config(run_dir), quiet=True)
    return [source for source, _ in data.test_pairs[:count]]


def _ask(client, sentence, decoding, beam_size):
    """One answer of the page, in seconds."""
    started = time.perf_counter()
    message, translation, _, _, heatmap, _ = client.predict(
        sentence, decoding, beam_size, 1.0, 0, 1.0, 0, api_name="/translate")
    seconds = time.perf_counter() - started
    if not translation or "attention-map" not in (heatmap or ""):
        sys.exit(f"no translation or heat map for {sentence!r}: {message}")
    return seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=pathlib.Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sentences", type=int, default=20)
    parser.add_argument("--json", type=pathlib.Path, help="also write the figures there")
    args = parser.parse_args()
    from gradio_client import Client

    sentences = _test_sentences(args.run_dir, args.sentences)
    with tempfile.NamedTemporaryFile("w+b", suffix=".log", delete=False) as log:
        process, url = _serve(args.run_dir, log)
    try:
        client = Client(url, verbose=False)
        results = {}
        for label, (decoding, beam_size) in DECODINGS.items():
            _ask(client, sentences[0], decoding, beam_size)  # warm-up: traces the decoding
            rounds = [[_ask(client, s, decoding, beam_size) for s in sentences]
                      for _ in range(args.rounds)]
            times = [seconds for answers in rounds for seconds in answers]
            later = [seconds for answers in rounds[1:] for seconds in answers] or times
            results[label] = dict(median=statistics.median(times),
                                  p90=statistics.quantiles(times, n=10)[-1], max=max(times),
                                  max_after_round_1=max(later), answers=len(times))
    finally:
        process.terminate()
        process.wait(timeout=60)
    print(f"zoo explore {args.run_dir}: {len(sentences)} test sentences x {args.rounds} rounds")
    # The first answer for a new source length traces the decoding loop for that shape: the
    # largest times are in round 1; "max later" is the largest once every sentence was seen.
    print(f"{'decoding':<10}{'median s':>10}{'p90 s':>10}{'max s':>10}{'max later s':>13}")
    for label, figures in results.items():
        print(f"{label:<10}{figures['median']:>10.3f}{figures['p90']:>10.3f}"
              f"{figures['max']:>10.3f}{figures['max_after_round_1']:>13.3f}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
