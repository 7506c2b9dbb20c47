"""benchmarks/bench_cli.py times fresh `zoo` processes and prints its table."""

import json
import re


def test_bench_cli_times_the_light_commands(run_benchmark, tmp_path):
    out = run_benchmark("bench_cli.py", "--runs", "1", "--light-only", "--json",
                        tmp_path / "cli.json")
    rows = [line for line in out.splitlines() if line.startswith("| `zoo")]
    assert [row.split("`")[1] for row in rows] == [
        "zoo list", "zoo describe transformer-small", "zoo --help"]
    assert all(re.fullmatch(r"\| `[^`]+` \| \d+\.\d\d \| \d+\.\d\d–\d+\.\d\d \|", row)
               for row in rows), rows
    results = json.loads((tmp_path / "cli.json").read_text())
    assert results["machine"] in out and len(results["results"]) == 3
    assert all(row["min_s"] <= row["median_s"] <= row["max_s"] for row in results["results"])
