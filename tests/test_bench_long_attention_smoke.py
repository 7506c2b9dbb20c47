"""The long-sequence attention benchmark runs end to end at tiny sizes and prints its tables."""

import pytest


@pytest.mark.large
def test_bench_long_attention_quick_prints_both_tables(run_benchmark):
    out = run_benchmark("bench_long_attention.py", "--quick")
    assert "| n | full ms | chunked ms | keras ms | chunked/full (range) |" in out
    ratio_rows = [line for line in out.splitlines() if line.startswith("| 64 |")]
    assert len(ratio_rows) == 1
    ratio, spread = ratio_rows[0].split("|")[5].strip().split(" ", 1)
    low, high = (float(x) for x in spread.strip("()").split("–"))
    # --quick runs 2 rounds: the median of the per-round ratios is the mean of the two.
    assert abs(float(ratio) - (low + high) / 2) <= 0.0051, ratio_rows[0]
    # --quick measures the memory of the chunked path only, in one fresh process.
    memory_rows = [line for line in out.splitlines()
                   if line.startswith(("| full |", "| keras |", "| chunked |"))]
    assert len(memory_rows) == 1 and memory_rows[0].startswith("| chunked |"), out
    cells = [cell.strip() for cell in memory_rows[0].strip("|").split("|")]
    assert cells[-1] == "ok" and cells[1] == "64"
    # The peak resident set (VmHWM) is at least the resident set before the first step.
    assert float(cells[5]) >= float(cells[4]) > 0, memory_rows[0]
