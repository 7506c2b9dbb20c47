"""The concurrency benchmark runs end to end at tiny sizes, and counts failures."""

import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.mark.large
def test_bench_serving_quick_serves_every_request(tmp_path, run_benchmark):
    out = run_benchmark("bench_serving.py", "--quick", "--json", tmp_path / "rows.json")
    assert "| export | threads | requests/s | sentences/s | p50 ms | p99 ms | failed |" in out
    rows = json.loads((tmp_path / "rows.json").read_text())["rows"]
    assert [(row["export"], row["threads"]) for row in rows] == [
        ("SavedModel", 1), ("SavedModel", 4), ("SavedModel XLA", 1), ("SavedModel XLA", 4),
    ]
    for row in rows:
        assert row["failed"] == 0 and row["requests"] == 8 and row["batch"] == 2
        assert np.isclose(row["requests_per_second"] * row["seconds"], 8)
        assert np.isclose(row["sentences_per_second"], 2 * row["requests_per_second"])
        assert 0 < row["p50_ms"] <= row["p99_ms"]
        if row["threads"] == 1:  # one after the other: half the requests take >= p50 each
            assert 4 * row["p50_ms"] <= 1e3 * row["seconds"], row


def test_failed_and_wrong_answers_are_counted(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import bench_serving

    def serve(text):
        words = [s.decode() for s in text.numpy()]
        if "boom" in words:
            raise tf.errors.InvalidArgumentError(None, None, "bad request")
        tokens = [[len(w), 3] for w in words]
        if "wrong" in words:
            tokens = [[0, 0] for _ in words]
        return {"tokens": tf.constant(tokens), "translation": tf.constant(words)}

    requests = [["one"], ["boom"], ["two", "wrong"], ["three"]]
    expected = [([[3, 3]], [b"one"]), None, ([[3, 3], [5, 3]], [b"two", b"wrong"]),
                ([[5, 3]], [b"three"])]
    expected = [(np.array(e[0]), np.array(e[1], dtype=object)) if e else (None, None)
                for e in expected]
    _, latencies, failures = bench_serving.run_clients(serve, requests, 3, expected)
    assert len(latencies) == 4
    assert sorted(index for index, _ in failures) == [1, 2]
    assert "InvalidArgumentError" in dict(failures)[1]
