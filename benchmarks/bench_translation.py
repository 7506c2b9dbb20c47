"""Real-language translation quality per training minute: `gettext:es`, exported model, sacrebleu.

One `zoo.runs.train` call (what `zoo train MODEL --data gettext:es --time-limit BUDGET`
runs: the default cased SentencePiece tokenizer, the family's recipe) trains for a
fixed wall-clock budget. A callback saves the model every `--eval-every` minutes of
training (time inside `fit`) and at the end. Afterwards every snapshot, and the run's
`best` checkpoint (`zoo export`'s default), is exported with `zoo.export` and loaded
back as a SavedModel (`tf.saved_model.load`, strings in, strings out), and its
translations of the held-out catalogs (whole `.mo` files never seen in training,
`zoo.datasets.catalogs`) are scored with sacrebleu: corpus BLEU and chrF, both cased, against
the catalogs' own strings.

Printed: the curve (training minutes, steps, BLEU, chrF per snapshot) and one result
row (the `best` checkpoint), as markdown; `--json` writes everything.

    python benchmarks/bench_translation.py                      # 15 minutes of training
    python benchmarks/bench_translation.py --budget 30 --model transformer-tiny
    python benchmarks/bench_translation.py --data gettext-long:es --checkpoint average
    python benchmarks/bench_translation.py --budget 0.2 --model transformer-tiny \\
        --set d_model=16 --train-size 200 --eval-size 20         # a smoke run
"""

import argparse
import ast
import datetime
import json
import os
import pathlib
import platform
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import sacrebleu  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402, F401 - registers the tokenizer ops for loading

from zoo import export as zoo_export  # noqa: E402
from zoo import runs  # noqa: E402


def parse_overrides(pairs):
    """`["d_model=16", "dropout=0.0"]` -> `{"d_model": 16, "dropout": 0.0}` (Python literals,
    else the text)."""
    overrides = {}
    for pair in pairs:
        key, _, raw = pair.partition("=")
        try:
            overrides[key.strip()] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            overrides[key.strip()] = raw
    return overrides


class Snapshots(keras.callbacks.Callback):
    """Save the model every `every_minutes` of training (wall time inside `fit`) and at
    the end; `taken` lists (minutes, step, path)."""

    def __init__(self, directory, every_minutes):
        super().__init__()
        self.directory = pathlib.Path(directory)
        self.every = 60.0 * every_minutes
        self.taken = []
        self.start = None
        self.steps = 0

    def on_train_begin(self, logs=None):
        self.start = time.monotonic()
        self.next = self.every

    def on_train_batch_end(self, batch, logs=None):
        self.steps += 1
        if time.monotonic() - self.start >= self.next:
            self.save()
            self.next += self.every

    def on_train_end(self, logs=None):
        if not self.taken or self.taken[-1][1] != self.steps:
            self.save()

    def save(self):
        minutes = (time.monotonic() - self.start) / 60.0
        path = self.directory / f"step{self.steps:07d}.keras"
        self.model.save(path)
        self.taken.append((minutes, self.steps, path))


def translate(signature, sentences, batch_size):
    """Strings through the SavedModel signature, `batch_size` at a time, in order of
    length (less padding; the translations come back in the order given)."""
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    out = [None] * len(sentences)
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        texts = tf.constant([sentences[i] for i in chunk])
        for i, t in zip(chunk, signature(text=texts)["translation"].numpy()):
            out[i] = t.decode("utf-8")
    return out


def score(export_dir, signature, pairs, batch_size):
    """Cased corpus BLEU and chrF of the SavedModel at `export_dir` on `pairs`."""
    loaded = tf.saved_model.load(str(export_dir))
    started = time.perf_counter()
    hypotheses = translate(loaded.signatures[signature], [s for s, _ in pairs], batch_size)
    references = [t for _, t in pairs]
    return {
        "bleu": sacrebleu.corpus_bleu(hypotheses, [references]).score,
        "chrf": sacrebleu.corpus_chrf(hypotheses, [references]).score,
        "translate_seconds": time.perf_counter() - started,
        "examples": [
            {"source": s, "reference": r, "translation": h}
            for (s, r), h in list(zip(pairs, hypotheses))[:3]
        ],
    }


def held_out(data, size, seed):
    """`size` test pairs (all when None), a fixed random subset."""
    pairs = list(data.test_pairs)
    if size is not None and size < len(pairs):
        index = np.random.default_rng(seed).permutation(len(pairs))[:size]
        pairs = [pairs[i] for i in sorted(index)]
    return pairs


def evaluate_snapshots(run_dir, snapshots, pairs, args, scratch):
    config = runs.read_config(run_dir)
    source, target = runs.load_tokenizers(run_dir, config)
    tokenizers = dict(tokenizer=source, target_tokenizer=None if target is source else target)
    curve = []
    for minutes, steps, path in snapshots:
        export_dir = zoo_export.export(
            str(path), pathlib.Path(scratch) / "snapshots" / path.stem,
            max_length=config["model_config"].get("max_length"), **tokenizers,
        )
        result = score(export_dir, args.signature, pairs, args.batch_size)
        curve.append(dict(minutes=minutes, steps=steps, bleu=result["bleu"], chrf=result["chrf"],
                          examples=result["examples"]))
        print(f"  {minutes:6.2f} min, step {steps}: BLEU {result['bleu']:.2f}, "
              f"chrF {result['chrf']:.2f} ({result['translate_seconds']:.0f} s to translate)",
              flush=True)
    return curve


def cpu_model():
    """The CPU's model name (`lscpu`'s "Model name"), else the architecture."""
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="transformer-small", help="registry name")
    parser.add_argument("--data", default="gettext:es",
                        help="a gettext:LANG or gettext-long:LANG spec (its messages of 12-60 "
                        "words)")
    parser.add_argument("--budget", type=float, default=15.0, help="training minutes (15)")
    parser.add_argument("--eval-every", type=float, default=None,
                        help="minutes between snapshots on the curve (default budget / 5)")
    parser.add_argument("--train-size", type=int, help="train on a random subset of the pairs")
    parser.add_argument("--batch-size", dest="train_batch_size", type=int,
                        help="training sentences per step (zoo train --batch-size; default 64)")
    parser.add_argument("--batch-tokens", type=int,
                        help="training batches of at most this many tokens (zoo train --batch-tokens)")
    parser.add_argument("--eval-size", type=int, default=1000,
                        help="held-out pairs scored (default 1000; 0 for all)")
    parser.add_argument("--translate-batch", dest="batch_size", type=int, default=64,
                        help="sentences per call to the SavedModel when scoring (64)")
    parser.add_argument("--signature", default="serving_default",
                        choices=("serving_default", "greedy"),
                        help="serving_default: beam search (4); greedy")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                        help="config override, as zoo train --set")
    parser.add_argument("--schedule", choices=("auto", "paper", "budget-linear", "budget-cosine"),
                        help="zoo train --schedule (default auto: budget-linear under the budget)")
    parser.add_argument("--warmup-ratio", type=float,
                        help="zoo train --warmup-ratio (the budget's share of warm-up steps)")
    parser.add_argument("--checkpoint", choices=("best", "last", "average"), default="best",
                        help="the run's checkpoint scored for the result row (default best)")
    parser.add_argument("--final-only", action="store_true",
                        help="the result row is the final snapshot's (no extra scoring of the "
                             "run's best checkpoint)")
    parser.add_argument("--out", help="run directory (default: a temporary one)")
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.budget <= 0:
        parser.error("--budget must be > 0 minutes")
    return args


def main(argv=None):
    args = parse_args(argv)
    every = args.eval_every or args.budget / 5
    command = f"python benchmarks/bench_translation.py {' '.join(sys.argv[1:] if argv is None else argv)}"
    print(f"# bench_translation.py, {datetime.datetime.now():%Y-%m-%d %H:%M}")
    print(f"command: {command}")
    print(f"{cpu_model()}, {os.cpu_count()} cores, "
          f"TensorFlow {tf.__version__}, 1-minute load average {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="bench_translation_") as scratch:
        run_dir = pathlib.Path(args.out or pathlib.Path(scratch) / "run")
        snapshots = Snapshots(pathlib.Path(scratch), every)
        result = runs.train(
            args.model, args.data, out=str(run_dir), overrides=parse_overrides(args.set),
            callbacks=[snapshots], time_limit=args.budget, epochs=10_000, seed=args.seed,
            train_size=args.train_size, batch_size=args.train_batch_size,
            batch_tokens=args.batch_tokens, schedule=args.schedule,
            warmup_ratio=args.warmup_ratio, verbose=0,
        )
        pairs = held_out(result.data, args.eval_size or None, args.seed)
        print(f"trained {result.train_seconds / 60:.1f} min ({snapshots.steps} steps, "
              f"{result.epochs} epochs, stopped by {result.stopped_by}); scoring "
              f"{len(pairs)} held-out pairs with `{args.signature}`", flush=True)
        curve = evaluate_snapshots(run_dir, snapshots.taken, pairs, args, scratch)
        if args.final_only:
            best, checkpoint = curve[-1], "final snapshot (--final-only)"
        elif (run_dir / "checkpoints" / f"{args.checkpoint}.keras").is_file():
            best_dir = runs.export_run(run_dir, to=pathlib.Path(scratch) / "best", quiet=True,
                                       checkpoint=args.checkpoint)
            checkpoint = args.checkpoint
        else:  # no epoch ended within the budget: the final snapshot
            best_dir = pathlib.Path(scratch) / "snapshots" / snapshots.taken[-1][2].stem / "1"
            checkpoint = f"final snapshot (no {args.checkpoint} checkpoint)"
        if not args.final_only:
            best = score(best_dir, args.signature, pairs, args.batch_size)
    row = dict(
        date=f"{datetime.date.today()}", command=command, model=args.model, data=args.data,
        budget_minutes=args.budget, train_minutes=result.train_seconds / 60,
        steps=snapshots.steps, epochs=result.epochs, train_pairs=len(result.data.train_pairs),
        test_pairs=len(pairs), signature=args.signature, checkpoint=checkpoint,
        bleu=best["bleu"], chrf=best["chrf"],
        curve=[{k: v for k, v in point.items() if k != "examples"} for point in curve],
        examples=best["examples"], cpu=cpu_model(),
        cores=os.cpu_count(),
    )
    report(row)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(row, indent=2, ensure_ascii=False))
    return row


def report(row):
    print()
    print("| training minutes | steps | BLEU (cased) | chrF |")
    print("|---|---|---|---|")
    for point in row["curve"]:
        print(f"| {point['minutes']:.2f} | {point['steps']} | {point['bleu']:.2f} | "
              f"{point['chrf']:.2f} |")
    print()
    print("| model | data | budget (min) | train pairs | test pairs | signature | "
          "BLEU (cased) | chrF |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| {row['model']} | {row['data']} | {row['budget_minutes']:g} | {row['train_pairs']} | "
          f"{row['test_pairs']} | `{row['signature']}` | {row['bleu']:.2f} | {row['chrf']:.2f} |")
    print(f"(scored: {row['checkpoint']}, exported and loaded as a SavedModel)")
    for example in row["examples"]:
        print(f"  {example['source']!r} -> {example['translation']!r} "
              f"(reference {example['reference']!r})")


if __name__ == "__main__":
    main()
