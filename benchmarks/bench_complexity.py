"""The cost table of docs/math.md#cost-per-layer measured: time and peak memory of one layer against the length n.

| layer | complexity | sequential ops | max path length |
| self-attention | O(n²·d) | O(1) | O(1) |
| convolution, kernel k | O(k·n·d²) | O(1) | O(log_k n) dilated, O(n/k) not |
| recurrent | O(n·d²) | O(n) | O(n) |

One point is one layer's forward pass plus the gradients of a weighted sum of its output
with respect to its weights and input (`tf.function`, batch 1), for a length n and a
width d, in a **fresh process** (`subprocess`), so that its peak resident set (`VmHWM`)
is its own. A point that runs out of memory, fails or passes `--cap-seconds` is recorded
as such and drawn as an ×; larger n of the same layer and width are then not run (they
would fail too) and are recorded as skipped. Softmax attention's full path is skipped
beforehand where its `(1, N, n, n)` float32 scores alone would pass `--max-scores-gb`:
on a machine shared with other jobs, an allocation of most of the memory must not be tried.
`--shared-process` (which `--quick` sets) runs the layers of one (n, d) in one fresh process
instead, one after the other: one TensorFlow start for all of them, but each peak then
includes the earlier layers' (a smoke test's shortcut, not a measurement).

Layers (heads of 64, so N = d / 64):
- `softmax`: `ka.MultiHeadAttention` self-attention, full `(N, n, n)` scores;
- `chunked`: the same with `chunk_size=--chunk-size` (online softmax, O(n·C) memory);
- `linear`: `ka.LinearAttention` (non-causal, O(n·d·H));
- `conv`: `ka.CausalConv1D(d, 3)` (one layer, k 3);
- `gru`: `keras.layers.GRU(d, return_sequences=True)` (n sequential steps).

Usage:
    python benchmarks/bench_complexity.py                     # n 128 … 32,768, d 64 and 256
    python benchmarks/bench_complexity.py --max-n 4096 --widths 64 --cap-seconds 30
    python benchmarks/bench_complexity.py --plot-only results.json   # redraw from a run
    python benchmarks/bench_complexity.py --quick             # tiny sizes, one process, a smoke test
"""

import argparse
import datetime
import json
import math
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # this checkout before any installed keras_attention

import keras_attention as ka  # noqa: E402 - after the path

LAYERS = ("softmax", "chunked", "linear", "conv", "gru")
TEXTBOOK = {  # exponent of n in the time per layer, sequential ops, max path length
    "softmax": (2, "O(1)", "O(1)"),
    "chunked": (2, "O(n/C) chunks", "O(1)"),
    "linear": (1, "O(1)", "O(1)"),
    "conv": (1, "O(1)", "O(log_k n) dilated"),
    "gru": (1, "O(n)", "O(n)"),
}
HEAD_SIZE = 64


def cpu_model():
    out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    for line in out.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def make_layer(name, width, chunk_size):
    import keras

    heads = max(1, width // HEAD_SIZE)
    key_dim = width // heads
    if name == "softmax":
        return ka.MultiHeadAttention(heads, key_dim), True
    if name == "chunked":
        return ka.MultiHeadAttention(heads, key_dim, chunk_size=chunk_size), True
    if name == "linear":
        return ka.LinearAttention(heads, key_dim), True
    if name == "conv":
        return ka.CausalConv1D(width, 3), False
    if name == "gru":
        return keras.layers.GRU(width, return_sequences=True), False
    raise ValueError(f"unknown layer {name!r}")


def run_points(args):
    """The (layer, n, d) points of `args.layer` (one or more layers), one after the other in
    this fresh process; prints one JSON line per point."""
    for name in args.layer:
        run_point(name, args)


def run_point(name, args):
    """One (layer, n, d) point; prints one JSON line."""
    import numpy as np
    import tensorflow as tf

    layer, attention = make_layer(name, args.width, args.chunk_size)
    rng = np.random.default_rng(0)
    x = tf.constant(rng.standard_normal((1, args.length, args.width)).astype("float32"))
    projection = tf.constant(rng.standard_normal((1, args.length, args.width)).astype("float32"))
    layer(x[:, :4], x[:, :4]) if attention else layer(x[:, :4])

    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x, x) if attention else layer(x)
            loss = tf.reduce_sum(y * projection)
        gradients = tape.gradient(loss, [x] + layer.trainable_weights)
        return tf.add_n([tf.reduce_sum(g) for g in gradients])

    start = time.perf_counter()
    float(step(x))  # trace, compile and the first step
    first = time.perf_counter() - start
    times, budget = [], args.cap_seconds * 0.8 - first
    while len(times) < args.repeats and sum(times) + (times[-1] if times else first) < budget:
        start = time.perf_counter()
        float(step(x))
        times.append(time.perf_counter() - start)
    with open("/proc/self/status") as status:
        peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    print(json.dumps({"step_s": statistics.median(times or [first]), "first_s": first,
                      "steps": len(times), "peak_mib": peak / 1024}))


def measure(layers, length, width, args):
    """The points of `layers` at (n, d), run one after the other in one fresh process (one
    layer, unless `--shared-process`), each under `--cap-seconds`; a list of points.
    Failures are returned as a status, not raised: a point that printed no result before
    the process ended gets the process's failure."""
    points = {layer: {"layer": layer, "n": length, "d": width} for layer in layers}
    heads = max(1, width // HEAD_SIZE)
    scores_gb = heads * length * length * 4 / 1e9
    if "softmax" in points and scores_gb > args.max_scores_gb:
        points["softmax"]["status"] = f"skipped: scores alone {scores_gb:.1f} GB"
    todo = [layer for layer in layers if "status" not in points[layer]]
    if not todo:
        return list(points.values())
    command = [sys.executable, os.path.abspath(__file__), "--point", "--layer", *todo,
               "--length", str(length), "--widths", str(width), "--chunk-size",
               str(args.chunk_size), "--repeats", str(args.repeats),
               "--cap-seconds", str(args.cap_seconds)]
    try:
        result = subprocess.run(command, capture_output=True, text=True,
                                timeout=args.cap_seconds * len(todo), check=False)
        stdout, failure = result.stdout, None
    except subprocess.TimeoutExpired as timeout:
        stdout, failure = timeout.stdout or "", f"time cap {args.cap_seconds:g} s"
        stdout = stdout.decode() if isinstance(stdout, bytes) else stdout
    lines = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    for layer, line in zip(todo, lines):
        points[layer].update(line, status="ok")
    if failure is None and (result.returncode != 0 or len(lines) < len(todo)):
        memory = result.returncode == -9 or "ResourceExhausted" in result.stderr or (
            "MemoryError" in result.stderr)
        failure = "out of memory" if memory else f"failed ({result.returncode})"
    for layer in todo[len(lines):]:
        points[layer]["status"] = failure
    return list(points.values())


def sweep(args):
    lengths = [n for n in (2 ** i for i in range(3, 21)) if args.min_n <= n <= args.max_n]
    points, failed = [], set()
    for width in args.widths:
        for length in lengths:
            shared = {}
            if args.shared_process:
                todo = [layer for layer in args.layers if (layer, width) not in failed]
                shared = {p["layer"]: p for p in measure(todo, length, width, args)}
            for layer in args.layers:
                if (layer, width) in failed:
                    point = {"layer": layer, "n": length, "d": width,
                             "status": "skipped: a smaller n failed"}
                else:
                    point = shared.get(layer) or measure([layer], length, width, args)[0]
                    if point["status"] != "ok":
                        failed.add((layer, width))
                points.append(point)
                shown = (f"{point['step_s'] * 1e3:9.1f} ms {point['peak_mib']:7.0f} MiB"
                         if point["status"] == "ok" else point["status"])
                print(f"  d {width:4d}  n {length:6d}  {layer:8s} {shown}", flush=True)
    return points


def fitted_slope(points, layer, width, min_n):
    """Least-squares slope of log(time) against log(n) over the measured points n >= min_n."""
    xy = [(math.log(p["n"]), math.log(p["step_s"])) for p in points
          if p["layer"] == layer and p["d"] == width and p["status"] == "ok" and p["n"] >= min_n]
    if len(xy) < 2:
        return None
    mean_x = sum(x for x, _ in xy) / len(xy)
    mean_y = sum(y for _, y in xy) / len(xy)
    return sum((x - mean_x) * (y - mean_y) for x, y in xy) / sum((x - mean_x) ** 2 for x, _ in xy)


def crossover(points, width):
    """The smallest n from which full softmax attention is slower than linear attention
    at every larger n where both were measured (one noisy small n does not count)."""
    time = {(p["layer"], p["n"]): p["step_s"] for p in points
            if p["d"] == width and p["status"] == "ok"}
    both = [n for n in sorted({p["n"] for p in points})
            if ("softmax", n) in time and ("linear", n) in time]
    slower = [time["softmax", n] > time["linear", n] for n in both]
    for index, length in enumerate(both):
        if all(slower[index:]):
            return length
    return None


def print_tables(points, args):
    widths = sorted({p["d"] for p in points})
    layers = [layer for layer in LAYERS if any(p["layer"] == layer for p in points)]
    for width in widths:
        print(f"\nd = {width} (time of one forward+backward step in ms / peak RSS in MiB):\n")
        print("| n | " + " | ".join(layers) + " |")
        print("|---" * (len(layers) + 1) + "|")
        for length in sorted({p["n"] for p in points if p["d"] == width}):
            cells = []
            for layer in layers:
                p = next((p for p in points if (p["layer"], p["n"], p["d"]) ==
                          (layer, length, width)), None)
                if p is None:
                    cells.append("")
                elif p["status"] == "ok":
                    cells.append(f"{p['step_s'] * 1e3:.1f} / {p['peak_mib']:.0f}")
                else:
                    cells.append(f"× {p['status']}")
            print(f"| {length} | " + " | ".join(cells) + " |")
    print(f"\nFitted slope of log(time) against log(n) over n ≥ {args.fit_min_n}, beside the "
          "textbook exponent:\n")
    print("| layer | textbook time | sequential ops | max path | "
          + " | ".join(f"slope d={w}" for w in widths) + " |")
    print("|---|---|---|---|" + "---|" * len(widths))
    for layer in layers:
        exponent, sequential, path = TEXTBOOK[layer]
        slopes = [fitted_slope(points, layer, w, args.fit_min_n) for w in widths]
        print(f"| {layer} | n^{exponent} | {sequential} | {path} | "
              + " | ".join("–" if s is None else f"{s:.2f}" for s in slopes) + " |")
    for width in widths:
        print(f"\nd = {width}: full softmax attention slower than linear attention from "
              f"n = {crossover(points, width)} on (n²·d passes n·d² at n = d = {width}).")


def plot(points, path, args, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    widths = sorted({p["d"] for p in points})
    figure, axes = plt.subplots(2, len(widths), figsize=(5.2 * len(widths), 7.5), squeeze=False)
    colours = dict(zip(LAYERS, ("C3", "C1", "C2", "C0", "C4")))
    for column, width in enumerate(widths):
        for row, (key, label) in enumerate((("step_s", "seconds per step"),
                                            ("peak_mib", "peak RSS (MiB)"))):
            axis = axes[row][column]
            for rank, layer in enumerate(LAYERS):
                mine = sorted((p for p in points if p["layer"] == layer and p["d"] == width),
                              key=lambda p: p["n"])
                ok = [p for p in mine if p["status"] == "ok"]
                bad = [p for p in mine if p["status"] != "ok"]
                slope = fitted_slope(points, layer, width, args.fit_min_n)
                name = f"{layer} (n^{TEXTBOOK[layer][0]}"
                name += f", fit {slope:.2f})" if row == 0 and slope is not None else ")"
                axis.plot([p["n"] for p in ok], [p[key] for p in ok], "o-", ms=3,
                          color=colours[layer], label=name)
                if bad:
                    axis.plot([p["n"] for p in bad], [0.96 - 0.05 * rank] * len(bad), "x", ms=7,
                              mew=2, color=colours[layer], transform=axis.get_xaxis_transform())
            axis.axvline(width, color="grey", ls=":", lw=1)
            if row == 0:
                axis.text(width, 0.02, " n = d:\n n²d = nd²", fontsize=7, color="grey",
                          transform=axis.get_xaxis_transform())
                cross = crossover(points, width)
                if cross:
                    axis.axvline(cross, color="C3", ls="--", lw=1)
                    axis.text(cross, 0.12, f" softmax > linear\n from n = {cross}",
                              fontsize=7, color="C3", transform=axis.get_xaxis_transform())
            axis.set_xscale("log", base=2)
            if any(p["d"] == width and p["status"] == "ok" for p in points):
                axis.set_yscale("log")  # (nothing measured: a linear axis with the ×s only)
            axis.set_xlabel("n (tokens)")
            axis.set_ylabel(label)
            axis.set_title(f"d = {width}, forward+backward, × = failed/skipped", fontsize=9)
            axis.grid(True, which="major", lw=0.3)
            axis.legend(fontsize=7, loc="upper left", framealpha=0.8)
    figure.suptitle(title, fontsize=9)
    figure.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    figure.savefig(path, dpi=72)
    print(f"\nwrote {path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--min-n", type=int, default=128)
    parser.add_argument("--max-n", type=int, default=32768)
    parser.add_argument("--widths", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--layers", nargs="+", default=list(LAYERS), choices=LAYERS)
    parser.add_argument("--chunk-size", type=int, default=1024)
    parser.add_argument("--cap-seconds", type=float, default=60.0)
    parser.add_argument("--repeats", type=int, default=3, help="timed steps after the first")
    parser.add_argument("--max-scores-gb", type=float, default=4.0)
    parser.add_argument("--fit-min-n", type=int, default=2048)
    parser.add_argument("--output", default=os.path.join(ROOT, "docs", "images", "complexity.png"))
    parser.add_argument("--json", help="also write the points to this file")
    parser.add_argument("--plot-only", help="redraw the picture and tables from a --json file")
    parser.add_argument("--shared-process", action="store_true",
                        help="the layers of one (n, d) in one fresh process (a smoke test: "
                             "each peak includes the earlier layers')")
    parser.add_argument("--quick", action="store_true",
                        help="tiny sizes and --shared-process, a smoke test")
    parser.add_argument("--point", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--layer", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--length", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.point:
        args.width = args.widths[0]
        return run_points(args)
    if args.quick:
        args.min_n, args.max_n, args.widths, args.chunk_size = 32, 32, [16], 16
        args.repeats, args.fit_min_n, args.shared_process = 1, 32, True
    if args.plot_only:
        with open(args.plot_only) as file:
            saved = json.load(file)
        points, header = saved["points"], saved["header"]
    else:
        import keras
        import tensorflow as tf

        header = (f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
                  f"{cpu_model()}, {os.cpu_count()} cores, TF {tf.__version__}, "
                  f"Keras {keras.__version__}; batch 1, heads of {HEAD_SIZE}, chunk "
                  f"{args.chunk_size}, cap {args.cap_seconds:.0f} s")
        print("#", header, flush=True)
        started = time.perf_counter()
        points = sweep(args)
        print(f"\nsweep took {time.perf_counter() - started:.0f} s")
        if args.json:
            with open(args.json, "w") as file:
                json.dump({"header": header, "points": points}, file, indent=1)
    print_tables(points, args)
    plot(points, args.output, args, header)


if __name__ == "__main__":
    main()
