"""Inference speed against the engines users deploy: CTranslate2, transformers, timm, ONNX
Runtime (issue #32).

    python benchmarks/bench_inference.py translation [--folder HF_MARIAN_FOLDER]
        [--sentences 500] [--rounds 3] [--length 32] [--quick]
    python benchmarks/bench_inference.py vit [--rounds 3] [--quick]   # see vit_inference.py

The `vit` part (the zoo's two ViT exports, timm on PyTorch, ONNX Runtime; with `--engines`, the
zoo's LiteRT, ONNX and OpenVINO exports too, issue #51) is `benchmarks/vit_inference.py`; what
follows is the translation part.

Needs the `bench` extra (`pip install -e .[bench]`: torch, transformers, ctranslate2,
sentencepiece, ...). No network: sources and the random model are made on the machine.

Model: opus-mt-en-de's configuration (d_model 512, 6+6 layers, 8 heads, FFN 2048,
vocabulary 58,101, swish, shared tied embeddings), random weights from `--seed`, written
as a Hugging Face Marian folder by `benchmarks/marian_folder.py` (its SentencePiece
models are trained on the catalogs' text); `--folder` takes a real one instead.
Sources: `--sentences` English msgids of the machine's gettext catalogs
(`zoo.datasets.catalogs`, 8 to 40 words, shuffled with the seed).

Engines (`benchmarks/inference_engines.py`, one process each, all idle but one): the zoo
in-process (`zoo.decode`, XLA), the default export and the `--jit` export
(`tf.saved_model.load` in a process that never imports the zoo), transformers
`MarianMTModel.generate` on PyTorch, CTranslate2 float32 and int8 (converted from the
same folder by CTranslate2's transformers converter), and CTranslate2 float32 and int8 from
the zoo's own export (`ct2-zoo-float32`, `ct2-zoo-int8`: `zoo import --format ctranslate2`,
issue #51; the same weights, so they should match); on request (`--engines`), the default and
the `--jit` export with int8 weights (`saved-model-int8`, `saved-model-jit-int8`: `zoo import
--quantize int8`). Every
engine gets text and returns token ids and text, with `--threads` threads (default: all cores), and generates `--length` tokens per sentence (the random
folder never makes `</s>` likely; nothing forces `</s>` at the limit).

First, greedy on the first `--check` sentences: the rows of token ids equal to
transformers' and the mean output length, per engine (a speed figure over different
outputs is worthless). Then greedy and beam 4 at each batch size: every round times each
engine once over the same sentences (`--batch1-sentences` fewer at batch 1), the order
reversed every other round, after an untimed warm-up (one call; the XLA engines all
the timed sentences, so that every source bucket is compiled). The table gives medians
over rounds: sentences/s, ms per sentence, the median per-round ratio of the engine's
time to CTranslate2 float32's (2.0 = twice as slow), and the rows of the first round
equal to transformers' token ids.
"""

import argparse
import json
import os
import pathlib
import random
import statistics
import subprocess
import sys
import tempfile
import time

import vit_inference  # this directory is on sys.path: the script's own
from engine_processes import HERE, SAVED_MODELS, Engine, cpu_description, with_defaults

from zoo.datasets import catalogs

ENGINES = ("zoo", "saved-model", "saved-model-jit", "transformers", "ct2-float32", "ct2-int8",
           "ct2-zoo-float32", "ct2-zoo-int8")
REFERENCE, BASELINE = "transformers", "ct2-float32"
XLA = ("zoo", "saved-model-jit", "saved-model-jit-int8")  # warmed up on every timed sentence: one compilation per bucket
QUICK = dict(size="tiny", sentences=8, check=8, length=8, rounds=1, batches=(1, 4))
FULL = dict(size="full", sentences=500, check=50, length=32, rounds=3, batches=(1, 32))


def catalog_sentences(count, seed, language="de"):
    """`count` English msgids of 8-40 words (shuffled), and all kept pairs' two sides."""
    train, test, _ = catalogs.gettext_pairs(language, min_words=8, max_words=40, test_ratio=0.0)
    pairs = sorted(set(train + test))
    random.Random(seed).shuffle(pairs)
    if len(pairs) < count:
        raise SystemExit(f"only {len(pairs)} catalog sentences of 8-40 words; asked for {count}")
    return [source for source, _ in pairs[:count]], pairs


def run(args, **kwargs):
    subprocess.run([str(a) for a in args], check=True, **kwargs)


def prepare(args, work):
    """The folder (random unless --folder), the zoo's exports (SavedModels, CTranslate2) and
    CTranslate2's own conversion."""
    sentences, pairs = catalog_sentences(args.sentences, args.seed)
    (work / "sentences.json").write_text(json.dumps(sentences, ensure_ascii=False))
    folder = pathlib.Path(args.folder) if args.folder else work / "marian"
    if not args.folder:
        for i, side in enumerate(("sources", "targets")):
            (work / f"{side}.json").write_text(json.dumps([p[i] for p in pairs], ensure_ascii=False))
        run([sys.executable, HERE / "marian_folder.py", folder, args.size, args.seed,
             work / "sources.json", work / "targets.json"])
    exports = [SAVED_MODELS[name] for name in args.engines if name in SAVED_MODELS]
    if any(name.startswith("ct2-zoo") for name in args.engines):
        exports.append("ct2_zoo")  # the zoo's CTranslate2 export, float32 (int8 when loaded)
    export = ("import sys; from zoo.transformer.weights import marian; "
              "[marian.export_folder(sys.argv[1], sys.argv[2] + '/' + key, 1, "
              "jit_compile='jit' in key, quantize='int8' if 'int8' in key else None, "
              "format='ctranslate2' if key == 'ct2_zoo' else 'savedmodel', "
              "max_new_tokens=int(sys.argv[3]), force_end=False) for key in sys.argv[4:]]")
    if exports:
        run([sys.executable, "-c", export, folder, work, args.length, *exports],
            cwd=HERE.parent, env={**os.environ, "PYTHONPATH": str(HERE.parent)})
    run([sys.executable, "-m", "ctranslate2.converters.transformers", "--model", folder,
         "--output_dir", work / "ct2", "--force"], stdout=subprocess.DEVNULL)
    config = json.loads((folder / "config.json").read_text())
    settings = dict(
        folder=str(folder), ct2=str(work / "ct2"), ct2_zoo=str(work / "ct2_zoo" / "1"),
        **{key: str(work / key / "1") for key in SAVED_MODELS.values()}, sentences=str(work / "sentences.json"), threads=args.threads,
        length=args.length, pad_id=config["pad_token_id"],
        max_source=config["max_position_embeddings"],
    )
    (work / "settings.json").write_text(json.dumps(settings))
    return work / "settings.json", config


def check_outputs(engines, count, batch):
    """Greedy on the first `count` sentences: rows equal to transformers', mean length."""
    results = {name: engine.request("greedy", batch, count)["ids"] for name, engine in engines.items()}
    reference = results[REFERENCE]
    print(f"\nGreedy check, first {count} sentences, batch {batch}: rows with token ids equal to "
          f"{REFERENCE}'s, and the mean output length (tokens without </s>)")
    for name, ids in results.items():
        same = sum(a == b for a, b in zip(ids, reference))
        mean = statistics.mean(len(row) for row in ids)
        print(f"  {name:16s} {same:3d}/{len(ids)} equal   mean length {mean:.1f}")
    return results


def measure(engines, configs, counts, rounds):
    """{config: {engine: [seconds per round]}} and {config: {engine: rows equal to REFERENCE}}
    (in the first round). `counts[batch]`: the sentences timed at that batch size."""
    names = list(engines)
    times = {config: {name: [] for name in names} for config in configs}
    agree = {}
    for search, batch in configs:  # warm-up: XLA compiles one program per bucket it meets
        for name in names:
            engines[name].request(search, batch, counts[batch] if name in XLA else batch)
        print(f"  warm-up {search} batch {batch} done", flush=True)
    for r in range(rounds):
        order = names if r % 2 == 0 else names[::-1]
        for config in configs:
            replies = {name: engines[name].request(*config, counts[config[1]]) for name in order}
            for name, reply in replies.items():
                times[config][name].append(reply["seconds"])
            if r == 0:
                agree[config] = {name: sum(a == b for a, b in zip(replies[name]["ids"], replies[REFERENCE]["ids"]))
                                 for name in names}
        print(f"  round {r + 1}/{rounds} done", flush=True)
    return times, agree


def report(times, agree, counts):
    print(f"\n{'search':7s} {'batch':>5s}  {'engine':16s} {'sent/s':>8s} {'ms/sent':>9s} "
          f"{'x CT2 f32 time':>14s} {'rows = HF':>10s}")
    for (search, batch), by_engine in times.items():
        count = counts[batch]
        for name, seconds in by_engine.items():
            ratio = statistics.median(s / b for s, b in zip(seconds, by_engine[BASELINE]))
            median = statistics.median(seconds)
            print(f"{search:7s} {batch:5d}  {name:16s} {count / median:8.2f} {1000 * median / count:9.1f} "
                  f"{ratio:14.2f} {agree[(search, batch)][name]:6d}/{count}")


def translation(args):
    print(f"CPU: {cpu_description()}; every engine with {args.threads} threads")
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        work = pathlib.Path(tmp)
        started = time.perf_counter()
        settings_path, config = prepare(args, work)
        print(f"model: d_model {config['d_model']}, {config['encoder_layers']}+{config['decoder_layers']} "
              f"layers, vocabulary {config['vocab_size']}; {args.sentences} sentences, {args.length} "
              f"tokens each; prepared in {time.perf_counter() - started:.0f} s", flush=True)
        engines = {}
        try:
            for name in args.engines:
                engines[name] = Engine(name, settings_path)
            check_outputs(engines, min(args.check, args.sentences), max(args.batches))
            configs = [(search, batch) for search in ("greedy", "beam") for batch in args.batches]
            counts = {batch: args.sentences for batch in args.batches}
            if args.batch1_sentences and 1 in counts:
                counts[1] = min(args.batch1_sentences, args.sentences)
            times, agree = measure(engines, configs, counts, args.rounds)
        finally:
            for engine in engines.values():
                engine.close()
        report(times, agree, counts)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("part", choices=["translation", "vit"])
    parser.add_argument("--folder", help="a Hugging Face Marian folder instead of the random one")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, one round (smoke test)")
    parser.add_argument("--sentences", type=int)
    parser.add_argument("--check", type=int, help="sentences of the greedy check (default 50)")
    parser.add_argument("--length", type=int, help="tokens generated per sentence (default 32)")
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--batches", type=lambda s: tuple(int(b) for b in s.split(",")))
    parser.add_argument("--batch1-sentences", type=int,
                        help="time batch 1 on the first N sentences only (default: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--engines", type=lambda s: s.split(","), default=list(ENGINES))
    parser.add_argument("--workdir", help="where the folder, exports and conversion are written")
    args = with_defaults(parser.parse_args(argv), QUICK, FULL)
    for name in (REFERENCE, BASELINE):
        if name not in args.engines:
            parser.error(f"--engines must include {name}")
    return args


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["vit"]:
        vit_inference.main(argv[1:])
        return
    args = parse_args(argv)
    translation(args)


if __name__ == "__main__":
    main()
