"""Long-sequence self-attention: `MultiHeadAttention(chunk_size=C)` against the full path.

A step is one self-attention layer's forward pass plus the gradients of a weighted sum
of its output with respect to every weight and to the input, inside `tf.function`
(B 1, d 256, 4 heads of 64 by default).

Two measurements:

- **speed ratio** at short lengths (n ≤ 1,024): our full path, the chunked path and
  `keras.layers.MultiHeadAttention` timed in one process, interleaved round by round;
  chunked/full is the median of the per-round ratios (BENCHMARKS.md: compare ratios
  measured in one run).
- **peak memory**, one fresh process per point: the process's peak resident set
  (`VmHWM` in /proc/self/status) after warm-up and timed steps, next to its resident
  set before the first step (TensorFlow and the layer alone). A full-path point whose
  `(B, N, n, n)` float32 scores alone would exceed `--max-scores-gb` is recorded as
  skipped (with the size it would need), not run: on this 24 GB machine shared with
  other jobs, a 17 GB allocation at n = 32,768 would take the machine down, not fail.

Usage:
    python benchmarks/bench_long_attention.py                 # ratios at 256/1024, memory up to 32,768
    python benchmarks/bench_long_attention.py --memory-lengths 1024 4096 --chunk-size 512
    python benchmarks/bench_long_attention.py --quick         # tiny sizes, a smoke test
"""

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# The checkout this script lives in, before any installed copy of keras_attention.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from keras_attention.layers.multi_head import MultiHeadAttention  # noqa: E402 - after the path


def cpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def memory_kib(field):
    """`VmHWM` (peak) or `VmRSS` (now) of this process, in KiB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def make_step(variant, length, width, heads, chunk_size, batch=1):
    """A `tf.function` forward+backward step of one self-attention layer, and its input."""
    import keras
    import numpy as np
    import tensorflow as tf

    if variant == "keras":
        layer = keras.layers.MultiHeadAttention(heads, width // heads)
    else:
        layer = MultiHeadAttention(
            heads, width // heads, chunk_size=chunk_size if variant == "chunked" else None
        )
    rng = np.random.default_rng(0)
    x = tf.constant(rng.standard_normal((batch, length, width)).astype("float32"))
    projection = tf.constant(rng.standard_normal((batch, length, width)).astype("float32"))
    layer(x[:, :8], x[:, :8])  # build

    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(layer(x, x) * projection)
        gradients = tape.gradient(loss, [x] + layer.trainable_weights)
        return loss, tf.add_n([tf.reduce_sum(g) for g in gradients])

    return step, x


def timed(step, x):
    start = time.perf_counter()
    _, total = step(x)
    float(total)  # wait for the result
    return time.perf_counter() - start


def run_point(args):
    """One memory point in this (fresh) process; prints one JSON line."""
    step, x = make_step(args.variant, args.length, args.width, args.heads, args.chunk_size)
    before_kib = memory_kib("VmRSS")
    compile_s = timed(step, x)
    times = [timed(step, x) for _ in range(args.iterations)]
    print(json.dumps({
        "variant": args.variant, "n": args.length, "compile_s": compile_s,
        "step_s": statistics.median(times), "rss_before_mib": before_kib / 1024,
        "peak_mib": memory_kib("VmHWM") / 1024,
    }))


def measure_memory(variant, length, args):
    """Run one point in a fresh process; a failure is returned as such, not raised."""
    scores_gb = args.batch * args.heads * length * length * 4 / 1e9
    if variant != "chunked" and scores_gb > args.max_scores_gb:
        return {"variant": variant, "n": length, "status": f"skipped: scores {scores_gb:.1f} GB"}
    command = [sys.executable, os.path.abspath(__file__), "--point", "--variant", variant,
               "--length", str(length), "--width", str(args.width), "--heads", str(args.heads),
               "--chunk-size", str(args.chunk_size), "--iterations", str(args.point_iterations)]
    try:
        result = subprocess.run(command, capture_output=True, text=True,
                                timeout=args.cap_seconds, check=False)
    except subprocess.TimeoutExpired:
        return {"variant": variant, "n": length, "status": f"time cap {args.cap_seconds} s"}
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    if result.returncode != 0 or not lines:
        tail = (result.stderr.strip().splitlines() or ["no output"])[-1][:80]
        return {"variant": variant, "n": length, "status": f"failed ({result.returncode}): {tail}"}
    return dict(json.loads(lines[-1]), status="ok")


def measure_ratios(args):
    """Full, chunked and Keras steps interleaved in this process; medians and ratios."""
    rows = []
    for length in args.ratio_lengths:
        steps = {v: make_step(v, length, args.width, args.heads, args.chunk_size)
                 for v in ("full", "chunked", "keras")}
        for step, x in steps.values():
            timed(step, x)  # trace and warm up
        times = {v: [] for v in steps}
        for round_index in range(args.rounds):
            order = list(steps) if round_index % 2 == 0 else list(steps)[::-1]
            for variant in order:
                step, x = steps[variant]
                times[variant].append(min(timed(step, x) for _ in range(args.iterations)))
        ratios = [c / f for c, f in zip(times["chunked"], times["full"])]
        rows.append((length, {v: statistics.median(t) * 1e3 for v, t in times.items()},
                     statistics.median(ratios), min(ratios), max(ratios)))
    return rows


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, a smoke test")
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--chunk-size", type=int, default=1024)
    parser.add_argument("--ratio-lengths", type=int, nargs="*", default=[256, 1024])
    parser.add_argument("--ratio-chunk-size", type=int, default=256,
                        help="chunk size of the speed comparison (chunks < n, so the loop runs)")
    parser.add_argument("--memory-lengths", type=int, nargs="*",
                        default=[1024, 4096, 8192, 16384, 32768])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--point-iterations", type=int, default=1)
    parser.add_argument("--memory-variants", nargs="+", choices=("full", "keras", "chunked"),
                        default=["full", "keras", "chunked"],
                        help="the variants whose peak memory is measured (default all three)")
    parser.add_argument("--max-scores-gb", type=float, default=2.0)
    parser.add_argument("--cap-seconds", type=float, default=600)
    parser.add_argument("--point", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--variant", default="chunked", help=argparse.SUPPRESS)
    parser.add_argument("--length", type=int, default=1024, help=argparse.SUPPRESS)
    return parser.parse_args()


def main():
    args = parse_args()
    if args.point:
        return run_point(args)
    if args.quick:
        args.width, args.heads, args.rounds, args.iterations = 32, 2, 2, 1
        args.ratio_lengths, args.memory_lengths = [64], [64]
        args.chunk_size = args.ratio_chunk_size = 32
        args.cap_seconds = 120
        args.memory_variants = ["chunked"]  # one fresh process: its code runs in the ratios too
    import keras
    import tensorflow as tf

    print(f"# {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {cpu_model()}, "
          f"{os.cpu_count()} cores, TensorFlow {tf.__version__}, Keras {keras.__version__}; "
          f"B {args.batch}, d {args.width}, {args.heads} heads; one step = forward + backward")
    chunk_size = args.chunk_size
    args.chunk_size = args.ratio_chunk_size
    ratios = measure_ratios(args)
    print(f"\nSpeed, one process, {args.rounds} rounds × best of {args.iterations} "
          f"(chunk size {args.ratio_chunk_size}):\n")
    print("| n | full ms | chunked ms | keras ms | chunked/full (range) |")
    print("|---|---|---|---|---|")
    for length, ms, ratio, low, high in ratios:
        print(f"| {length} | {ms['full']:.1f} | {ms['chunked']:.1f} | {ms['keras']:.1f} | "
              f"{ratio:.2f} ({low:.2f}–{high:.2f}) |")
    args.chunk_size = chunk_size
    print(f"\nPeak memory, a fresh process per point (chunk size {chunk_size}; "
          f"{args.point_iterations} timed step after the first):\n")
    print("| variant | n | step s | first step s | RSS before MiB | peak RSS MiB | status |")
    print("|---|---|---|---|---|---|---|")
    for length in args.memory_lengths:
        for variant in args.memory_variants:
            row = measure_memory(variant, length, args)
            if row["status"] == "ok":
                print(f"| {variant} | {length} | {row['step_s']:.2f} | {row['compile_s']:.2f} | "
                      f"{row['rss_before_mib']:.0f} | {row['peak_mib']:.0f} | ok |")
            else:
                print(f"| {variant} | {length} | – | – | – | – | {row['status']} |")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
