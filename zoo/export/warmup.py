"""Warm-up of a translation export: one request per source bucket and signature.

An XLA export (`jit_compile=True`) compiles its decoding once per input shape
(batch size B, source bucket W; `zoo.export.translation_module.bucket_widths`), so the
first request of each bucket waits for a compile (seconds for a full-size
model). Warm-up moves those compiles to load time:

- TF Serving replays `assets.extra/tf_serving_warmup_requests` (a TFRecord file of
  `tensorflow_serving.apis.prediction_log_pb2.PredictionLog` records, each a
  `PredictRequest`) when it loads a version, before it serves it: one request per
  (signature, bucket), of batch size 1, whose text tokenizes to the longest source
  of the bucket. `model_spec.name` is left empty (TF Serving does not read it there).
- `tf.saved_model.load` users call `loaded.warmup()`: the same requests inside the
  SavedModel; it returns each request's translation, keyed `"<signature>_<W>"`.

Other batch sizes still compile on first sight, each a program per segment of its
decoding (`zoo.decode.segments`: slots, a power of two, × cache width × bucket): TF
Serving's batching with `allowed_batch_sizes` (and `pad_variable_length_inputs`) bounds them. A default
(non-XLA) export gets the same warm-up: its first request then skips the graph's
one-time set-up (function instantiation, tokenizer tables).
"""

import pathlib

import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

from zoo.errors import ZooError
from zoo.text.ids import encode_sources

FILENAME = "tf_serving_warmup_requests"  # the name TF Serving looks for in assets.extra/
WORD = "a"  # repeated to make a source of each length: one token or a few per word
# Values for signature inputs other than `text`, by input name (cast to the signature's
# dtype): the `sample` signature's scalars (`zoo.decode.sampling`; top_k 0 and top_p 1 are off).
EXTRA_INPUTS = {"seed": 0, "temperature": 1.0, "top_k": 0, "top_p": 1.0}


def bucket_texts(tokenizer, max_length, end_id, widths):
    """{W: text} for each bucket width W reached: the longest of "", "a", "a a", …
    whose source (tokens cut to max_length - 1, + [END]) fits W and not the width
    below (a compiled program depends on W only, not on where in (W/2, W] it falls)."""
    candidates = [" ".join([WORD] * count) for count in range(max_length + 1)]
    sources = encode_sources(tokenizer, tf.constant(candidates), max_length, end_id)
    texts = {}
    for text, length in zip(candidates, sources.row_lengths().numpy().tolist()):
        width = min((w for w in widths if w >= length), default=None)
        if width is not None:
            texts[width] = text  # candidates grow: the last one kept is the longest
    return texts


def _inputs(name, function, text):
    """The inputs of one batch-1 request of signature `name`: `text` and EXTRA_INPUTS."""
    specs = {spec.name: spec for spec in tf.nest.flatten(function.input_signature)}
    unknown = sorted(set(specs) - {"text"} - set(EXTRA_INPUTS))
    if unknown:
        raise ZooError(
            f"export: warm-up: signature {name!r} takes {unknown} besides `text`; give them "
            "values in zoo.export.warmup.EXTRA_INPUTS."
        )
    return {
        key: [text] if key == "text" else np.asarray(EXTRA_INPUTS[key], spec.dtype.as_numpy_dtype)
        for key, spec in specs.items()
    }


def requests(signatures, texts):
    """((signature name, W, inputs), …) for every signature and bucket text."""
    return tuple(
        (name, width, _inputs(name, function, text))
        for name, function in signatures.items()
        for width, text in sorted(texts.items())
    )


def warmup_function(signatures, planned):
    """A `tf.function` of no input running each of `planned` (`requests`): what the
    export saves as `warmup`."""

    @tf.function(input_signature=[], autograph=False)
    def warmup():
        return {
            f"{name}_{width}": signatures[name](
                **{key: tf.constant(value) for key, value in inputs.items()}
            )["translation"]
            for name, width, inputs in planned
        }

    return warmup


def attach(module, signatures, tokenizer, max_length, end_id, widths):
    """Give `module` its `warmup` function and `warmup_requests` (saved with it)."""
    module.warmup_requests = requests(signatures, bucket_texts(tokenizer, max_length, end_id, widths))
    module.warmup = warmup_function(signatures, module.warmup_requests)


def write_requests(export_dir, planned):
    """Write `planned` (`requests`) as `assets.extra/tf_serving_warmup_requests` under
    `export_dir`; nothing when there are none. Returns the file's path or None."""
    if not planned:
        return None
    path = pathlib.Path(export_dir) / "assets.extra" / FILENAME
    path.parent.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for name, _, inputs in planned:
            request = predict_pb2.PredictRequest(model_spec=model_pb2.ModelSpec(signature_name=name))
            for key, value in inputs.items():
                request.inputs[key].CopyFrom(tf.make_tensor_proto(value))
            log = prediction_log_pb2.PredictionLog(
                predict_log=prediction_log_pb2.PredictLog(request=request)
            )
            writer.write(log.SerializeToString())
    return path
