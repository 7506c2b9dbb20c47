"""The fused-attention benchmark runs end to end at tiny sizes, under the test run's Keras
backend, and prints its header and table (no timed assertion)."""

import keras


def test_bench_fused_attention_quick_prints_a_table(run_benchmark):
    out = run_benchmark("bench_fused_attention.py", "--quick")
    assert f"on {keras.backend.backend()} " in out
    assert "CPU: " in out and "AVX-512: " in out
    assert "| (B, T = S, D, N) | mask | explicit ms | fused ms | fused/explicit (range) |" in out
    rows = [line for line in out.splitlines() if line.startswith("| (2, 16, 32, 4) |")]
    assert [row.split("|")[2].strip() for row in rows] == ["none", "causal"], out
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        explicit, fused = float(cells[2]), float(cells[3])
        ratio, spread = cells[4].split(" ", 1)
        low, high = (float(x) for x in spread.strip("()").split("–"))
        assert explicit > 0 and fused > 0 and low <= float(ratio) <= high, row
