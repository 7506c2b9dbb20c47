"""`zoo export` and `zoo import`: TF Serving SavedModels of a run or of an OPUS-MT folder, a ViT
run as LiteRT, ONNX or OpenVINO (`--format`, `zoo.export.formats`), and a Transformer run or an
OPUS-MT folder as a CTranslate2 model (`--format ctranslate2`, `zoo.export.ctranslate2`)."""

from zoo.cli import choices
from zoo.cli.arguments import positive_int


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
    p.add_argument("--checkpoint", choices=choices.CHECKPOINTS, default="best")
    p.add_argument("--beam-size", type=positive_int, default=4)
    p.add_argument("--alpha", type=float, help="beam length penalty (default 0.6; 1.0, Hugging "
                   "Face's, for a model fine-tuned from a Marian folder)")
    p.add_argument("--top-k", type=positive_int, default=None,
                   help="images: classes returned (default 5, or every class when fewer)")
    p.add_argument("--jit", action="store_true",
                   help="decode (translation) or run the ViT with XLA inside the SavedModel "
                   "(TF Serving on CPU then needs --xla_cpu_compilation_enabled=true)")
    p.add_argument("--quantize", choices=choices.QUANTIZE_MODES,
                   help="export Keras' int8 weights (Transformer and ViT; zoo.export.int8); "
                   "litert, onnx: the format's dynamic-range int8; ctranslate2: its int8")
    p.add_argument("--format", choices=(choices.SAVED_MODEL, *choices.FORMATS, choices.CTRANSLATE2), default=choices.SAVED_MODEL,
                   help="ViT runs: litert (model.tflite), onnx (model.onnx) or openvino "
                   "(model.xml, .bin), uint8 images in, probabilities out; Transformer "
                   "translation runs: ctranslate2 (a CTranslate2 model directory and the run's "
                   "tokenizer); into TO/<version> (default TO: saved_models/MODEL_NAME-FORMAT; "
                   "needs pip install -e '.[deploy]'); default savedmodel")


def add_import_parser(commands):
    p = commands.add_parser(
        "import", help="a pretrained OPUS-MT (Marian) folder as a TF Serving SavedModel",
        description=(
            "Import a Hugging Face Marian / OPUS-MT folder (config.json, model.safetensors or "
            "pytorch_model.bin, source.spm, target.spm, vocab.json) into the zoo's Transformer "
            "and export it: strings in, strings out, its SentencePiece tokenizers and beam "
            "search (Hugging Face's length penalty) inside the graph (zoo.transformer.weights.marian)."
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
    p.add_argument("--quantize", choices=choices.QUANTIZE_MODES,
                   help="export Keras' int8 weights (Transformer and ViT; zoo.export.int8); "
                   "ctranslate2: CTranslate2's int8")
    p.add_argument("--format", choices=(choices.SAVED_MODEL, choices.CTRANSLATE2), default=choices.SAVED_MODEL,
                   help="ctranslate2: a CTranslate2 model directory built from the imported "
                   "weights, the folder's tokenizers beside it (needs pip install -e "
                   "'.[deploy]'); default savedmodel")
