"""The attention benchmark runs end to end at tiny sizes and prints its table."""

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_attention.py"


def test_bench_attention_quick_prints_a_table():
    environment = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick"],
        capture_output=True,
        text=True,
        timeout=120,
        env=environment,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert "| attention | compile | layer | ms (median) |" in result.stdout
    rows = [line for line in lines if line.startswith(("| self |", "| cross |"))]
    # 2 attention kinds × 2 compile modes × (ours, keras, floor).
    assert len(rows) == 12, result.stdout
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert float(cells[3]) > 0.0  # ms
        assert float(cells[5]) > 0.0  # GFLOP/s
        if cells[2] in ("ours", "floor"):
            assert float(cells[7].split()[0]) > 0.0  # keras/ours (range)
    assert "GFLOP/s" in result.stdout and "Ceiling" in result.stdout
