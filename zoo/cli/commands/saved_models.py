"""`zoo export` and `zoo import`: TF Serving SavedModels of a run or of an OPUS-MT folder, a ViT
run as LiteRT, ONNX or OpenVINO (`--format`, `zoo.export.formats`), and a Transformer run or an
OPUS-MT folder as a CTranslate2 model (`--format ctranslate2`, `zoo.export.ctranslate2`)."""

import pathlib

from zoo import locks, runs
from zoo.cli.arguments import UserError
from zoo.export import CTRANSLATE2, FORMATS, SAVED_MODEL
from zoo.export import export as export_model
from zoo.transformer.weights import marian


def run_export(args):
    """`zoo export`: a run as a SavedModel, or in the format `--format` names."""
    if args.format == CTRANSLATE2:
        return _export_ctranslate2(args)
    if args.format != SAVED_MODEL:
        return _export_format(args)
    path = runs.export_run(
        args.run_dir, to=args.to, version=args.version, checkpoint=args.checkpoint,
        beam_size=args.beam_size, alpha=args.alpha, top_k=args.top_k, jit_compile=args.jit,
        quantize=args.quantize,
    )
    print(f"Load it with tf.saved_model.load({str(path)!r}), or: zoo predict {path} INPUT...")


def _export_format(args):
    """A ViT run as LiteRT, ONNX or OpenVINO, into TO (default saved_models/NAME-FORMAT)."""
    config = runs.read_config(args.run_dir)
    if config["kind"] != "image":
        raise UserError(f"--format {args.format} is for ViT runs; {args.run_dir} is a "
                        f"{config['model']} translation run, exported as a SavedModel (leave "
                        f"out --format), a Transformer also with --format {CTRANSLATE2}")
    if args.jit:
        raise UserError(f"--jit is for SavedModels; --format {args.format} has no XLA option")
    run = runs.load_run(args.run_dir, args.checkpoint)
    root = pathlib.Path(args.to or pathlib.Path("saved_models") / f"{run.name}-{args.format}")
    print(f"Exporting {run.name} ({run.checkpoint.name}) as {args.format} to {root}...")
    with locks.hold(root, "zoo export"):
        path = export_model(run.model, root, version=args.version, format=args.format,
                            top_k=args.top_k, class_names=run.class_names,
                            quantize=args.quantize)
    files = ", ".join(FORMATS[args.format].files)
    print(f"  {files} written to {path}; load it as saved_models/README.md shows, or: "
          f"zoo predict {path} IMAGE...")


def _export_ctranslate2(args):
    """A Transformer translation run as a CTranslate2 model, into TO (default
    saved_models/NAME-ctranslate2); the format refuses other models in one line."""
    config = runs.read_config(args.run_dir)
    if config["kind"] != "translation":
        raise UserError(f"--format {CTRANSLATE2} is for Transformer translation runs; "
                        f"{args.run_dir} is a {config['model']} image run (--format litert, "
                        "onnx or openvino)")
    if args.jit:
        raise UserError(f"--jit is for SavedModels; --format {CTRANSLATE2} has no XLA option")
    path = runs.export_run(
        args.run_dir, to=args.to, version=args.version, checkpoint=args.checkpoint,
        beam_size=args.beam_size, alpha=args.alpha, quantize=args.quantize, format=CTRANSLATE2,
    )
    _print_ctranslate2(path)


def _print_ctranslate2(path):
    print(f"Load it with ctranslate2.Translator({str(path)!r}) and its tokenizer (saved_models/"
          f"README.md), or: zoo predict {path} TEXT...")


def run_import(args):
    """`zoo import`: an OPUS-MT folder as a SavedModel or a CTranslate2 model."""
    options = {key: getattr(args, key) for key in ("beam_size", "alpha", "max_length", "quantize")
               if getattr(args, key) is not None}
    with locks.hold(args.to, "zoo import"):
        path = marian.export_folder(args.folder, args.to, args.version, format=args.format,
                                    **options)
    if args.format == CTRANSLATE2:
        _print_ctranslate2(path)
        return
    print(f"Load it with tf.saved_model.load({str(path)!r}), or: zoo predict {path} TEXT...")
