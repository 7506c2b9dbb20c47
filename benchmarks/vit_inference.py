"""ViT inference against the engines users deploy: timm, ONNX Runtime (issue #32, part 2).

    python benchmarks/bench_inference.py vit [--rounds 3] [--images 32]
        [--batch1-images 8] [--batches 1,32] [--threads N] [--quick]

Needs the `bench` extra (torch, torchvision, timm, onnx, onnxruntime); the engines of the zoo's
LiteRT, ONNX and OpenVINO exports (`--engines ...,litert,onnxruntime-zoo,openvino`, see
`DEPLOY_ENGINES`) need the `deploy` extra too. No network: the model and the images are random,
made on the machine.

Model: timm's `vit_base_patch16_224` (86M parameters, 224x224, 1,000 classes), random
weights from `--seed` (`pretrained=False`), saved as a timm state dict (safetensors) and
read into the zoo through its timm importer, `zoo.get("vit-b16", weights=PATH)`;
`--quick`: a one-block ViT of width 32 at 224x224. Images: `--images` random uint8 RGB
images from the seed, 224x224.

Engines (`benchmarks/vit_engines.py`, one process each, all idle but one, `--threads`
threads each): the zoo's default export and its `jit_compile=True` (`zoo export --jit`)
export, loaded with `tf.saved_model.load` in a process that never imports the zoo; timm
on PyTorch (eval, `torch.inference_mode()`); ONNX Runtime on timm's model exported with
`torch.onnx.export` (CPU provider); and, asked for by name, the zoo's LiteRT, ONNX (tf2onnx)
and OpenVINO exports in their runtimes, float32 and int8 (`zoo export --format`, issue #51).
All take the same uint8 images and normalise them the same way (vit_engines.py says where).

First, the check on the first `--check` images (one batch): each engine's max |log p -
log p_timm| over all classes, log p being the log-softmax of the logits (the exports
return softmax probabilities, not logits: their log is the logits less each row's
log-sum-exp, so this compares logits up to that shift); every engine must be within
`TOLERANCE` of timm, or the run stops, but for those of `APPROXIMATE` (int8, bfloat16), whose
difference is printed and not held to it. Then at each batch size, after a warm-up (one
batch, which compiles the XLA export for that batch size): every round times each
engine once over the same images (`--batch1-images` at batch 1), the order reversed every
other round. The table gives medians over rounds: images/s, ms per image and the median
per-round ratio of the engine's time to timm's (2.0 = twice as slow).
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
from engine_processes import HERE, Engine, cpu_description, with_defaults

ENGINES = ("saved-model", "saved-model-jit", "timm", "onnxruntime")
# The zoo's exports in the formats' runtimes (vit_engines.FORMAT_ENGINES; the deploy extra).
DEPLOY_ENGINES = ("litert", "onnxruntime-zoo", "openvino", "openvino-bf16", "litert-int8",
                  "onnxruntime-zoo-int8")
APPROXIMATE = ("openvino-bf16", "litert-int8", "onnxruntime-zoo-int8")
BASELINE = "timm"
TOLERANCE = 1e-4
SCRIPT = "vit_engines.py"
QUICK = dict(size="tiny", images=4, batch1_images=2, check=4, rounds=1, batches=(1, 2))
# ~0.8 s per ViT-B/16 image on 2 shared cores: one batch of 32 and 8 images at batch 1 per round
FULL = dict(size="full", images=32, batch1_images=8, check=4, rounds=3, batches=(1, 32))


def prepare(args, work):
    """The images, the timm state dict and its ONNX export, and the zoo's two exports."""
    rng = np.random.default_rng(args.seed)
    count = max(args.images, args.check)
    np.save(work / "images.npy", rng.integers(0, 256, (count, 224, 224, 3), dtype=np.uint8))
    (work / "timm").mkdir()
    settings = dict(
        size=args.size, seed=args.seed, threads=args.threads, images=str(work / "images.npy"),
        timm=str(work / "timm" / "model.safetensors"), onnx=str(work / "model.onnx"),
        export=str(work / "export" / "1"), export_jit=str(work / "export_jit" / "1"),
        formats={engine: str(work / ("openvino" if engine == "openvino-bf16" else engine) / "1")
                 for engine in args.engines if engine in DEPLOY_ENGINES})
    path = work / "settings.json"
    path.write_text(json.dumps(settings))
    script = str(HERE / SCRIPT)
    subprocess.run([sys.executable, script, "write-timm", str(path)], check=True, cwd=tempfile.gettempdir())
    if {"saved-model", "saved-model-jit", *DEPLOY_ENGINES} & set(args.engines):
        env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
        subprocess.run([sys.executable, str(HERE / "vit_zoo_export.py"), str(path)], check=True,
                       cwd=HERE.parent, env=env)
    return path


def check_outputs(engines, count):
    """Each engine's max |log p - log p_timm| on the first `count` images; stops above TOLERANCE."""
    outputs = {name: np.asarray(engine.send(dict(batch=count, count=count, outputs=True))["log_probs"])
               for name, engine in engines.items()}
    reference = outputs[BASELINE]
    print(f"\nCheck, first {count} images, one batch: max |log p - log p_{BASELINE}| over "
          f"{reference.shape[1]} classes (log p = log-softmax of the logits; {BASELINE}'s logits "
          f"spread: std {np.std(reference):.3f}), tolerance {TOLERANCE:g}")
    failed = []
    for name, log_probs in outputs.items():
        difference = float(np.abs(log_probs - reference).max())
        held = name not in APPROXIMATE
        print(f"  {name:20s} max |diff| {difference:.2e}{'' if held else '  (not held to it)'}")
        if held and not difference <= TOLERANCE:
            failed.append(name)
    if failed:
        raise SystemExit(f"{', '.join(failed)}: outputs differ from {BASELINE}'s by more than {TOLERANCE:g}")


def measure(engines, counts, rounds):
    """{batch: {engine: [seconds per round]}}; `counts[batch]`: the images timed at that size."""
    names = list(engines)
    times = {batch: {name: [] for name in names} for batch in counts}
    for batch in counts:  # warm-up: the XLA export compiles once per batch size
        for name in names:
            engines[name].send(dict(batch=batch, count=batch))
        print(f"  warm-up batch {batch} done", flush=True)
    for r in range(rounds):
        order = names if r % 2 == 0 else names[::-1]
        for batch, count in counts.items():
            for name in order:
                times[batch][name].append(engines[name].send(dict(batch=batch, count=count))["seconds"])
        print(f"  round {r + 1}/{rounds} done", flush=True)
    return times


def report(times, counts):
    print(f"\n{'batch':>5s}  {'engine':20s} {'images/s':>9s} {'ms/image':>9s} {'x timm time':>12s}")
    for batch, by_engine in times.items():
        count = counts[batch]
        for name, seconds in by_engine.items():
            ratio = statistics.median(s / b for s, b in zip(seconds, by_engine[BASELINE]))
            median = statistics.median(seconds)
            print(f"{batch:5d}  {name:20s} {count / median:9.2f} {1000 * median / count:9.2f} {ratio:12.2f}")


def vit(args):
    print(f"CPU: {cpu_description()}; every engine with {args.threads} threads")
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        started = time.perf_counter()
        settings_path = prepare(args, pathlib.Path(tmp))
        counts = {batch: args.batch1_images if batch == 1 else args.images for batch in args.batches}
        print(f"model: {'timm vit_base_patch16_224' if args.size == 'full' else 'tiny ViT (1 block, width 32)'}"
              f", 224x224; images timed per round: "
              f"{', '.join(f'{c} at batch {b}' for b, c in counts.items())}; prepared in "
              f"{time.perf_counter() - started:.0f} s", flush=True)
        engines = {}
        try:
            for name in args.engines:
                engines[name] = Engine(name, settings_path, script=SCRIPT)
            check_outputs(engines, args.check)
            times = measure(engines, counts, args.rounds)
        finally:
            for engine in engines.values():
                engine.close()
        report(times, counts)


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="bench_inference.py vit", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a tiny ViT, one round (smoke test)")
    parser.add_argument("--images", type=int, help="images timed per round at batch > 1 (default 32)")
    parser.add_argument("--batch1-images", type=int, help="images timed per round at batch 1 (default 8)")
    parser.add_argument("--check", type=int, help="images of the output check (default 4)")
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--batches", type=lambda s: tuple(int(b) for b in s.split(",")))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--engines", type=lambda s: s.split(","), default=list(ENGINES))
    parser.add_argument("--workdir", help="where the weights, the ONNX file and the exports are written")
    args = with_defaults(parser.parse_args(argv), QUICK, FULL)
    if BASELINE not in args.engines:
        parser.error(f"--engines must include {BASELINE}")
    for batch in args.batches:
        count = args.batch1_images if batch == 1 else args.images
        if count % batch:
            parser.error(f"batch {batch}: {count} images are not whole batches")
    if args.batch1_images > args.images:
        parser.error("--batch1-images must be at most --images")
    return args


def main(argv=None):
    vit(parse_args(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    main()
