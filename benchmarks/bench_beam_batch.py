"""Batched decoding of a real trained Transformer by each engine (issue #65): the zoo's default
and `--jit` SavedModels against CTranslate2 (float32 and int8) on the same weights.

    python benchmarks/bench_beam_batch.py RUN_DIR [--sentences 256] [--batches 1 8 32]
        [--saved-model NAME=DIR ...] [--json OUT.json]

RUN_DIR is a trained Transformer run, e.g. `zoo train transformer-small --data gettext:es
--time-limit 15`. The script exports it (into a temporary folder) as `zoo export RUN` (the
default SavedModel), `zoo export RUN --jit`, `zoo export RUN --format ctranslate2` and the
same with `--quantize int8`; `--saved-model NAME=DIR` adds other SavedModels of the same run
(an export made by another version of the code, say). Each engine translates `--sentences`
sources spread evenly over the run's held-out test split (every k-th: the split runs from short
interface strings to long messages) at each batch size, greedily and with
beam 4 (the export's settings: its beam size, length penalty and limit), with output lengths
as the model produces them. Milliseconds per sentence: the best of `--rounds` passes after a
warm-up batch, the engines taking turns in each round; ratios to CTranslate2 float32 of the
same batch and search, in the same run;
BLEU (sacrebleu) of each engine against the references; and, for every SavedModel, how many
rows give the default export's ids. CTranslate2 runs in a process of its own with
`intra_threads` = the cores, one translation at a time, on its default CPU backend (MKL on
Intel, its own kernels elsewhere); TensorFlow with its default thread pools. Needs the `deploy` extra (ctranslate2).
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import sacrebleu
import tensorflow as tf

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from engine_processes import cpu_description  # noqa: E402 - after the path

from zoo import decode  # noqa: E402
from zoo.datasets.preparation import load_run_data  # noqa: E402
from zoo.export import ctranslate2_runtime  # noqa: E402
from zoo.runs import export_run  # noqa: E402
from zoo.runs.rundir import read_config  # noqa: E402

SEARCHES = {"greedy": 1, "beam": 4}
PAUSE = 1.0  # seconds between two engines' passes (`measure`)


class SavedModelEngine:
    """A SavedModel's `greedy` and `serving_default` (beam) signatures: text in, ids out."""

    def __init__(self, path, end_id, pad_id):
        import tensorflow_text  # noqa: F401 - the tokenizer ops

        self.loaded = tf.saved_model.load(str(path))
        self.end_id, self.pad_id = end_id, pad_id

    def __call__(self, texts, search):
        signature = self.loaded.signatures["greedy" if search == "greedy" else "serving_default"]
        outputs = signature(text=tf.constant(texts))
        return (decode.strip_special(outputs["tokens"], self.end_id, self.pad_id),
                [text.decode("utf-8") for text in outputs["translation"].numpy().tolist()])


class CTranslate2Engine:
    """A CTranslate2 export, `translate_batch` with the export's options, in a process of its
    own (`--ctranslate2-worker`): in the process that runs the SavedModels, right after them,
    its threads met TensorFlow's and it ran 2-5x slower."""

    def __init__(self, path):
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--ctranslate2-worker", str(path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if self.process.stdout.readline().strip() != "ready":
            raise SystemExit(f"the CTranslate2 worker did not start ({self.process.wait()})")

    def __call__(self, texts, search):
        self.process.stdin.write(json.dumps({"texts": texts, "search": search}) + "\n")
        self.process.stdin.flush()
        reply = json.loads(self.process.stdout.readline())
        return reply["ids"], reply["translations"]


def ctranslate2_worker(path):
    """Serve `CTranslate2Engine`'s requests (JSON lines on stdin) with the export at `path`."""
    exported = ctranslate2_runtime.load(path, intra_threads=os.cpu_count(), inter_threads=1)
    print("ready", flush=True)
    for line in sys.stdin:
        job = json.loads(line)
        ids = exported.translate_ids(job["texts"], beam_size=SEARCHES[job["search"]],
                                     max_batch_size=len(job["texts"]))
        print(json.dumps({"ids": ids, "translations": exported.detokenize(ids)}), flush=True)
    return 0


def engines(args, work):
    """`{name: engine}`: the run's four exports, then `--saved-model`s."""
    config = read_config(args.run)
    ids = config["model_config"]
    end_id, pad_id = ids["end_id"], ids["pad_id"]
    made = {
        "saved-model": SavedModelEngine(export_run(args.run, to=work / "default", quiet=True),
                                        end_id, pad_id),
        "saved-model-jit": SavedModelEngine(
            export_run(args.run, to=work / "jit", jit_compile=True, quiet=True), end_id, pad_id),
        "ct2-float32": CTranslate2Engine(
            export_run(args.run, to=work / "ct2", format="ctranslate2", quiet=True)),
        "ct2-int8": CTranslate2Engine(
            export_run(args.run, to=work / "ct2-int8", format="ctranslate2", quantize="int8",
                       quiet=True)),
    }
    for item in args.saved_model:
        name, _, path = item.partition("=")
        made[name] = SavedModelEngine(path, end_id, pad_id)
    return made


def one_pass(engine, texts, batch, search):
    """`(seconds, ids, translations)` of one pass over `texts` in batches of `batch`."""
    rows, outputs = [], []
    start = time.perf_counter()
    for i in range(0, len(texts), batch):
        ids, translated = engine(texts[i:i + batch], search)
        rows += ids
        outputs += translated
    return time.perf_counter() - start, rows, outputs


def measure(made, texts, batch, search, rounds, pause=PAUSE):
    """`{name: (ms per sentence, ids, translations)}`: each engine's best of `rounds` passes,
    the engines taking turns in each round (so that a change in the machine's load during
    the run falls on all of them alike), `pause` seconds apart: the threads of the engine
    before may still spin for work (Intel's OpenMP, which CTranslate2 uses, for 200 ms)."""
    for engine in made.values():
        engine(texts[:batch], search)  # warm-up: the first call of a shape compiles or traces
    best = {}
    for _ in range(rounds):
        for name, engine in made.items():
            time.sleep(pause)
            seconds, rows, outputs = one_pass(engine, texts, batch, search)
            if name not in best or seconds < best[name][0]:
                best[name] = (seconds, rows, outputs)
    return {name: (1000.0 * seconds / len(texts), rows, outputs)
            for name, (seconds, rows, outputs) in best.items()}


def run(args):
    config = read_config(args.run)
    _, data = load_run_data(config, quiet=True)
    step = max(1, len(data.test_pairs) // args.sentences)  # spread over the split's lengths
    pairs = data.test_pairs[::step][:args.sentences]
    texts, references = [s for s, _ in pairs], [t for _, t in pairs]
    results = {"machine": cpu_description(), "run": str(args.run), "sentences": len(texts),
               "rows": {}}
    print(f"{args.run}: {len(texts)} held-out sentences; {results['machine']}", flush=True)
    with tempfile.TemporaryDirectory() as work:
        made = engines(args, pathlib.Path(work))
        for batch in args.batches:
            for search in SEARCHES:
                measured = measure(made, texts, batch, search, args.rounds)
                reference = measured["saved-model"][1]
                for name, (ms, ids, outputs) in measured.items():
                    bleu = sacrebleu.corpus_bleu(outputs, [references]).score
                    same = sum(a == b for a, b in zip(ids, reference))
                    results["rows"][f"{name}|{search}|{batch}"] = {
                        "ms": ms, "bleu": bleu, "same_ids_as_default": same}
                    print(f"{name:>18} {search:>6} batch {batch:>2}: {ms:7.1f} ms/sentence, "
                          f"BLEU {bleu:5.2f}, {same}/{len(ids)} ids as the default export's",
                          flush=True)
    return results


def table(results):
    """Markdown: ms per sentence and the ratio to CTranslate2 float32, per engine."""
    rows = results["rows"]
    names = list(dict.fromkeys(key.split("|")[0] for key in rows))  # as measured
    columns = sorted({tuple(key.split("|")[1:]) for key in rows},
                     key=lambda c: (int(c[1]), c[0]))
    head = " | ".join(f"{search} {batch}" for search, batch in columns)
    lines = [f"| engine | {head} | BLEU (beam 4) |", "|---" * (len(columns) + 2) + "|"]
    for name in names:
        cells = []
        for search, batch in columns:
            row, ct2 = rows[f"{name}|{search}|{batch}"], rows[f"ct2-float32|{search}|{batch}"]
            cells.append(f"{row['ms']:.1f} ({row['ms'] / ct2['ms']:.2f}×)")
        bleu = rows[f"{name}|beam|{columns[-1][1]}"]["bleu"]
        lines.append(f"| {name} | {' | '.join(cells)} | {bleu:.2f} |")
    return "\n".join(lines)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=pathlib.Path)
    parser.add_argument("--sentences", type=int, default=256)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--saved-model", action="append", default=[], metavar="NAME=DIR")
    parser.add_argument("--json", type=pathlib.Path)
    return parser.parse_args(argv)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--ctranslate2-worker"]:
        return ctranslate2_worker(argv[1])
    args = parse_args(argv)
    results = run(args)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
