"""The translation engines of `bench_inference.py`, each served in a process of its own.

    python benchmarks/inference_engines.py ENGINE SETTINGS.json
    python benchmarks/zoo_engine.py zoo SETTINGS.json            # the `zoo` engine

loads one engine, prints `ready`, then answers one JSON line per request line
`{"search": "greedy" | "beam", "batch": B, "count": N}`: it translates the first N
sentences of the settings' sentence file in batches of B (text in, token ids and text
out) and replies `{"seconds": wall time, "ids": [[content ids], ...]}` (ids cut at
`</s>`, padding dropped). The module imports nothing beyond the standard library at its
top: the `saved-model*` engines run with TensorFlow and tensorflow-text alone, never
importing the zoo, as a user's serving process would.

Engines: `zoo` (in-process `zoo.decode`, XLA-compiled, sources padded to the export's
bucket widths; `zoo_engine.py`, the one engine process that imports the zoo), `saved-model`, `saved-model-jit` (`tf.saved_model.load` of the default
and the `--jit` export: `greedy` and `serving_default` signatures), `saved-model-int8`,
`saved-model-jit-int8` (the same with `--quantize int8`), `transformers`
(`MarianMTModel.generate` on PyTorch), `ct2-float32`, `ct2-int8` (CTranslate2, one
float32 conversion, int8 quantized when loaded: `compute_type="int8"`), and both with
`-mkl` or `-nomkl` (CTranslate2 with its MKL backend forced on or off, `CT2_USE_MKL=1` or `0` in
that engine's process only; by default it uses MKL on Intel CPUs and not on AMD ones), and
`ct2-zoo-float32`, `ct2-zoo-int8` (CTranslate2 from the zoo's own export, `zoo import FOLDER
--format ctranslate2`: the same weights through `ctranslate2.specs`, loaded and called as the
`ct2-*` engines are, except that the export appends `</s>` to the source itself,
`add_source_eos`).

Every engine uses `threads` threads for its operations (TensorFlow: intra- and
inter-op pools; PyTorch: `torch.set_num_threads`; CTranslate2: `intra_threads`, one
translation at a time) and generates exactly `length` tokens per sentence when `</s>`
is never likely (no forced `</s>`: HF's `forced_eos_token_id=None`, the exports'
`force_end=False`, CTranslate2's `max_decoding_length`).
"""

import json
import os
import sys
import time

from engine_processes import SAVED_MODELS, set_tf_threads  # standard library only

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

END_ID = 0  # Marian's </s>


def content(rows, pad_id):
    """Each row cut at `</s>`, padding dropped: lists of ints."""
    out = []
    for row in rows:
        kept = []
        for token in row:
            if token == END_ID:
                break
            if token != pad_id:
                kept.append(int(token))
        out.append(kept)
    return out


def saved_model_engine(settings, export):
    """`export`: the settings key of the export's path (`export`, `export_jit`, `export_int8`, ...)."""
    tf = set_tf_threads(settings["threads"])
    import tensorflow_text  # noqa: F401 - registers the tokenizer ops

    loaded = tf.saved_model.load(settings[export])
    signatures = {"greedy": loaded.signatures["greedy"], "beam": loaded.signatures["serving_default"]}
    if any(module == "zoo" or module.startswith("zoo.") for module in sys.modules):
        raise SystemExit("the SavedModel engine imported the zoo")

    def translate(texts, search):
        return signatures[search](text=tf.constant(texts))["tokens"].numpy().tolist()

    return translate, settings["pad_id"]


def transformers_engine(settings):
    import torch
    import transformers
    from transformers import MarianMTModel, MarianTokenizer

    transformers.logging.set_verbosity_error()  # not its max_length notice at every call
    torch.set_num_threads(settings["threads"])
    tokenizer = MarianTokenizer.from_pretrained(settings["folder"])
    model = MarianMTModel.from_pretrained(settings["folder"]).eval()
    options = dict(do_sample=False, max_new_tokens=settings["length"], forced_eos_token_id=None,
                   length_penalty=1.0)

    def translate(texts, search):
        batch = tokenizer(texts, return_tensors="pt", padding=True)
        with torch.inference_mode():
            out = model.generate(**batch, num_beams=1 if search == "greedy" else 4, **options)
        tokenizer.batch_decode(out, skip_special_tokens=True)
        return out[:, 1:].tolist()  # without the decoder start

    return translate, settings["pad_id"]


def ct2_engine(settings, compute_type, mkl=None, zoo=False):
    """`mkl` True or False: CTranslate2 with Intel's MKL backend forced on or off
    (`CT2_USE_MKL`, read when the library loads); None: CTranslate2's default for the CPU
    (MKL on Intel CPUs, not on AMD ones). `zoo`: the zoo's CTranslate2 export instead of
    transformers' conversion (it appends `</s>` to the source itself)."""
    if mkl is not None:
        os.environ["CT2_USE_MKL"] = "1" if mkl else "0"
    import ctranslate2
    import sentencepiece

    translator = ctranslate2.Translator(settings["ct2_zoo" if zoo else "ct2"], device="cpu",
                                        compute_type=compute_type,
                                        intra_threads=settings["threads"], inter_threads=1)
    suffix = [] if zoo else ["</s>"]
    folder = settings["folder"]
    source_spm = sentencepiece.SentencePieceProcessor(model_file=os.path.join(folder, "source.spm"))
    target_spm = sentencepiece.SentencePieceProcessor(model_file=os.path.join(folder, "target.spm"))
    with open(os.path.join(folder, "vocab.json"), encoding="utf-8") as file:
        vocab = json.load(file)

    def translate(texts, search):
        tokens = [source_spm.encode(text, out_type=str) + suffix for text in texts]
        results = translator.translate_batch(
            tokens, beam_size=1 if search == "greedy" else 4, max_decoding_length=settings["length"],
            length_penalty=1.0, max_batch_size=len(texts))
        pieces = [result.hypotheses[0] for result in results]
        target_spm.decode(pieces)
        return [[vocab.get(piece, 1) for piece in row] for row in pieces]

    return translate, settings["pad_id"]


def load(engine, settings):
    if engine in SAVED_MODELS:
        return saved_model_engine(settings, SAVED_MODELS[engine])
    if engine == "transformers":
        return transformers_engine(settings)
    if engine in ("ct2-float32", "ct2-int8"):
        return ct2_engine(settings, engine.split("-")[1])
    if engine in ("ct2-float32-mkl", "ct2-int8-mkl", "ct2-float32-nomkl", "ct2-int8-nomkl"):
        return ct2_engine(settings, engine.split("-")[1], mkl=engine.endswith("-mkl"))
    if engine in ("ct2-zoo-float32", "ct2-zoo-int8"):
        return ct2_engine(settings, engine.split("-")[2], zoo=True)
    raise SystemExit(f"unknown engine {engine!r}")


def serve(engine, settings, load=load):
    """Serve `engine` (`load(engine, settings)` gives its `(translate, pad id)`)."""
    translate, pad = load(engine, settings)
    with open(settings["sentences"], encoding="utf-8") as file:
        sentences = json.load(file)
    print("ready", flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        texts, batch, ids = sentences[: request["count"]], request["batch"], []
        start = time.perf_counter()
        for i in range(0, len(texts), batch):
            ids.extend(translate(texts[i: i + batch], request["search"]))
        seconds = time.perf_counter() - start
        print(json.dumps({"seconds": seconds, "ids": content(ids, pad)}), flush=True)


if __name__ == "__main__":
    with open(sys.argv[2], encoding="utf-8") as settings_file:
        serve(sys.argv[1], json.load(settings_file))
