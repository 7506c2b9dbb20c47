"""Concurrent serving: N client threads calling one loaded SavedModel at once.

The model is `bench_decode.py`'s (the `transformer-tiny` sizes, untrained, every row
decodes the full `output_tokens`), exported with `zoo.export` without and with
`jit_compile=True` (XLA decoding inside the SavedModel), or an existing export given
with `--saved-model`. It is loaded once with `tf.saved_model.load`, as TF Serving loads
one model and runs every request thread against it.

For each N in `--threads` (default 1, 4, 16), N threads send `--requests` requests in
total, each request one call of the signature on `--batch` sentences (random whole-word
sentences of 7 to 31 tokens, so the sources fall in several length buckets), each
thread sending its next request as soon as the previous one is answered. Reported per
(export, N): requests/s and sentences/s over the wall time of all requests, the p50 and
p99 latency of one request, and the failed requests: an exception, or an answer that
differs from what the same request got alone in this process before the threads started
(tokens, translation). The script exits non-zero if any request failed.

Every distinct request shape is called once before timing (warm-up: XLA compiles once per
batch size and source bucket).

    python benchmarks/bench_serving.py                       # about 4 minutes
    python benchmarks/bench_serving.py --signature serving_default --requests 64
    python benchmarks/bench_serving.py --saved-model saved_models/numbers/1 --batch 8
    python benchmarks/bench_serving.py --quick               # tiny sizes (smoke test)

`--soak MINUTES` runs the soak of `serving_soak.py` instead: one export (the given
`--saved-model`, else the benchmark model's, with `--jit` its XLA export) under 16 client
threads (`--threads`) for MINUTES, one sentence per request, a sample every `--interval`
seconds, the verdicts of the three goals at the end; it exits non-zero if a request failed.
The sentences of a `--saved-model` are made of the words of the English gettext catalogs
(`gettext:es`'s sources), those of the benchmark model of its vocabulary's words.

    python benchmarks/bench_serving.py --soak 30 --saved-model saved_models/small/1 \\
        --label default --json soak_default.json
    python benchmarks/bench_serving.py --quick --soak 0.33 --interval 2   # 20 s
"""

import argparse
import dataclasses
import datetime
import json
import os
import platform
import sys
import tempfile
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import serving_soak  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402, F401 - registers the tokenizer ops for loading
from bench_decode import FULL, QUICK, build  # noqa: E402

from zoo import export as zoo_export  # noqa: E402
from zoo.datasets import catalogs  # noqa: E402

DEFAULTS = dict(threads=(1, 4, 16), requests=96, batch=1, sentences=32)
QUICK_DEFAULTS = dict(threads=(1, 4), requests=8, batch=2, sentences=4)


def random_sentences(tokenizer, rng, count, shortest, longest):
    """`count` sentences of `shortest`..`longest` whole-word vocabulary tokens."""
    vocabulary = tokenizer.get_vocabulary()
    words = [
        token for i, token in enumerate(vocabulary)
        if i >= 4 and token.isalpha() and not token.startswith("##")
    ]
    return [
        " ".join(rng.choice(words, size=rng.integers(shortest, longest + 1)))
        for _ in range(count)
    ]


def make_requests(sentences, count, batch):
    """`count` requests of `batch` sentences each, cycling through `sentences`."""
    return [
        [sentences[(index * batch + row) % len(sentences)] for row in range(batch)]
        for index in range(count)
    ]


def answer(function, request):
    out = function(text=tf.constant(request))
    return out["tokens"].numpy(), out["translation"].numpy()


def run_clients(function, requests, threads, expected):
    """Send `requests` from `threads` threads; return (wall seconds, latencies, failures)."""
    queue = list(enumerate(requests))
    lock = threading.Lock()
    latencies, failures = [], []

    def client():
        while True:
            with lock:
                if not queue:
                    return
                index, request = queue.pop()
            started = time.perf_counter()
            try:
                tokens, translation = answer(function, request)
                ok = np.array_equal(tokens, expected[index][0]) and np.array_equal(
                    translation, expected[index][1]
                )
                problem = None if ok else "answer differs from the same request served alone"
            except Exception as error:  # noqa: BLE001 - every failure is counted and shown
                problem = f"{type(error).__name__}: {str(error)[:200]}"
            elapsed = time.perf_counter() - started
            with lock:
                latencies.append(elapsed)
                if problem is not None:
                    failures.append((index, problem))

    workers = [threading.Thread(target=client) for _ in range(threads)]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return time.perf_counter() - started, latencies, failures


def measure(name, function, requests, thread_counts, batch):
    """Warm up every request alone (the reference answers), then each thread count."""
    warm_start = time.perf_counter()
    expected = [answer(function, request) for request in requests]
    print(f"  {name}: {len(requests)} requests answered alone (warm-up) in "
          f"{time.perf_counter() - warm_start:.1f} s", flush=True)
    rows = []
    for threads in thread_counts:
        wall, latencies, failures = run_clients(function, requests, threads, expected)
        for index, problem in failures[:5]:
            print(f"  FAILED request {index}: {problem}")
        rows.append(dict(
            export=name, threads=threads, requests=len(requests), batch=batch,
            seconds=wall, requests_per_second=len(requests) / wall,
            sentences_per_second=len(requests) * batch / wall,
            p50_ms=1e3 * float(np.percentile(latencies, 50)),
            p99_ms=1e3 * float(np.percentile(latencies, 99)),
            failed=len(failures),
        ))
        print(f"  {name}, {threads} threads: {wall:.1f} s", flush=True)
    return rows


def exports(args, sizes, scratch):
    """({name: signature function}, tokenizer or None): the given SavedModel, or the
    benchmark model exported without and with XLA."""
    if args.saved_model:
        loaded = tf.saved_model.load(args.saved_model)
        return {"SavedModel": loaded.signatures[args.signature]}, None
    keras.utils.set_random_seed(0)
    tokenizer, model = build(sizes, seed=0)
    print(f"model: {model.count_params():,} parameters, vocabulary {tokenizer.vocab_size}, "
          f"{sizes['output_tokens']} output tokens per sentence")
    functions = {}
    for name, jit_compile in (("SavedModel", False), ("SavedModel XLA", True)):
        path = zoo_export.export(
            model, os.path.join(scratch, name.replace(" ", "_")), tokenizer=tokenizer,
            max_length=sizes["output_tokens"], beam_size=4, jit_compile=jit_compile,
        )
        functions[name] = tf.saved_model.load(str(path)).signatures[args.signature]
    return functions, tokenizer


def catalog_words():
    """The alphabetic words of the English sources of `gettext:es`."""
    pairs, _, _ = catalogs.gettext_pairs("es")
    return sorted({word for source, _ in pairs for word in source.split() if word.isalpha()})


def soak_export(args, sizes, scratch):
    """(signature function, its words, what it is) of the export that the soak serves."""
    if args.saved_model:
        loaded = tf.saved_model.load(args.saved_model)
        return loaded.signatures[args.signature], catalog_words(), args.saved_model
    keras.utils.set_random_seed(0)
    tokenizer, model = build(sizes, seed=0)
    path = zoo_export.export(
        model, os.path.join(scratch, "soak"), tokenizer=tokenizer,
        max_length=sizes["output_tokens"], beam_size=4, jit_compile=args.jit,
    )
    vocabulary = tokenizer.get_vocabulary()
    words = [token for i, token in enumerate(vocabulary)
             if i >= 4 and token.isalpha() and not token.startswith("##")]
    loaded = tf.saved_model.load(str(path))
    return loaded.signatures[args.signature], words, f"benchmark model, jit_compile={args.jit}"


def run_soak(args, sizes):
    """`--soak MINUTES`: the soak of one export; prints the samples and verdicts."""
    options = serving_soak.SoakOptions(
        minutes=args.soak, threads=(args.threads or (16,))[0], interval_s=args.interval,
        pool=8 if args.quick else 64, longest=sizes["source_length"] * 2 if args.quick else 200,
    )
    with tempfile.TemporaryDirectory(prefix="bench_serving_soak_") as scratch:
        function, words, export = soak_export(args, sizes, scratch)
        texts = serving_soak.soak_texts(words, options)
        print(f"soak: {export}, `{args.signature}` signature, {options.threads} threads, "
              f"{options.minutes} min, {len(texts)} distinct requests, a sample every "
              f"{options.interval_s:g} s", flush=True)
        print(serving_soak.TABLE_HEADER, flush=True)
        result = serving_soak.soak(function, texts, options,
                                   log=lambda line: print(line, flush=True))
    verdict = serving_soak.verdicts(result, options.minutes)
    print()
    for line in serving_soak.verdict_lines(verdict):
        print(line)
    for index, problem in result["problems"][:5]:
        print(f"  FAILED request {index}: {problem}")
    report = dict(label=args.label or export, export=export, signature=args.signature,
                  options=dataclasses.asdict(options), verdicts=verdict, **result)
    return report, verdict["errors"]


def print_table(rows):
    print("| export | threads | requests/s | sentences/s | p50 ms | p99 ms | failed |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['export']} | {row['threads']} | {row['requests_per_second']:.1f} | "
              f"{row['sentences_per_second']:.1f} | {row['p50_ms']:.1f} | {row['p99_ms']:.1f} | "
              f"{row['failed']} |")


def measure_exports(args, sizes, sentence_count, count, batch, threads):
    """The rows of every export (`exports`): `count` requests of `batch` sentences at each
    client thread count of `threads`."""
    with tempfile.TemporaryDirectory(prefix="bench_serving_") as scratch:
        functions, tokenizer = exports(args, sizes, scratch)
        if tokenizer is None:
            sentences = [f"sentence {i}" for i in range(sentence_count)]
        else:
            rng = np.random.default_rng(1)
            longest = sizes["source_length"] - 1
            sentences = random_sentences(tokenizer, rng, sentence_count, min(7, longest), longest)
        requests = make_requests(sentences, count, batch)
        print(f"`{args.signature}` signature, {count} requests of {batch} sentences per "
              f"thread count")
        rows = []
        for name, function in functions.items():
            rows += measure(name, function, requests, threads, batch)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    parser.add_argument("--threads", type=int, nargs="+", help="client thread counts (1 4 16)")
    parser.add_argument("--requests", type=int, help="requests per thread count (96)")
    parser.add_argument("--batch", type=int, help="sentences per request (1)")
    parser.add_argument("--signature", default="greedy", choices=("greedy", "serving_default"))
    parser.add_argument("--saved-model", metavar="PATH",
                        help="an exported version directory to serve instead of the benchmark model")
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    parser.add_argument("--soak", type=float, metavar="MINUTES",
                        help="serve one export for MINUTES under --threads (16) clients")
    parser.add_argument("--interval", type=float, default=30.0,
                        help="--soak: seconds between samples (30)")
    parser.add_argument("--jit", action="store_true",
                        help="--soak without --saved-model: the benchmark model's XLA export")
    parser.add_argument("--label", help="--soak: the export's name in the JSON and the picture")
    args = parser.parse_args(argv)
    sizes, defaults = (QUICK, QUICK_DEFAULTS) if args.quick else (FULL, DEFAULTS)
    threads = tuple(args.threads or defaults["threads"])
    count = args.requests or defaults["requests"]
    batch = args.batch or defaults["batch"]
    if count < 1 or batch < 1 or min(threads) < 1:
        parser.error("--requests, --batch and --threads must be >= 1")

    print(f"# bench_serving.py, {datetime.datetime.now():%Y-%m-%d %H:%M}")
    print(f"command: python benchmarks/bench_serving.py "
          f"{' '.join(sys.argv[1:] if argv is None else argv)}")
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"TensorFlow {tf.__version__}, Python {platform.python_version()}")
    if args.soak is not None:
        return soak_main(args, sizes)
    load_start = os.getloadavg()[0]
    rows = measure_exports(args, sizes, defaults["sentences"], count, batch, threads)
    load_end = os.getloadavg()[0]
    print()
    print_table(rows)
    print()
    print(f"1-minute load average: {load_start:.2f} at the start, {load_end:.2f} at the end")
    if args.json:
        with open(args.json, "w") as file:
            json.dump(dict(signature=args.signature, rows=rows), file, indent=2)
    failed = sum(row["failed"] for row in rows)
    print(f"failed requests: {failed}")
    if failed:
        raise SystemExit(f"{failed} requests failed")
    return rows


def soak_main(args, sizes):
    """`--soak`: the report written to `--json` (with the machine and the date); exits
    non-zero if a request failed."""
    if args.soak <= 0 or args.interval <= 0:
        raise SystemExit("--soak and --interval must be > 0")
    started = datetime.datetime.now()
    report, errors = run_soak(args, sizes)
    report.update(date=f"{started:%Y-%m-%d %H:%M}", cores=os.cpu_count(),
                  machine=platform.processor() or platform.machine(),
                  tensorflow=tf.__version__)
    if args.json:
        with open(args.json, "w") as file:
            json.dump(report, file, indent=1)
    if errors:
        raise SystemExit(f"{errors} requests failed")
    return report


if __name__ == "__main__":
    main()
