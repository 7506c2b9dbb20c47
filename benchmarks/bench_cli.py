"""How long the command line takes to answer: `zoo list`, `zoo describe` and `zoo --help`,
each a fresh process of the `zoo` console script, wall time from start to exit.

These commands import no TensorFlow (`zoo.cli`; tests/test_cli_light.py checks it), so
their time is Python's start and the zoo's light modules. `zoo evaluate` on a missing run
is timed too, as the reference of a command that imports TensorFlow before answering.
The goal of issue #63: `zoo list` under 1.5 s on an idle machine.

Usage:
    python benchmarks/bench_cli.py             # 7 runs of each, the median
    python benchmarks/bench_cli.py --runs 3 --json cli.json
    python benchmarks/bench_cli.py --runs 1 --light-only   # a smoke test
"""

import argparse
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
COMMANDS = (
    ("zoo list", ["list"]),
    ("zoo describe transformer-small", ["describe", "transformer-small"]),
    ("zoo --help", ["--help"]),
    ("zoo evaluate MISSING (imports TensorFlow)", ["evaluate", "no-such-run"]),
)


def cpu_model():
    """`lscpu`'s model name, its AVX-512 flags (or "no AVX-512"), and the core count."""
    out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    name = fields.get("Model name", platform.processor() or "unknown CPU").strip()
    flags = fields.get("Flags", "").split()
    avx512 = "AVX-512" if any(flag.startswith("avx512") for flag in flags) else "no AVX-512"
    return f"{name}, {avx512}, {os.cpu_count()} cores"


def zoo_command():
    """The `zoo` console script beside this Python (a venv's bin/), else `python -m zoo`."""
    script = pathlib.Path(sys.executable).with_name("zoo")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "zoo"]


def time_command(argv, runs):
    """The wall times of `runs` fresh processes of `zoo ARGV`, in seconds."""
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("TF_CPP_MIN_LOG_LEVEL", "ZOO_DEBUG")}
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(zoo_command() + argv, cwd=ROOT, env=environment, check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return times


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="processes per command (default 7)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--light-only", action="store_true",
                        help="leave out the command that imports TensorFlow (a smoke test)")
    args = parser.parse_args(argv)
    machine = cpu_model()
    results = []
    for label, command in COMMANDS[:-1] if args.light_only else COMMANDS:
        times = time_command(command, args.runs)
        results.append({"command": label, "median_s": statistics.median(times),
                        "min_s": min(times), "max_s": max(times), "runs": len(times)})
    print(f"{machine}; Python {platform.python_version()}; {args.runs} runs each\n")
    print("| command | median (s) | min–max (s) |")
    print("|---|---:|---|")
    for row in results:
        print(f"| `{row['command']}` | {row['median_s']:.2f} | "
              f"{row['min_s']:.2f}–{row['max_s']:.2f} |")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"machine": machine, "results": results},
                                                      indent=2) + "\n")


if __name__ == "__main__":
    main()
