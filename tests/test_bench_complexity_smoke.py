"""The complexity benchmark runs end to end at tiny sizes: a table, slopes and a picture.

The script runs in this process. `--quick` runs its five points one after the other in one
fresh process (`--shared-process`: one TensorFlow start instead of five); a point over the
time cap runs alone in its own process, as every point of a full run does.
"""

import json

import pytest


@pytest.mark.large
def test_bench_complexity_quick_writes_table_json_and_picture(tmp_path, run_benchmark):
    picture, points = tmp_path / "complexity.png", tmp_path / "points.json"
    out = run_benchmark("bench_complexity.py", "--quick", "--output", picture, "--json", points)
    assert "| n | softmax | chunked | linear | conv | gru |" in out
    row = next(line for line in out.splitlines() if line.startswith("| 32 |"))
    cells = [cell.strip() for cell in row.strip("|").split("|")][1:]
    assert "| layer | textbook time | sequential ops | max path |" in out
    saved = json.loads(points.read_text())
    assert [p["layer"] for p in saved["points"]] == ["softmax", "chunked", "linear", "conv", "gru"]
    assert all(p["status"] == "ok" and p["n"] == 32 and p["d"] == 16 for p in saved["points"])
    # --quick asks for one timed step after the first; the table shows the points' numbers.
    assert [p["steps"] for p in saved["points"]] == [1] * 5
    assert cells == [f"{p['step_s'] * 1e3:.1f} / {p['peak_mib']:.0f}" for p in saved["points"]]
    # One process: each peak (VmHWM, a high-water mark) is at least the one before it.
    peaks = [p["peak_mib"] for p in saved["points"]]
    assert peaks == sorted(peaks), peaks
    assert picture.stat().st_size > 0
    again = run_benchmark("bench_complexity.py", "--quick", "--plot-only", points, "--output",
                          tmp_path / "again.png")
    assert again.splitlines()[-1] == f"wrote {tmp_path / 'again.png'}"
    assert row in again  # the same table, from the saved points
    assert (tmp_path / "again.png").stat().st_size > 0


def test_a_failed_point_is_recorded_not_dropped(tmp_path, run_benchmark):
    """A point over the time cap is recorded and larger n of that layer are skipped."""
    points = tmp_path / "points.json"
    out = run_benchmark(
        "bench_complexity.py", "--min-n", "128", "--max-n", "256", "--widths", "16",
        "--layers", "conv", "--cap-seconds", "0.5", "--json", points,
        "--output", tmp_path / "c.png",
    )
    statuses = [p["status"] for p in json.loads(points.read_text())["points"]]
    assert statuses == ["time cap 0.5 s", "skipped: a smaller n failed"], statuses
    assert "× time cap" in out
