"""The decoding benchmark runs end to end at tiny sizes and prints its table."""

import pytest


@pytest.mark.large
def test_bench_decode_quick_prints_a_table(run_benchmark):
    out = run_benchmark("bench_decode.py", "--quick")
    assert "| batch | variant | tokens/s |" in out
    rows = [line for line in out.splitlines() if line.startswith("| 4 |")]  # --quick: batch 4
    variants = ["uncached, tf.function", "cached, tf.function", "cached, XLA",
                "beam 4, cached, tf.function"]
    assert len(rows) == len(variants), out
    # The script checks that every variant generated the full 8 tokens per row.
    assert "Target cached >= 4x uncached (tf.function) at 8 tokens, cached, XLA" in out
    baseline = {}
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert cells[1] in variants
        batch, rate = int(cells[0]), float(cells[2].replace(",", ""))  # tokens/s, rounded
        milliseconds = float(cells[3].split()[0])  # rounded to 0.1
        # tokens/s = batch · 8 tokens / seconds per call, up to the rounding of both.
        slowest, fastest = (batch * 8e3 / max(milliseconds + d, 1e-6) for d in (0.05, -0.05))
        assert slowest - 0.5 <= rate <= fastest + 0.5, row
        # One round (--quick): the speed-up is the ratio of tokens/s to the first variant's.
        baseline.setdefault(batch, rate)
        low, high = (rate - 0.5) / (baseline[batch] + 0.5), (rate + 0.5) / (baseline[batch] - 0.5)
        assert low - 0.005 <= float(cells[4]) <= high + 0.005, row
