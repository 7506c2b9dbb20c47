"""Smoke test of `benchmarks/bench_train.py --quick` (tiny sizes, one round).

keras-hub is only in the `bench` extra: the smoke run is skipped without it, while
the test of the script's own message for that case always runs.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_train.py"


@pytest.mark.large
def test_bench_train_quick_runs_and_prints_the_table():
    pytest.importorskip(
        "keras_hub", reason="needs keras-hub, in the optional bench extra: install it with "
        "pip install -e '.[bench]' (make bench installs it too, then runs every benchmark)")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick"],
        capture_output=True, text=True, timeout=300, env=env,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    assert "| workload | dropout | compile | zoo | keras-hub | zoo / keras-hub |" in out
    assert "transformer (target tokens/s)" in out and "vit (images/s)" in out
    assert "Target zoo >= 1.2x keras-hub at equal size" in out
    rows = [line for line in out.splitlines() if line.startswith(("| transformer (", "| vit ("))]
    assert rows, out
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        # "1,234 (5%, 1.9 cores)": the median rate, rounded to an integer.
        zoo_rate, hub_rate = (float(cell.split()[0].replace(",", "")) for cell in cells[3:5])
        ratio = float(cells[5].strip("*×"))
        # zoo / keras-hub is the ratio of the two median rates, up to their rounding.
        low = (zoo_rate - 0.5) / (hub_rate + 0.5)
        high = (zoo_rate + 0.5) / max(hub_rate - 0.5, 1e-9)
        assert low - 0.005 <= ratio <= high + 0.005, row


def test_bench_train_exits_clearly_without_keras_hub(tmp_path):
    """With keras_hub made unimportable the script stops with an install hint."""
    blocker = tmp_path / "keras_hub.py"
    blocker.write_text("raise ImportError('blocked for the test')\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick"],
        capture_output=True, text=True, timeout=120, env=env,
    )
    assert result.returncode != 0
    assert "keras-hub" in result.stderr and "pip install" in result.stderr
