"""Batched decoding of a real trained Transformer by each engine (issue #65): the zoo's default
and `--jit` SavedModels against CTranslate2 (float32 and int8) on the same weights.

    python benchmarks/bench_beam_batch.py RUN_DIR [--sentences 256] [--batches 1 8 32]
        [--saved-model NAME=DIR ...] [--ctranslate2-env KEY=VALUE ...] [--json OUT.json]

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
`intra_threads` = the cores, one translation at a time, on the CPU backend it chooses by
default: Intel's MKL on Intel CPUs; oneDNN (DNNL) SGEMM with AVX2 kernels elsewhere, as on the
AMD EPYC VMs, where MKL (`CT2_USE_MKL=1`) ran 2-8x slower and `CT2_FORCE_CPU_ISA=AVX512` within
noise of the default. The output names the backend each CTranslate2 process chose (ISA, GEMM
backend, compute type: from its log at `CT2_VERBOSE=1`), under the table and in the JSON
(`ctranslate2_backend`); `--ctranslate2-env KEY=VALUE` (repeatable) sets an environment
variable in the CTranslate2 processes only, e.g. `CT2_USE_MKL=1` or `CT2_FORCE_CPU_ISA=AVX512`
to try another backend. TensorFlow with its default thread pools. Needs the `deploy` extra
(ctranslate2).
"""

import argparse
import json
import os
import pathlib
import re
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
from zoo.cli import quiet  # noqa: E402
from zoo.datasets.preparation import load_run_data  # noqa: E402
from zoo.export import ctranslate2_runtime  # noqa: E402
from zoo.runs import export_run  # noqa: E402
from zoo.runs.rundir import read_config  # noqa: E402

SEARCHES = {"greedy": 1, "beam": 4}
PAUSE = 1.0  # seconds between two engines' passes (`measure`)
# The lines of CTranslate2's log (spdlog, `CT2_VERBOSE=1`) at its first model load that name its
# backend, and the key each gets in `CTranslate2Engine.backend`.
BACKEND_LINES = {"CPU": "cpu", "Selected ISA": "isa", "Use Intel MKL": "mkl",
                 "SGEMM backend": "sgemm", "GEMM_S16 backend": "gemm_s16",
                 "GEMM_S8 backend": "gemm_s8", "Selected compute type": "compute_type"}
INFO_LINE = re.compile(r"\[ctranslate2\].*\[info\]\s+(?:- )?(?P<key>[^:]+):\s*(?P<value>.*)$")


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
    its threads met TensorFlow's and it ran 2-5x slower. `env` goes into that process's
    environment (`--ctranslate2-env`); `backend` is what its CTranslate2 chose
    (`parse_backend`)."""

    def __init__(self, path, env=None):
        # CT2_VERBOSE last, over an `env` that sets it: without its log the worker cannot
        # name the backend.
        env = {**os.environ, **(env or {}), "CT2_VERBOSE": "1"}
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--ctranslate2-worker", str(path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        word, _, backend = self.process.stdout.readline().strip().partition(" ")
        if word != "ready":
            raise SystemExit(f"the CTranslate2 worker did not start ({self.process.wait()})")
        self.backend = json.loads(backend or "{}")

    def __call__(self, texts, search):
        self.process.stdin.write(json.dumps({"texts": texts, "search": search}) + "\n")
        self.process.stdin.flush()
        reply = json.loads(self.process.stdout.readline())
        return reply["ids"], reply["translations"]


def parse_backend(log):
    """`{"cpu", "isa", "mkl", "sgemm", "gemm_s16", "gemm_s8", "compute_type"}` (those present)
    from CTranslate2's log at `CT2_VERBOSE=1`: the CPU's vendor, the backends' names without
    their details ("DNNL", not "DNNL (packed: false)"), MKL as a bool."""
    backend = {}
    for line in log.splitlines():
        match = INFO_LINE.search(line)
        key = match and BACKEND_LINES.get(match["key"].strip())
        if key:
            value = match["value"].strip()
            if key == "mkl":
                value = value == "true"
            elif key != "compute_type":
                value = value.split(" (")[0]  # "DNNL (packed: false)", "AuthenticAMD (SSE4.1=..."
            backend[key] = value
    return backend


def describe_backend(backend):
    """`SGEMM DNNL, ISA AVX2 (float32)`: the GEMM backend that the compute type uses (GEMM_S8
    for int8 weights, SGEMM for float32), the ISA of CTranslate2's own kernels, the type."""
    if not backend:
        return "not named (no CTranslate2 log)"
    compute = backend.get("compute_type", "")
    gemm = "gemm_s8" if compute.startswith("int8") else (
        "gemm_s16" if compute.startswith("int16") else "sgemm")
    return (f"{gemm.upper()} {backend.get(gemm, '?')}, ISA {backend.get('isa', '?')}"
            f" ({compute or '?'})")


def backend_line(results):
    """`CTranslate2 backend: ...`: `describe_backend` of each CTranslate2 engine in `results`,
    and the `--ctranslate2-env` it ran with."""
    described = "; ".join(describe_backend(backend)
                          for backend in results["ctranslate2_backend"].values())
    env = " ".join(f"{key}={value}" for key, value in results.get("ctranslate2_env", {}).items())
    return f"CTranslate2 backend: {described}" + (f" (env {env})" if env else "")


def load_logged(path):
    """`(exported, backend)`: the export at `path` loaded with CTranslate2's log caught and
    parsed. Its C++ logger writes to fd 2, not to `sys.stderr`: fd 2 points at a file during
    the load; what else was written there (a warning, an error) goes on to stderr after."""
    logs = []

    def release(log):
        logs.append(log)
        sys.stderr.write("".join(line for line in log.splitlines(keepends=True)
                                 if not ("[ctranslate2]" in line and "[info]" in line)))

    with quiet.fd2_captured(release):
        exported = ctranslate2_runtime.load(path, intra_threads=os.cpu_count(), inter_threads=1)
    (log,) = logs
    return exported, parse_backend(log)


def ctranslate2_worker(path):
    """Serve `CTranslate2Engine`'s requests (JSON lines on stdin) with the export at `path`,
    after a `ready {backend}` line."""
    exported, backend = load_logged(path)
    print("ready", json.dumps(backend), flush=True)
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
    env = dict(args.ctranslate2_env)
    made = {
        "saved-model": SavedModelEngine(export_run(args.run, to=work / "default", quiet=True),
                                        end_id, pad_id),
        "saved-model-jit": SavedModelEngine(
            export_run(args.run, to=work / "jit", jit_compile=True, quiet=True), end_id, pad_id),
        "ct2-float32": CTranslate2Engine(
            export_run(args.run, to=work / "ct2", format="ctranslate2", quiet=True), env),
        "ct2-int8": CTranslate2Engine(
            export_run(args.run, to=work / "ct2-int8", format="ctranslate2", quantize="int8",
                       quiet=True), env),
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
               "ctranslate2_env": dict(args.ctranslate2_env), "rows": {}}
    with tempfile.TemporaryDirectory() as work:
        made = engines(args, pathlib.Path(work))
        results["ctranslate2_backend"] = {name: engine.backend for name, engine in made.items()
                                          if isinstance(engine, CTranslate2Engine)}
        print(f"{args.run}: {len(texts)} held-out sentences; {results['machine']}; "
              f"{backend_line(results)}", flush=True)
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


def env_item(text):
    """`("KEY", "VALUE")` of a `--ctranslate2-env KEY=VALUE`."""
    key, equals, value = text.partition("=")
    if not equals or not key or any(c.isspace() for c in key):
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key, value


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=pathlib.Path)
    parser.add_argument("--sentences", type=int, default=256)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--saved-model", action="append", default=[], metavar="NAME=DIR")
    parser.add_argument("--ctranslate2-env", action="append", default=[], type=env_item,
                        metavar="KEY=VALUE",
                        help="an environment variable of the CTranslate2 processes, e.g. "
                             "CT2_USE_MKL=1 or CT2_FORCE_CPU_ISA=AVX512 (repeatable)")
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
    print(backend_line(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
