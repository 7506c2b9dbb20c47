"""`zoo export` and `zoo import`: TF Serving SavedModels of a run or of an OPUS-MT folder, a ViT
run as LiteRT, ONNX or OpenVINO (`--format`, `zoo.export.formats`), and a Transformer run or an
OPUS-MT folder as a CTranslate2 model (`--format ctranslate2`, `zoo.export.ctranslate2`)."""

import pathlib

from zoo import locks, runs
from zoo.cli.arguments import UserError, positive_int
from zoo.export import CTRANSLATE2, FORMATS, SAVED_MODEL, int8
from zoo.export import export as export_model
from zoo.runs.rundir import CHECKPOINTS
from zoo.transformer import marian


def _cmd_export(args):
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


def _cmd_import(args):
    options = {key: getattr(args, key) for key in ("beam_size", "alpha", "max_length", "quantize")
               if getattr(args, key) is not None}
    with locks.hold(args.to, "zoo import"):
        path = marian.export_folder(args.folder, args.to, args.version, format=args.format,
                                    **options)
    if args.format == CTRANSLATE2:
        _print_ctranslate2(path)
        return
    print(f"Load it with tf.saved_model.load({str(path)!r}), or: zoo predict {path} TEXT...")


def add_export_parser(commands):
    p = commands.add_parser(
        "export", help="export a trained run as a versioned SavedModel",
        description=(
            "Write the run's model as a TensorFlow SavedModel into TO/<version> (TF Serving "
            "layout). Translation models take text (serving_default: beam search; greedy); "
            "image models take uint8 images or encoded image bytes."
        ),
        epilog="Example: zoo export runs/numbers --to saved_models/transformer-tiny",
    )
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--to", metavar="DIR", help="export root (default saved_models/MODEL_NAME)")
    p.add_argument("--version", type=positive_int, help="version number (default: the next one)")
    p.add_argument("--checkpoint", choices=CHECKPOINTS, default="best")
    p.add_argument("--beam-size", type=positive_int, default=4)
    p.add_argument("--alpha", type=float, help="beam length penalty (default 0.6; 1.0, Hugging "
                   "Face's, for a model fine-tuned from a Marian folder)")
    p.add_argument("--top-k", type=positive_int, default=None,
                   help="images: classes returned (default 5, or every class when fewer)")
    p.add_argument("--jit", action="store_true",
                   help="decode (translation) or run the ViT with XLA inside the SavedModel "
                   "(TF Serving on CPU then needs --xla_cpu_compilation_enabled=true)")
    p.add_argument("--quantize", choices=int8.MODES,
                   help="export Keras' int8 weights (Transformer and ViT; zoo.export.int8); "
                   "litert, onnx: the format's dynamic-range int8; ctranslate2: its int8")
    p.add_argument("--format", choices=(SAVED_MODEL, *FORMATS, CTRANSLATE2), default=SAVED_MODEL,
                   help="ViT runs: litert (model.tflite), onnx (model.onnx) or openvino "
                   "(model.xml, .bin), uint8 images in, probabilities out; Transformer "
                   "translation runs: ctranslate2 (a CTranslate2 model directory and the run's "
                   "tokenizer); into TO/<version> (default TO: saved_models/MODEL_NAME-FORMAT; "
                   "needs pip install -e '.[deploy]'); default savedmodel")
    p.set_defaults(func=_cmd_export)


def add_import_parser(commands):
    p = commands.add_parser(
        "import", help="a pretrained OPUS-MT (Marian) folder as a TF Serving SavedModel",
        description=(
            "Import a Hugging Face Marian / OPUS-MT folder (config.json, model.safetensors or "
            "pytorch_model.bin, source.spm, target.spm, vocab.json) into the zoo's Transformer "
            "and export it: strings in, strings out, its SentencePiece tokenizers and beam "
            "search (Hugging Face's length penalty) inside the graph (zoo.transformer.marian)."
        ),
        epilog="Example: zoo import opus-mt-en-de --to saved_models/opus-mt-en-de",
    )
    p.add_argument("folder", metavar="FOLDER")
    p.add_argument("--to", metavar="PATH", required=True, help="the export root, e.g. "
                   "saved_models/NAME; the version goes into PATH/VERSION/")
    p.add_argument("--version", type=positive_int, help="default: the next free version")
    p.add_argument("--beam-size", type=positive_int, help="serving_default's beam (default 4)")
    p.add_argument("--alpha", type=float, help="length penalty (default 1.0, Hugging Face's)")
    p.add_argument("--max-length", type=positive_int,
                   help="longest source and output in tokens (default: sources up to the "
                   "position table, outputs as transformers' generate: the folder's max_length "
                   "- 1 tokens, </s> included)")
    p.add_argument("--quantize", choices=int8.MODES,
                   help="export Keras' int8 weights (Transformer and ViT; zoo.export.int8); "
                   "ctranslate2: CTranslate2's int8")
    p.add_argument("--format", choices=(SAVED_MODEL, CTRANSLATE2), default=SAVED_MODEL,
                   help="ctranslate2: a CTranslate2 model directory built from the imported "
                   "weights, the folder's tokenizers beside it (needs pip install -e "
                   "'.[deploy]'); default savedmodel")
    p.set_defaults(func=_cmd_import)


