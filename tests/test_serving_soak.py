"""The serving soak (`bench_serving.py --soak`): 20 seconds against a tiny export, and its
verdicts on made-up samples."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def serving_soak(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import serving_soak

    return serving_soak


@pytest.mark.large
def test_twenty_second_soak_answers_everything_and_measures_growth(tmp_path, run_benchmark,
                                                                  serving_soak):
    out = run_benchmark("bench_serving.py", "--quick", "--soak", 1 / 3, "--interval", 2,
                        "--json", tmp_path / "soak.json")
    report = json.loads((tmp_path / "soak.json").read_text())
    verdict = report["verdicts"]
    assert verdict["errors"] == 0 and verdict["no_error"], report["problems"]
    sampled = sum(row["requests"] for row in report["samples"])
    assert sampled > 16 and 0 <= verdict["requests"] - sampled <= 16  # 16 in flight at the end
    assert len(report["samples"]) == 10  # 20 s, a sample every 2 s
    assert math.isfinite(verdict["rss_growth"]) and verdict["rss_base_mib"] > 100
    assert math.isfinite(verdict["p99_ratio"]) and verdict["p99_ratio"] > 0
    for row in report["samples"]:
        assert 0 < row["p50_ms"] <= row["p99_ms"] and row["load_1"] >= 0
    assert "RSS growth after minute" in out and "| minute | RSS MiB |" in out
    picture = serving_soak.plot([tmp_path / "soak.json"], tmp_path / "soak.png")
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_failed_and_wrong_answers_are_errors(serving_soak):
    def serve(text):
        word = text.numpy()[0].decode("utf-8", "replace")
        if word == "boom":
            raise tf.errors.InvalidArgumentError(None, None, "bad request")
        return {"tokens": tf.constant([[len(word), 3]]), "translation": text}

    texts = ["one", "boom", "three"]
    expected = [serving_soak.answer(serve, "one"), (None, None), (np.array([[9, 9]]), None)]
    options = serving_soak.SoakOptions(minutes=0.01, threads=3)
    clients = serving_soak.Clients(serve, texts, expected, options)
    clients.run(0.3)
    clients.join()
    failed = {index for index, _ in clients.problems}
    assert failed == {1, 2}
    assert any("InvalidArgumentError" in problem for _, problem in clients.problems)
    errors = sum(failed for _, _, failed in clients.records)
    assert 0 < errors == len(clients.problems) < len(clients.records)


def test_verdicts_on_made_up_samples(serving_soak):
    # 30 minutes, one sample per minute: RSS 1000 MiB at minute 5, then growing to 1080 (8%).
    samples = [dict(minute=m, rss_mib=1000.0 + max(0, m - 5) * 3.2, load_1=2.0)
               for m in range(1, 31)]
    # latencies: 100 ms in minutes 5-10, 150 ms in the last 5 minutes
    records = [(60 * m + 1, 0.150 if m >= 25 else 0.100, False) for m in range(30) for _ in range(5)]
    verdict = serving_soak.verdicts(dict(samples=samples, records=records), 30)
    assert verdict["windows_minutes"] == dict(settle=5, reference=(5, 10), last=(25, 30))
    assert verdict["rss_growth"] == pytest.approx(0.08) and not verdict["rss_growth_ok"]
    assert verdict["p99_ratio"] == pytest.approx(1.5) and not verdict["p99_ok"]
    assert verdict["no_error"] and verdict["requests"] == 150
    records[0] = (1, 0.1, True)
    flat = [dict(row, rss_mib=1000.0) for row in samples]
    verdict = serving_soak.verdicts(dict(samples=flat, records=records), 30)
    assert verdict["errors"] == 1 and not verdict["no_error"] and verdict["rss_growth_ok"]
    # a 20-second soak scales the windows: settle at 1/18 minute (3.3 s)
    settle, reference, last = serving_soak.windows(1 / 3)
    assert settle == pytest.approx(1 / 18) and reference[1] == pytest.approx(1 / 9)
    assert last == (pytest.approx(1 / 3 - 1 / 18), 1 / 3)


def test_the_pool_mixes_1_to_200_words_and_the_odd_texts(serving_soak):
    options = serving_soak.SoakOptions(minutes=1, pool=64)
    texts = serving_soak.soak_texts(["uno", "dos", "tres"], options)
    lengths = [len(text.split()) for text in texts[:64]]
    assert min(lengths) == 1 and max(lengths) == 200 and len(set(lengths)) > 30
    assert texts[64:] == list(serving_soak.ODD_TEXTS)
    assert any(isinstance(text, bytes) for text in texts) and max(map(len, texts)) == 100_000
