"""The ViT's LiteRT, ONNX and OpenVINO exports against its SavedModel (issue #51): parity first,
then what `--quantize int8` costs.

    python benchmarks/vit_formats.py RUN_DIR [--images 256] [--accuracy] [--batch-size 256]
    python benchmarks/vit_formats.py --vit-b16 [--images 256] [--seed 0]

Needs the `deploy` extra (`pip install -e '.[deploy]'`). Every export is written by
`zoo.export` into a temporary folder and run by `zoo.export.runtimes` (each format in its own
runtime; OpenVINO with the export's f32 inference precision); the SavedModel through
`tf.saved_model.load(...).signatures["serving_default"]`.

Parity: on the first `--images` images of the run's test split (a trained run; checkpoint
`best`), or on random uint8 images (`--vit-b16`: `zoo.get("vit-b16")` with random weights
from `--seed`, 224x224x3, 1,000 classes), in batches of `--batch-size`, each float32 format's
max |p - p_SavedModel| over all probabilities and max |log p - log p_SavedModel| (the
log-probabilities: the logits up to each row's shift), against `TOLERANCE` on the
probabilities; the script exits non-zero if a float32 format is above it. The int8 exports, and
OpenVINO at its CPU plugin's default precision (`openvino-bf16`: bfloat16 on CPUs with
AVX512_BF16 or AMX; `openvino` passes the export's f32 hint), are printed beside them and not
held to it. `--formats` limits the exports (default all).

`--accuracy` (a run): top-1 accuracy of the SavedModel and of every export, float32 and int8,
on the whole test split, and the share of images given the SavedModel's class.
"""

import argparse
import os
import pathlib
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import zoo  # noqa: E402
from zoo.datasets.preparation import load_run_data  # noqa: E402
from zoo.export import export, runtimes  # noqa: E402
from zoo.runs.rundir import load_run  # noqa: E402

TOLERANCE = 1e-4
EXPORTS = (("litert", None), ("litert", "int8"), ("onnx", None), ("onnx", "int8"),
           ("openvino", None))


def label(format_, quantize):
    return f"{format_}{'-int8' if quantize else ''}"


def model_and_data(args):
    """(model, class names, uint8 test images, their labels or None, a description)."""
    if args.vit_b16:
        keras.utils.set_random_seed(args.seed)
        model = zoo.get("vit-b16", compile=False)
        rng = np.random.default_rng(args.seed)
        images = rng.integers(0, 256, (args.images, 224, 224, 3), dtype=np.uint8)
        return model, None, images, None, f"vit-b16, random weights (seed {args.seed})"
    run = load_run(args.run_dir, "best")
    _, data = load_run_data(run.config, True)
    images = np.clip(np.round(data.x_test), 0, 255).astype(np.uint8)
    return (run.model, run.class_names, images, np.asarray(data.y_test),
            f"{run.name} run {args.run_dir}, {run.config['data']['spec']}")


def export_all(model, class_names, root, formats):
    """{label: export path}: the SavedModel and the EXPORTS of `formats`, with their write times."""
    paths = {}
    for format_, quantize in (("savedmodel", None), *(e for e in EXPORTS if e[0] in formats)):
        started = time.perf_counter()
        paths[label(format_, quantize)] = export(model, root / label(format_, quantize), format=format_,
                                                 quantize=quantize, class_names=class_names)
        size = sum(f.stat().st_size for f in paths[label(format_, quantize)].rglob("*") if f.is_file())
        print(f"  {label(format_, quantize):14s} written in {time.perf_counter() - started:5.1f} s, "
              f"{size / 2**20:7.1f} MiB", flush=True)
    return paths


def probabilities(paths, images, batch_size):
    """{label: probabilities (N, K)} of every export on `images`."""
    signature = tf.saved_model.load(str(paths["savedmodel"])).signatures["serving_default"]
    classify = {"savedmodel": lambda x: signature(images=tf.constant(x))["probabilities"].numpy()}
    for name, path in paths.items():
        if name != "savedmodel":
            classify[name] = runtimes.load(path).classify
    if "openvino" in paths:  # the plugin's default precision
        import openvino

        compiled = openvino.Core().compile_model(str(paths["openvino"] / "model.xml"), "CPU")
        classify["openvino-bf16"] = lambda x: compiled({"images": x})["probabilities"]
    outputs = {}
    for name, function in classify.items():
        started = time.perf_counter()
        outputs[name] = np.concatenate([function(images[i:i + batch_size])
                                        for i in range(0, len(images), batch_size)])
        print(f"  {name:14s} ran {len(images)} images in {time.perf_counter() - started:6.1f} s",
              flush=True)
    return outputs


def parity(outputs):
    reference = outputs["savedmodel"]
    log_reference = np.log(reference.astype(np.float64))
    print(f"\nParity with the SavedModel on {len(reference)} images ({reference.shape[1]} classes; "
          f"its log p spread: std {np.std(log_reference):.3f}), tolerance {TOLERANCE:g} on p:")
    failed = []
    for name, output in outputs.items():
        if name == "savedmodel":
            continue
        difference = float(np.abs(output - reference).max())
        log_difference = float(np.abs(np.log(output.astype(np.float64)) - log_reference).max())
        same = float(np.mean(output.argmax(-1) == reference.argmax(-1)))
        print(f"  {name:14s} max |p diff| {difference:.2e}   max |log p diff| {log_difference:.2e}"
              f"   same top class {100 * same:.1f}%")
        if "int8" not in name and "bf16" not in name and not difference <= TOLERANCE:
            failed.append(name)
    return failed


def accuracy(outputs, labels):
    reference = outputs["savedmodel"].argmax(-1)
    print(f"\nTop-1 accuracy on the {len(labels)} test images:")
    for name, output in outputs.items():
        predicted = output.argmax(-1)
        print(f"  {name:14s} {100 * np.mean(predicted == labels):6.2f}%   same class as the "
              f"SavedModel {100 * np.mean(predicted == reference):6.2f}%")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", nargs="?", help="a trained ViT run (zoo train --out)")
    parser.add_argument("--vit-b16", action="store_true", help="vit-b16 with random weights instead")
    parser.add_argument("--images", type=int, default=256, help="parity images (default 256)")
    parser.add_argument("--accuracy", action="store_true", help="a run: every export on the whole test split")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--formats", type=lambda s: s.split(","), default=["litert", "onnx", "openvino"])
    args = parser.parse_args(argv)
    if bool(args.run_dir) == args.vit_b16:
        parser.error("give a RUN_DIR or --vit-b16")
    if args.accuracy and args.vit_b16:
        parser.error("--accuracy needs a run's test split")
    model, class_names, images, labels, description = model_and_data(args)
    print(f"{description}; {len(images)} test images of {images.shape[1:]}", flush=True)
    with tempfile.TemporaryDirectory(prefix="vit_formats_") as tmp:
        paths = export_all(model, class_names, pathlib.Path(tmp), args.formats)
        outputs = probabilities(paths, images if args.accuracy else images[:args.images],
                                args.batch_size)
    failed = parity({name: output[:args.images] for name, output in outputs.items()})
    if args.accuracy:
        accuracy(outputs, labels)
    if failed:
        sys.exit(f"{', '.join(failed)}: probabilities differ from the SavedModel's by more than {TOLERANCE:g}")


if __name__ == "__main__":
    main()
