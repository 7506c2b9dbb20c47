"""SavedModel export for TensorFlow Serving: `zoo.export(model, "saved_models/<name>")`.

The export is a plain SavedModel in TF Serving's layout,

    saved_models/<name>/<version>/    saved_model.pb, variables/, assets.extra/zoo_export.json

loadable without this package and without Keras: `tf.saved_model.load(path)`
needs TensorFlow plus, for translation models, the tensorflow-text op
libraries (`import tensorflow_text`, or TF Serving's model server, which links
them). Everything else (model weights, tokenizer vocabularies and tables,
beam search, detokenization) is inside the SavedModel.

Signatures of a translation model (Transformer or RNNsearch), B strings in:

    serving_default(text: tf.string (B,)) -> beam search (`zoo.decode.beam_search`)
        translation  tf.string (B,)    detokenized best hypothesis
        tokens       int32 (B, L)      its target ids: no [START], [END] kept,
                                       0 after it (L = max_new_tokens,
                                       by default max_length)
        score        float32 (B,)      its length-penalised log-probability
                                       log p(y | x) / ((5 + |y|) / 6)^alpha,
                                       |y| counting [END] (`decode.length_penalty`)
    greedy(text: tf.string (B,)) -> greedy decoding (`zoo.decode.greedy_decode`)
        translation, tokens  as above
        score        float32 (B,)      sum of the log-probabilities of the chosen
                                       tokens up to and including [END]
    sample(text: tf.string (B,), seed: int64, temperature: float32, top_k: int32,
           top_p: float32) -> sampling (`zoo.decode.sample`; top_k 0 and top_p >= 1
           are off), stateless: the same seed gives the same output anywhere
        translation, tokens, score  as `greedy`

The text goes through the source tokenizer's `tokenize` (UTF-8 repair: invalid
bytes become U+FFFD; NFKC; lower-casing; WordPiece; unknown characters, emoji
included, become [UNK]), is cut to `max_length - 1` tokens and gets [END]
appended (`zoo.datasets.pipeline` convention: source = x + [END]); the batch is padded
with 0, decoded, and the target tokenizer's `detokenize` turns the ids back
into text. An empty string is a source of [END] alone and is translated like
any other input; an empty batch gives empty outputs (tokens `(0, L)`).
Decoding runs without XLA by default. `jit_compile=True` compiles the
decoding of the int ids with XLA inside the SavedModel (tokenization and
detokenization stay outside the XLA cluster; `zoo.export.translation_module`):
several times faster at small batches on CPU, but TF Serving disables XLA:CPU JIT by
default and fails such requests unless started with
`--xla_cpu_compilation_enabled=true` (saved_models/README.md).

Imported Marian (OPUS-MT) models (`zoo.transformer.weights.marian`) export the same signatures
with their own tokenizers (`zoo.text.marian`: cased SentencePiece
pieces mapped through vocab.json, `</s>` appended) and special ids (the
target tokenizer's `special_ids`: padding = decoder start, `</s>` = 0 in
OPUS-MT): `tokens` holds Marian ids with padding after `</s>`, and
`translation` is what Hugging Face's `batch_decode(skip_special_tokens=True)`
gives. Their beam search is Hugging Face's by default (`length_penalty="hf"`:
score `log p(y | x) / |y| ** alpha`, alpha 1.0), and the step at the length
limit emits `</s>` (`force_end`, Marian's `forced_eos_token_id`), so that the
SavedModel reproduces `generate(num_beams=4)`. `zoo import` without `--max-length`
generates what `generate` does at the folder's `max_length`, which counts the
decoder start token: at most `max_length - 1` tokens, `</s>` included
(`zoo.transformer.weights.marian.generate_limit`); sources still take the whole position table.

Signatures of a ViT, K classes, top k:

    serving_default(images: uint8 (B, H, W, C)) ->
        probabilities  float32 (B, K)   softmax of the logits
        classes        int32 (B, k)     top-k class ids, most probable first
        scores         float32 (B, k)   their probabilities
        class_names    tf.string (B, k) their names (`class_names`, or the ids as text)
    predict_image_bytes(image_bytes: tf.string (B,)) -> the same outputs
        each string is an encoded PNG, JPEG, GIF (first frame) or BMP of any
        size; it is decoded, converted to C channels (alpha dropped, RGB <->
        grayscale with ITU-R 601 weights) and resized to (H, W) (bilinear,
        antialiased) inside the graph. Bytes that are not an image fail the
        request with InvalidArgumentError ("Unknown image file format").

Versions: `version=None` takes the next integer after the largest existing
version directory. The SavedModel is written into `<path>/.tmp-<version>.pid<pid>-<random>`
and renamed to `<path>/<version>` only once complete, so TF Serving (which
only loads integer-named directories) never sees a half-written version; an
exception during export removes the temporary directory. An existing version
is never overwritten (`FileExistsError`).

Other formats (a ViT only): `format="litert"`, `"onnx"` or `"openvino"` writes the same
version layout with the format's files (`model.tflite`; `model.onnx`; `model.xml` and
`model.bin`) beside `assets.extra/zoo_export.json`, uint8 images in and probabilities out
(`zoo.export.formats`; loaded and run by `zoo.export.runtimes`). `format="ctranslate2"` (a
Transformer only) writes a CTranslate2 model directory built from the Keras weights with
`ctranslate2.specs`, its tokenizer files beside it (`zoo.export.ctranslate2`,
`zoo.export.ctranslate2_export`; run by `zoo.export.ctranslate2_runtime`). A root holds
versions of one format: a server loads its largest version, whatever the format.

The translation export lives in `zoo.export.translation` (the exported module
in `zoo.export.translation_module`, a copying model's in `zoo.export.copying`),
the image export in `zoo.export.image`; which family goes to which is the family object's
`export_task` (`zoo.registry.Family`), asked of the registry for the model
(`zoo.registry.family_of_model`). `zoo.export` is this module, made callable: `zoo.export(model, path)`,
`zoo.export.export(model, path)` and `from zoo.export import export` all call
the same function.
"""

import os
import pathlib
import sys
import types

import keras
import tensorflow as tf

from keras_attention import backends
from keras_attention.checks import check_int
from zoo import files, registry
from zoo.errors import ZooError
from zoo.export import ctranslate2_export, formats, int8, warmup
from zoo.export.formats import CTRANSLATE2, FORMATS, SAVED_MODEL
from zoo.export.image import DEFAULT_TOP_K, ImageClassifierModule, image_export
from zoo.export.translation import (  # noqa: F401 - part of this module's API
    DEFAULT_RNN_MAX_LENGTH,
    TF_SERVING_TEXT_OP_LIBRARIES,
    TF_SERVING_TEXT_OPS,
    translation_export,
)
from zoo.export.translation_module import TranslationModule
from zoo.text.special import special_ids

__all__ = [
    "CTRANSLATE2", "DEFAULT_RNN_MAX_LENGTH", "DEFAULT_TOP_K", "EXPORT_TASKS", "FORMATS",
    "METADATA_FILENAME",
    "SAVED_MODEL",
    "TF_SERVING_TEXT_OPS", "TF_SERVING_TEXT_OP_LIBRARIES",
    "ImageClassifierModule", "TranslationModule", "existing_versions", "export",
    "model_family", "special_ids",
]

METADATA_FILENAME = "zoo_export.json"

# The exports a family may ask for (its `Family.export_task`): translation families take
# `{"source", "target"}` -> logits and are decoded by `zoo.decode`; image families take
# (B, H, W, C).
EXPORT_TASKS = ("translation", "image")


def model_family(model):
    """`"transformer"`, `"seq2seq"` (RNNsearch), `"convs2s"` or `"vit"`: the family the
    model records (`zoo.registry.family_of_model`; a `.keras` file saved before models
    recorded it, from its layer names). Raises ZooError for a model of no family that
    exports.
    """
    family = registry.family_of_model(model)
    if family is not None and family.export_task in EXPORT_TASKS:
        return family.name
    raise ZooError(
        "export: `obj` must be a zoo Transformer, RNNsearch, ConvS2S or ViT keras.Model (or the path "
        f"of a .keras file of one); received {type(model).__name__} "
        f"{getattr(model, 'name', '')!r}."
    )


# === Writing versions ===


def existing_versions(path):
    """The integer version directories under `path`, as a sorted list of ints."""
    path = pathlib.Path(path)
    if not path.is_dir():
        return []
    return sorted(
        int(child.name)
        for child in path.iterdir()
        if child.is_dir() and child.name.isascii() and child.name.isdigit()
    )


def _write_atomically(base, version, save, renumber):
    """Run `save(directory, version)` into a temporary directory under `base`, then rename
    it to `base/<version>`; on any exception the temporary directory is removed. With
    `version=None`, two exports started at once get the next two free versions
    (`renumber(directory, version)` rewrites what names the version)."""
    path, _ = files.write_numbered_directory(base, save, version, renumber=renumber)
    return path


def _model_and_directory(obj, path, version):
    """`export`'s model (`obj`, or the `.keras` file it names), its family, and `path` as
    a `pathlib.Path`, checked: `(model, family, base)`."""
    if isinstance(obj, (str, os.PathLike)):
        if not str(obj).endswith(".keras"):
            raise ZooError(f"export: a path `obj` must be a .keras file; received {obj!r}.")
        obj = keras.saving.load_model(obj)
    family = model_family(obj)
    base = pathlib.Path(path)
    if base.exists() and not base.is_dir():
        raise ZooError(f"export: `path` must be a directory; {base} is a file.")
    if version is not None:
        check_int("version", version, 1, prefix="export: ")
    return obj, family, base


def export(
    obj,
    path,
    version=None,
    *,
    tokenizer=None,
    target_tokenizer=None,
    beam_size=4,
    alpha=None,
    max_length=None,
    top_k=None,
    class_names=None,
    length_penalty=None,
    force_end=None,
    jit_compile=False,
    max_new_tokens=None,
    quantize=None,
    format=SAVED_MODEL,  # noqa: A002 - Keras' `model.export(format=...)` names it so
):
    """Write a zoo model as a TF Serving SavedModel version (see the module docstring), or a
    ViT as LiteRT, ONNX or OpenVINO (`zoo.export.formats`).

    Args:
        obj: a zoo Transformer, RNNsearch, ConvS2S or ViT `keras.Model` (from `zoo.get`
            or `keras.saving.load_model`), or the path of a `.keras` file.
        path: the model's directory, e.g. `"saved_models/numbers"`; the
            version is written to `<path>/<version>/`.
        version: a positive int, or None for one more than the largest
            existing version (1 for the first).
        tokenizer: translation models: the source tokenizer (a `zoo.text.tokenizers`
            tokenizer, or a directory written by its `save`), also used for the
            target unless `target_tokenizer` is given.
        target_tokenizer: translation models with separate vocabularies.
        beam_size, alpha: `serving_default`'s beam width and length penalty
            (GNMT's, Wu et al. 2016; the Transformer paper: 4 and 0.6). Default
            alpha: 0.6, or 1.0 (Hugging Face's default) with `length_penalty="hf"`.
        length_penalty: `"gnmt"` or `"hf"` (`zoo.decode.beam_search`); default
            `"hf"` for a tokenizer with its own `special_ids` (imported Marian
            models), else `"gnmt"`.
        force_end: emit [END] at the length limit (`zoo.decode`); default as
            `length_penalty` (True for imported Marian models).
        max_length: translation models: sources are cut to `max_length - 1`
            tokens plus [END], and at most `max_length` tokens are generated.
            Default: the Transformer's position table size; 128 for RNNsearch.
        max_new_tokens: translation models: the most tokens generated ([END]
            included), when it differs from `max_length`: an imported Marian
            folder's `generate` limit (`zoo.transformer.weights.marian.export_folder`).
        jit_compile: translation models: decode with XLA inside the SavedModel
            (`zoo.export.translation`); ViT: run the model with XLA
            (`zoo.export.image`). Needs XLA JIT where it is served (TF
            Serving: `--xla_cpu_compilation_enabled=true` on CPU).
        quantize: None (float32 weights) or `"int8"`: export a copy with Keras' int8
            weights (`zoo.export.int8`; Transformer and ViT models). `obj` is unchanged.
            LiteRT and ONNX: the format's own dynamic-range int8 (`zoo.export.formats`).
        format: `"savedmodel"`, or for a ViT `"litert"`, `"onnx"` or `"openvino"`: the
            same version layout, uint8 images in and probabilities out, the format's files
            beside `assets.extra/zoo_export.json` (`zoo.export.formats`; the `deploy` extra);
            for a Transformer `"ctranslate2"`: a CTranslate2 model directory, the
            tokenizers beside it, `quantize="int8"` CTranslate2's own int8 weights
            (`zoo.export.ctranslate2_export`).
        top_k: ViT: classes reported per image, at most the number of
            classes K; default min(5, K).
        class_names: ViT: one name per class; default the ids as text.

    Returns:
        `pathlib.Path` of the written version directory.

    Raises:
        ValueError: `obj` is not a zoo model, or arguments do not fit it.
        FileExistsError: `<path>/<version>` exists.
        ZooError: `path` holds versions of another format, or the format's converter is
            not installed.
    """
    backends.require_tensorflow("zoo export")
    obj, family, base = _model_and_directory(obj, path, version)
    # Every argument is checked (and the signatures prepared) before anything is written.
    formats.check_format(format, family, quantize, jit_compile)
    int8.check_quantize(quantize, family)
    if format == CTRANSLATE2:  # zoo.export.ctranslate2_export: quantize is CTranslate2's int8
        write, metadata = ctranslate2_export.prepare(
            obj, family, tokenizer, target_tokenizer, beam_size, alpha, max_length,
            length_penalty, force_end, max_new_tokens, quantize)
        metadata["quantization"] = quantize
        return _save(obj, family, base, version, write, metadata)
    if format != SAVED_MODEL:
        write, metadata = formats.deploy_export(obj, format, top_k, class_names, quantize)
        metadata["quantization"] = quantize
        return _save(obj, family, base, version, write, metadata)
    if quantize is not None:
        obj = int8.quantized_copy(obj, quantize)
    if registry.family_named(family).export_task == "image":
        if tokenizer is not None or target_tokenizer is not None:
            raise ZooError("export: a ViT takes no `tokenizer`/`target_tokenizer`.")
        module, signatures, metadata = image_export(obj, top_k, class_names, jit_compile)
    else:
        if class_names is not None:
            raise ZooError("export: `class_names` is for ViT models only.")
        module, signatures, metadata = translation_export(
            obj, family, tokenizer, target_tokenizer, beam_size, alpha, max_length,
            length_penalty, force_end, jit_compile, max_new_tokens,
        )
    metadata["quantization"] = quantize

    def write(directory):
        tf.saved_model.save(module, str(directory), signatures=signatures)
        warmup.write_requests(directory, getattr(module, "warmup_requests", ()))

    return _save(obj, family, base, version, write, {"format": SAVED_MODEL, **metadata})


def version_format(directory):
    """The format of a version directory: its metadata's `format`, `"savedmodel"` for a
    SavedModel without one (written before formats existed), else None (unreadable too)."""
    path = pathlib.Path(directory) / "assets.extra" / METADATA_FILENAME
    try:
        return files.read_json(path, dict).get("format", SAVED_MODEL)
    except (OSError, files.CorruptFileError):  # missing or damaged: what the files say
        return SAVED_MODEL if (pathlib.Path(directory) / "saved_model.pb").is_file() else None


def _check_one_format(base, format):  # noqa: A002
    """A server loads the largest version of a root, whatever its format: one format per root."""
    others = {number: version_format(base / str(number)) for number in existing_versions(base)}
    others = {number: kind for number, kind in others.items() if kind not in (None, format)}
    if others:
        raise ZooError(
            f"export: {base} holds versions of another format ({', '.join(f'{n}: {k}' for n, k in sorted(others.items()))}); "
            f"write the {format} versions to a directory of their own, e.g. {base}-{format}."
        )


def _save(model, family, base, version, write, metadata):
    """`write(directory)` the model files into a new version of `base`, then the metadata."""
    _check_one_format(base, metadata["format"])
    base.mkdir(parents=True, exist_ok=True)
    if version is not None and version in existing_versions(base):
        raise FileExistsError(
            f"export: version {version} already exists in {base}; versions are never "
            "overwritten (pass another `version`, or None for the next one)."
        )
    metadata = {
        "format_version": 1,
        "family": family,
        "model_name": model.name,
        "version": version,  # set when the version is chosen
        "tensorflow_version": tf.__version__,
        **metadata,
    }

    def renumber(directory, number):  # the version is in the metadata
        extra = directory / "assets.extra"
        extra.mkdir(exist_ok=True)
        files.write_json(extra / METADATA_FILENAME, {**metadata, "version": number})

    def save(directory, number):
        write(directory)
        renumber(directory, number)

    return _write_atomically(base, version, save, renumber)


class _CallableModule(types.ModuleType):
    """`zoo.export` is this module and calling it calls `export`."""

    def __call__(self, *args, **kwargs):
        return export(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
