"""The decoding benchmark runs end to end at tiny sizes and prints its table."""

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_decode.py"


def test_bench_decode_quick_prints_a_table():
    environment = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
        env=environment,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    assert "| batch | variant | tokens/s |" in out
    rows = [line for line in out.splitlines() if line.startswith(("| 1 |", "| 4 |"))]
    variants = ["uncached, tf.function", "cached, tf.function", "cached, XLA",
                "beam 4, cached, tf.function"]
    assert len(rows) == 2 * len(variants), out
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert cells[1] in variants
        assert float(cells[2].replace(",", "")) > 0  # tokens/s
        assert float(cells[4]) > 0  # speed-up
    # The script checks that every variant generated the full 8 tokens per row.
    assert "Target cached >= 4x uncached (tf.function) at 8 tokens, cached, XLA" in out
