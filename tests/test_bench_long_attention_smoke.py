"""The long-sequence attention benchmark runs end to end at tiny sizes and prints its tables."""

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_long_attention.py"


def test_bench_long_attention_quick_prints_both_tables():
    environment = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick"],
        capture_output=True, text=True, timeout=300, env=environment, check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "| n | full ms | chunked ms | keras ms | chunked/full (range) |" in result.stdout
    ratio_rows = [line for line in result.stdout.splitlines() if line.startswith("| 64 |")]
    assert len(ratio_rows) == 1
    ratio, spread = ratio_rows[0].split("|")[5].strip().split(" ", 1)
    low, high = (float(x) for x in spread.strip("()").split("–"))
    # --quick runs 2 rounds: the median of the per-round ratios is the mean of the two.
    assert abs(float(ratio) - (low + high) / 2) <= 0.0051, ratio_rows[0]
    memory_rows = [line for line in result.stdout.splitlines()
                   if line.startswith(("| full |", "| keras |", "| chunked |"))]
    assert len(memory_rows) == 3, result.stdout
    for row in memory_rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert cells[-1] == "ok" and cells[1] == "64"
        # The peak resident set (VmHWM) is at least the resident set before the first step.
        assert float(cells[5]) >= float(cells[4]) > 0, row
