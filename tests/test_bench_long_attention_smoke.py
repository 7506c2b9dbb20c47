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
    assert len(ratio_rows) == 1 and float(ratio_rows[0].split("|")[5].split()[0]) > 0
    memory_rows = [line for line in result.stdout.splitlines()
                   if line.startswith(("| full |", "| keras |", "| chunked |"))]
    assert len(memory_rows) == 3, result.stdout
    for row in memory_rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert cells[-1] == "ok" and float(cells[5]) > 0  # peak RSS MiB
