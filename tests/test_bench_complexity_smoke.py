"""The complexity benchmark runs end to end at a tiny size: a table, slopes and a picture."""

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_complexity.py"


def test_bench_complexity_quick_writes_table_json_and_picture(tmp_path):
    environment = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    picture, points = tmp_path / "complexity.png", tmp_path / "points.json"
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--output", str(picture), "--json", str(points)],
        capture_output=True, text=True, timeout=300, env=environment, check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "| n | softmax | chunked | linear | conv | gru |" in result.stdout
    row = next(line for line in result.stdout.splitlines() if line.startswith("| 32 |"))
    cells = [cell.strip() for cell in row.strip("|").split("|")][1:]
    assert "| layer | textbook time | sequential ops | max path |" in result.stdout
    saved = json.loads(points.read_text())
    assert [p["layer"] for p in saved["points"]] == ["softmax", "chunked", "linear", "conv", "gru"]
    assert all(p["status"] == "ok" and p["n"] == 32 and p["d"] == 16 for p in saved["points"])
    # --quick asks for one timed step after the first; the table shows the points' numbers.
    assert [p["steps"] for p in saved["points"]] == [1] * 5
    assert cells == [f"{p['step_s'] * 1e3:.1f} / {p['peak_mib']:.0f}" for p in saved["points"]]
    assert picture.stat().st_size > 0
    redraw = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--plot-only", str(points), "--output",
         str(tmp_path / "again.png")],
        capture_output=True, text=True, timeout=120, env=environment, check=False,
    )
    assert redraw.returncode == 0, redraw.stdout + redraw.stderr
    assert (tmp_path / "again.png").stat().st_size > 0


def test_a_failed_point_is_recorded_not_dropped(tmp_path):
    """A point over the time cap is recorded and larger n of that layer are skipped."""
    environment = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    points = tmp_path / "points.json"
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--min-n", "128", "--max-n", "256", "--widths", "16",
         "--layers", "conv", "--cap-seconds", "0.5", "--json", str(points),
         "--output", str(tmp_path / "c.png")],
        capture_output=True, text=True, timeout=120, env=environment, check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    statuses = [p["status"] for p in json.loads(points.read_text())["points"]]
    assert statuses == ["time cap 0.5 s", "skipped: a smaller n failed"], statuses
    assert "× time cap" in result.stdout
