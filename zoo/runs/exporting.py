"""`export_run`: a run's checkpoint as a versioned SavedModel, or a translation run as a
CTranslate2 model (`zoo.export`)."""

import pathlib

from keras_attention import backends
from zoo import locks
from zoo.export import SAVED_MODEL
from zoo.export import export as export_model
from zoo.progress import say
from zoo.runs.rundir import load_run, read_config


def export_run(run_dir, to=None, version=None, checkpoint="best", beam_size=4, alpha=None,
               max_length=None, top_k=None, quiet=False, jit_compile=False, quantize=None,
               format=SAVED_MODEL):  # noqa: A002 - zoo.export's argument
    """Export a run's model as a versioned SavedModel with `zoo.export` (or, with
    `format="ctranslate2"`, a Transformer translation run as a CTranslate2 model).

    Args:
        run_dir: a run directory.
        to: the model's export root; default `saved_models/<model name>` (a format other
            than the SavedModel: `saved_models/<model name>-<format>`).
        version: the version number; default the next free one.
        checkpoint: `"best"` or `"last"`.
        beam_size, alpha, max_length: translation: the `serving_default`
            signature's beam search (alpha: default 0.6, or 1.0 with Hugging
            Face's length penalty for a model fine-tuned from a Marian folder).
        top_k: images: classes returned per image; default 5, or every class
            when there are fewer.
        jit_compile: translation: decode with XLA inside the SavedModel
            (`zoo.export`; TF Serving then needs `--xla_cpu_compilation_enabled=true`
            on CPU).
        quantize: None, or `"int8"` for Keras' int8 weights (`zoo.export.int8`);
            CTranslate2: its own int8 weights.
        format: `"savedmodel"`, or `"ctranslate2"` for a Transformer translation run.

    Returns:
        `pathlib.Path` of the version directory.
    """
    backends.require_tensorflow("zoo export", "there it reads a run trained on JAX as it is")
    if to is None:
        name = read_config(run_dir)["model"]
        to = pathlib.Path("saved_models") / (name if format == SAVED_MODEL else f"{name}-{format}")
    root = pathlib.Path(to)
    with locks.hold(root, "zoo export"):  # one writer per export root (`zoo.locks`)
        run = load_run(run_dir, checkpoint)
        return _export(run, root, version, beam_size, alpha, max_length, top_k, quiet,
                       jit_compile, quantize, format)


def _export(run, root, version, beam_size, alpha, max_length, top_k, quiet, jit_compile,
            quantize, format):  # noqa: A002
    """`export_run`'s SavedModel (or `format`) of the loaded `run` into `root`."""
    say(f"Exporting {run.name} ({run.checkpoint.name}) to {root}...", quiet)
    if run.kind == "translation":
        path = export_model(
            run.model, root, version=version, tokenizer=run.source_tokenizer,
            target_tokenizer=(None if run.target_tokenizer is run.source_tokenizer
                              else run.target_tokenizer),
            beam_size=beam_size, alpha=alpha,
            max_length=run.max_length if max_length is None else max_length,
            jit_compile=jit_compile, quantize=quantize, format=format,
        )
    else:
        if top_k is None:
            top_k = min(5, len(run.class_names))
        path = export_model(run.model, root, version=version, top_k=top_k,
                            class_names=run.class_names, jit_compile=jit_compile,
                            quantize=quantize, format=format)
    say(f"  {'SavedModel' if format == SAVED_MODEL else format} written to {path}", quiet)
    return pathlib.Path(path)
