"""First request, steady state and XLA compilations of the exports on sentences of varying length.

Model and tokenizer: `bench_decode.py`'s (the `transformer-tiny` sizes, untrained, every
row decodes all `max_length` tokens). It is exported with `zoo.export(max_length=64)`
three ways: the default export, the `--jit` export as it was before the XLA decoding
fixes (the tied logits as `y Eᵀ` and `where`-written key/value buffers, see
`bench_jit_step.py`; traced with them switched off), and the `--jit` export now.

Each export is then served in a fresh process (`tf.saved_model.load`, the `greedy`
signature), as a server would: first `--sentences` sentences of as many lengths (1 to 62
random vocabulary words; sources fall into the buckets 8, 16, 32, 64), one per request
(batch 1), then four requests of 32 of the same sentences sorted by length (batch 32), each
pass twice: the first pass pays the compilations ("cold"), the second shows the steady
state. The XLA export now is served twice: without and with `loaded.warmup()` first
(what TF Serving does with assets.extra/tf_serving_warmup_requests: batch-1 requests,
one per bucket and signature). XLA compilations are counted from XLA's own dump
(`--xla_dump_to`: one `*before_optimizations.txt` per compiled module).

    python benchmarks/bench_varying_lengths.py              # about 10 minutes idle
    python benchmarks/bench_varying_lengths.py --quick      # tiny sizes (smoke run)
"""

import argparse
import contextlib
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import textwrap

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from bench_decode import FULL, QUICK, build  # noqa: E402

from keras_attention import kv_cache, xla  # noqa: E402
from zoo import export as zoo_export  # noqa: E402
from zoo.decode import steps  # noqa: E402

MAX_LENGTH = 64

SERVE = textwrap.dedent(
    """
    import glob, json, statistics, sys, time
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    path, dump, warm = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
    sentences = json.loads(sys.stdin.read())

    def compiled():
        return len(glob.glob(dump + "/*before_optimizations.txt"))

    start = time.perf_counter()
    loaded = tf.saved_model.load(path)
    report = {"load_s": time.perf_counter() - start}
    greedy = loaded.signatures["greedy"]
    if warm:
        start = time.perf_counter()
        loaded.warmup()
        report["warmup_s"] = time.perf_counter() - start
    report["compiled_after_warmup"] = compiled()
    # Batch 32: four requests of 32 rows, the sentences sorted by length (repeated to fill
    # them), so that the requests span the buckets as length-sorted batching would.
    pool = sorted(sentences * (128 // len(sentences) + 1), key=lambda s: len(s.split()))
    pool = [pool[round(i * len(pool) / 128)] for i in range(128)]
    for batch in (1, 32):
        requests = [[s] for s in sentences] if batch == 1 else [
            pool[i:i + 32] for i in range(0, 128, 32)
        ]
        for name in ("cold", "steady"):
            times = []
            for request in requests:
                start = time.perf_counter()
                greedy(text=tf.constant(request))["tokens"].numpy()
                times.append(time.perf_counter() - start)
            report[f"b{batch}_{name}"] = {
                "first_ms": 1e3 * times[0], "median_ms": 1e3 * statistics.median(times),
                "max_ms": 1e3 * max(times), "total_s": sum(times), "compiled": compiled(),
            }
    print("REPORT" + json.dumps(report))
    """
)


@contextlib.contextmanager
def fixes_switched_off():
    """Trace with the XLA decoding fixes off: the `--jit` export as it was before them."""
    saved = steps.in_xla_context, kv_cache.in_xla_context, xla.add_bias, xla.unfused
    steps.in_xla_context = kv_cache.in_xla_context = lambda: False
    xla.add_bias, xla.unfused = (lambda x, bias: x + bias), (lambda weight: weight)
    try:
        yield
    finally:
        steps.in_xla_context, kv_cache.in_xla_context, xla.add_bias, xla.unfused = saved


def sentences_of_varying_length(tokenizer, rng, count):
    """`count` sentences of `count` different word counts spread over 1..MAX_LENGTH - 2."""
    words = [t for i, t in enumerate(tokenizer.get_vocabulary())
             if i >= 4 and t.isalpha() and not t.startswith("##")]
    lengths = np.unique(np.linspace(1, MAX_LENGTH - 2, count).astype(int))
    rng.shuffle(lengths)
    return [" ".join(rng.choice(words, size=n)) for n in lengths]


def serve(path, sentences, warm, dump):
    done = subprocess.run(
        [sys.executable, "-c", SERVE, str(path), dump, "1" if warm else "0"],
        input=json.dumps(sentences), capture_output=True, text=True, check=False,
        env={**os.environ, "XLA_FLAGS": f"--xla_dump_to={dump}"},
    )
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    return json.loads(done.stdout.split("REPORT")[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke run)")
    parser.add_argument("--sentences", type=int, default=None, help="default 48 (quick: 8)")
    args = parser.parse_args(argv)
    sizes = dict(QUICK if args.quick else FULL)
    count = args.sentences or (8 if args.quick else 48)
    print(f"# bench_varying_lengths.py, {datetime.datetime.now():%Y-%m-%d %H:%M}")
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"TensorFlow {tf.__version__}; 1-minute load average {os.getloadavg()[0]:.2f}")
    tokenizer, model = build(sizes, seed=0)
    sentences = sentences_of_varying_length(tokenizer, np.random.default_rng(1), count)
    root = tempfile.mkdtemp(prefix="bench_varying_lengths_")
    exports = {}
    for name, jit_compile, before in (("default", False, False), ("XLA before", True, True),
                                      ("XLA now", True, False)):
        with fixes_switched_off() if before else contextlib.nullcontext():
            exports[name] = zoo_export.export(
                model, os.path.join(root, name.replace(" ", "_")), tokenizer=tokenizer,
                max_length=MAX_LENGTH, beam_size=4, jit_compile=jit_compile,
            )
    runs = [("default", False), ("XLA before", False), ("XLA now", False), ("XLA now", True)]
    print(f"{len(sentences)} sentences of {len(set(len(s.split()) for s in sentences))} "
          f"lengths; {MAX_LENGTH} output tokens per row; `greedy` signature")
    print("| export | warm-up | batch | first request ms | cold median ms (max) | cold total s "
          "| steady median ms | steady total s | XLA compilations (after warm-up, cold, steady) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, warm in runs:
        report = serve(exports[name], sentences, warm, tempfile.mkdtemp(dir=root))
        warmup = f"{report['warmup_s']:.1f} s" if warm else "none"
        for batch in (1, 32):
            cold, steady = report[f"b{batch}_cold"], report[f"b{batch}_steady"]
            print(f"| {name} | {warmup} | {batch} | {cold['first_ms']:.0f} | "
                  f"{cold['median_ms']:.0f} ({cold['max_ms']:.0f}) | {cold['total_s']:.1f} | "
                  f"{steady['median_ms']:.0f} | {steady['total_s']:.1f} | "
                  f"{report['compiled_after_warmup']}, {cold['compiled']}, {steady['compiled']} |")
    print(f"1-minute load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
