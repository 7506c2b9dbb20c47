"""What int8 weights cost a trained run: its float export against its `--quantize int8` export.

    python benchmarks/bench_int8_quality.py RUN_DIR [--limit N] [--batch-size 64]
        [--signatures greedy,serving_default]

Both SavedModels (`zoo export RUN_DIR` and `zoo export RUN_DIR --quantize int8`, checkpoint
`best`) are loaded with `tf.saved_model.load` and fed the run's held-out test split (the split
`zoo evaluate` scores).

- Translation: the `greedy` and `serving_default` (beam 4) signatures; cased corpus BLEU and
  chrF against the references in the target tokenizer's canonical form (sacrebleu, as
  `zoo evaluate`), sacrebleu's paired bootstrap (1,000 resamples: is int8 worse, and how
  surely?), and the share of sentences translated identically.
- Images: top-1 accuracy of both, and the share of images given the same class.

Also the size of each SavedModel's variables on disk. No timing: speed is
`bench_inference.py`'s (`--engines saved-model-int8,...`).
"""

import argparse
import os
import pathlib
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402, F401 - the exports' tokenizer ops
from bench_translation import translate  # noqa: E402 - in order of length, returned in order

from zoo.datasets.preparation import load_run_data  # noqa: E402
from zoo.runs.evaluation import test_sources_and_references  # noqa: E402
from zoo.runs.exporting import export_run  # noqa: E402
from zoo.runs.rundir import load_run  # noqa: E402
from zoo.runs.scores import paired_bootstrap  # noqa: E402

SIGNATURES = ("greedy", "serving_default")


def variables_megabytes(path):
    files = (pathlib.Path(path) / "variables").glob("*")
    return sum(f.stat().st_size for f in files) / 2**20


def translation(run, data, exports, args):
    sources, references = test_sources_and_references(run, data, args.limit)
    print(f"{len(sources)} test pairs of {run.config['data']['spec']}")
    print("| signature | weights | BLEU | chrF | identical translations |")
    print("|---|---|---:|---:|---:|")
    for name in args.signatures:
        outputs = {kind: translate(tf.saved_model.load(str(path)).signatures[name], sources,
                                   args.batch_size)
                   for kind, path in exports.items()}
        test = paired_bootstrap(outputs["float32"], outputs["int8"], references)
        same = np.mean([a == b for a, b in zip(outputs["float32"], outputs["int8"])])
        for kind, side in (("float32", "a"), ("int8", "b")):
            bleu, chrf = test["bleu"][side]["score"], test["chrf"][side]["score"]
            print(f"| {name} | {kind} | {bleu:.2f} | {chrf:.2f} | "
                  f"{'' if kind == 'float32' else f'{100 * same:.1f}%'} |")
        print(f"|  | int8 − float32 | {test['bleu']['difference']:+.2f} (p {test['bleu']['p_value']:.3f}) "
              f"| {test['chrf']['difference']:+.2f} (p {test['chrf']['p_value']:.3f}) | |")


def images(run, data, exports, args):
    x, y = data.x_test[: args.limit], data.y_test[: args.limit]
    x = np.clip(np.round(x), 0, 255).astype(np.uint8)
    print(f"{len(x)} test images of {run.config['data']['spec']}")
    predicted = {}
    for kind, path in exports.items():
        signature = tf.saved_model.load(str(path)).signatures["serving_default"]
        predicted[kind] = np.concatenate([
            signature(images=tf.constant(x[i : i + args.batch_size]))["classes"].numpy()[:, 0]
            for i in range(0, len(x), args.batch_size)])
    for kind, classes in predicted.items():
        print(f"{kind}: accuracy {100 * np.mean(classes == y):.2f}%")
    print(f"same class: {100 * np.mean(predicted['float32'] == predicted['int8']):.2f}%")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir")
    parser.add_argument("--limit", type=int, help="the first N test examples only")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--signatures", type=lambda s: s.split(","), default=list(SIGNATURES),
                        help="translation: greedy,serving_default (both by default)")
    args = parser.parse_args(argv)
    run = load_run(args.run_dir, "best")
    config = run.config
    _, data = load_run_data(config, True)
    root = pathlib.Path(tempfile.mkdtemp(prefix="bench_int8_"))
    exports = {kind: export_run(args.run_dir, to=root / kind, quiet=True, quantize=quantize)
               for kind, quantize in (("float32", None), ("int8", "int8"))}
    for kind, path in exports.items():
        print(f"{kind} export: variables {variables_megabytes(path):.1f} MB")
    (translation if run.kind == "translation" else images)(run, data, exports, args)


if __name__ == "__main__":
    main()
