"""`predict`: translate sentences or classify image files with a run directory or an
exported SavedModel."""

import dataclasses
import pathlib
import re
import secrets

import keras
import numpy as np
import PIL
import tensorflow as tf
import tensorflow_text  # noqa: F401 - registers the tokenizer's ops for loading SavedModels
from google.protobuf import message

from zoo import files
from zoo.errors import ZooError
from zoo.runs.inference import require_decoding, translate
from zoo.runs.rundir import load_run


def resolve_saved_model(path):
    """A SavedModel folder, or the newest numbered version inside an export root; else None."""
    path = pathlib.Path(path)
    if (path / "saved_model.pb").is_file():
        return path
    if path.is_dir():
        versions = sorted(
            (int(child.name), child) for child in path.iterdir()
            if child.name.isdigit() and (child / "saved_model.pb").is_file()
        )
        if versions:
            return versions[-1][1]
    return None


def _image_file_error(path):
    """Why `path` cannot be read as an image file, or None."""
    path = pathlib.Path(path)
    if not path.exists():
        return "file not found"
    if not path.is_file():
        return "not a file"
    return None


def _load_image_files(paths, height, width, channels):
    """`(images (B', H, W, C) uint8 of the readable files, {path: reason} of the others)`."""
    color_mode = {1: "grayscale", 3: "rgb", 4: "rgba"}[channels]
    images, errors = [], {}
    for path in paths:
        errors[path] = _image_file_error(path)
        if errors[path] is None:
            try:
                image = keras.utils.load_img(path, color_mode=color_mode,
                                             target_size=(height, width))
            except PIL.UnidentifiedImageError:
                errors[path] = "not an image (unknown format)"
            except (OSError, ValueError, SyntaxError) as error:  # PIL: truncated, corrupt
                errors[path] = f"not a readable image ({' '.join(str(error).split())})"
            else:
                images.append(np.asarray(keras.utils.img_to_array(image), np.uint8))
                del errors[path]
    shape = (0, height, width, channels)
    return (np.stack(images) if images else np.zeros(shape, np.uint8)), errors


def _with_errors(inputs, answered, errors):
    """One result per input, in order: the answers of the readable ones, `{"input", "error"}`
    for the others."""
    answers = iter(answered)
    return [{"input": str(item), "error": errors[item]} if item in errors else next(answers)
            for item in inputs]


def predict(path, inputs, beam_size=None, alpha=None, top_k=5, checkpoint="best", sampling=None):
    """Translate sentences or classify image files with a run or an exported SavedModel.

    Args:
        path: a run directory (in-process decoding of its checkpoint) or a
            SavedModel (a version folder, or an export root: its newest
            version), loaded with `tf.saved_model.load`.
        inputs: sentences (translation) or image file paths (images).
        beam_size: run directories: 1 = greedy, more = beam search (default 4,
            as the export's `serving_default`).
            SavedModels: 1 uses the `greedy` signature, else `serving_default`.
        alpha: beam search length penalty (run directories); default 0.6, or
            1.0 (Hugging Face's) for a model imported from a Marian folder.
        top_k: classes listed per image.
        checkpoint: run directories: `"best"` or `"last"`.
        sampling: translation: a `zoo.decode.sampling.Sampling` to sample instead of
            searching (SavedModels: the `sample` signature); a seed of None is
            drawn here and returned with each translation (`"seed"`), so that the
            same output can be asked for again.

    Returns:
        list of dicts, one per input: `{"input", "translation"}` (and `"seed"` when
        sampling) or
        `{"input", "classes": [(name, probability), ...]}`. An image that is
        missing, not a file or not an image gets `{"input", "error"}` (the
        reason) and the others are still answered: each file is checked and
        decoded on its own.
    """
    inputs = list(inputs)
    if not inputs:
        raise ZooError("predict needs at least one input (sentences or image files)")
    if sampling is not None and sampling.seed is None:
        sampling = dataclasses.replace(sampling, seed=secrets.randbits(63))
    path = pathlib.Path(path)
    if (path / "config.json").is_file():
        require_decoding("zoo predict", path, "there it reads a run trained on JAX as it is, "
                         "and here zoo predict takes the SavedModel that zoo export writes")
        run = load_run(path, checkpoint)
        if run.kind == "translation":
            if beam_size is None:
                beam_size = 4
            outputs = translate(run, inputs, beam_size=beam_size, alpha=alpha, sampling=sampling)
            return _translations(inputs, outputs, sampling)
        _no_sampling(sampling, path)
        return classify_files(run, inputs, top_k)
    saved = resolve_saved_model(path)
    if saved is None:
        raise FileNotFoundError(
            f"{path} is neither a run directory (no config.json) nor a SavedModel "
            "(no saved_model.pb, nor numbered versions holding one)"
        )
    return _predict_saved_model(saved, inputs, beam_size, top_k, sampling)


def load_run_images(run, paths):
    """`(images (B', H, W, C) uint8, {path: reason})`: the readable image files among `paths`
    as an image run's model takes them (resized to its size, its channels)."""
    model_config = run.config["model_config"]
    size, channels = model_config["image_size"], model_config["channels"]
    return _load_image_files(paths, size, size, channels)


def classify_files(run, inputs, top_k=5):
    """An image run's `predict`: `{"input", "classes": [(name, probability), ...]}` per image
    file, or `{"input", "error"}` for a file that is missing or not an image."""
    images, errors = load_run_images(run, inputs)
    readable = [item for item in inputs if item not in errors]
    answered = []
    if readable:
        logits = run.model.predict(images, verbose=0)
        probabilities = keras.ops.convert_to_numpy(keras.ops.softmax(logits, axis=-1))
        answered = _top_classes(readable, probabilities, run.class_names, top_k)
    return _with_errors(inputs, answered, errors)


def _translations(inputs, outputs, sampling):
    extra = {} if sampling is None else {"seed": sampling.seed}
    return [{"input": s, "translation": t, **extra} for s, t in zip(inputs, outputs)]


def _no_sampling(sampling, path):
    if sampling is not None:
        raise ZooError(f"{path} is an image model; sampling is for translation models")


def _top_classes(inputs, probabilities, class_names, top_k):
    results = []
    for name, row in zip(inputs, probabilities):
        order = np.argsort(-row)[:top_k]
        results.append({
            "input": str(name),
            "classes": [(class_names[i] if class_names else str(i), float(row[i])) for i in order],
        })
    return results


def _signature_inputs(function):
    _, kwargs = function.structured_input_signature
    return kwargs


def _sample_with_saved_model(path, signatures, inputs, sampling):
    """Translations by the export's `sample` signature."""
    if "sample" not in signatures:
        raise ZooError(f"{path} has no sample signature (exported before sampling existed): "
                       "export it again")
    outputs = signatures["sample"](
        text=tf.constant(inputs, tf.string), seed=tf.constant(sampling.seed, tf.int64),
        temperature=tf.constant(sampling.temperature, tf.float32),
        top_k=tf.constant(sampling.top_k or 0, tf.int32),
        top_p=tf.constant(1.0 if sampling.top_p is None else sampling.top_p, tf.float32),
    )
    translations = [t.decode("utf-8") for t in outputs["translation"].numpy().tolist()]
    return _translations(inputs, translations, sampling)


def _translate_with_saved_model(path, signatures, inputs, beam_size, sampling=None):
    """Translations by the export's `serving_default` (beam search), `greedy` or `sample`
    signature."""
    if sampling is not None:
        return _sample_with_saved_model(path, signatures, inputs, sampling)
    default = signatures["serving_default"]
    metadata_path = path / "assets.extra" / "zoo_export.json"
    exported = files.read_json(metadata_path, dict) if metadata_path.is_file() else {}
    if beam_size not in (None, 1) and beam_size != exported.get("beam_size", beam_size):
        raise ZooError(
            f"{path} was exported with beam size {exported['beam_size']}: use --beam-size "
            f"{exported['beam_size']} (serving_default) or 1 (greedy), or export again"
        )
    function = signatures.get("greedy") if beam_size == 1 else default
    if function is None:
        raise ZooError(f"{path} has no greedy signature")
    (name, _), = _signature_inputs(function).items()
    outputs = function(**{name: tf.constant(inputs, tf.string)})
    translations = [t.decode("utf-8") for t in outputs["translation"].numpy().tolist()]
    return [{"input": s, "translation": t} for s, t in zip(inputs, translations)]


def _load_saved_model(path):
    """`tf.saved_model.load(path)`; `CorruptFileError` naming the folder if it does not load."""
    try:
        return tf.saved_model.load(str(path))
    except (tf.errors.OpError, OSError, ValueError, message.DecodeError) as error:
        reason = (getattr(error, "message", None) or str(error)).split("\n")[0][:300]
        raise files.CorruptFileError(path, "the SavedModel does not load (truncated or damaged "
                                     "saved_model.pb or variables/)", reason) from None


def _predict_saved_model(path, inputs, beam_size, top_k, sampling=None):
    loaded = _load_saved_model(path)
    signatures = dict(loaded.signatures)
    if "serving_default" not in signatures:
        raise ZooError(f"{path} has no serving_default signature")
    default = signatures["serving_default"]
    specs = _signature_inputs(default)
    if len(specs) != 1:
        raise ZooError(f"{path}: serving_default should take one input; it takes {sorted(specs)}")
    ((input_name, spec),) = specs.items()
    if spec.dtype == tf.string:  # translation: text in
        return _translate_with_saved_model(path, signatures, inputs, beam_size, sampling)
    _no_sampling(sampling, path)
    # Images: the signature that takes encoded image bytes, else uint8 arrays.
    by_bytes = [
        function for key, function in sorted(signatures.items())
        if len(_signature_inputs(function)) == 1
        and next(iter(_signature_inputs(function).values())).dtype == tf.string
    ]
    if by_bytes:
        answered, errors = _classify_bytes(by_bytes[0], inputs)
    else:
        height, width, channels = spec.shape[1:]
        images, errors = _load_image_files(inputs, height, width, channels)
        answered = [default(**{input_name: tf.constant(images, spec.dtype)})] if len(images) else []
    readable = [item for item in inputs if item not in errors]
    return _with_errors(inputs, _top_classes_of(path, answered, readable, top_k), errors)


def _classify_bytes(function, inputs):
    """Each readable file sent alone (one request each, as TF Serving would get them), so
    that a file that is not an image fails alone. `(outputs per readable file, errors)`."""
    ((name, _),) = _signature_inputs(function).items()
    answered, errors = [], {}
    for item in inputs:
        errors[item] = _image_file_error(item)
        if errors[item] is not None:
            continue
        try:
            answered.append(function(**{name: tf.constant([pathlib.Path(item).read_bytes()])}))
        except tf.errors.InvalidArgumentError as error:
            known = re.search(r"Unknown image file format|[^\n]*(?:[Tt]runcated|[Cc]orrupt)[^\n]*",
                              error.message or "")
            reason = known.group(0).strip() if known else "the SavedModel could not decode it"
            errors[item] = ("not an image (unknown format)" if known and "Unknown" in reason
                            else f"not a readable image ({reason})")
        else:
            del errors[item]
    return answered, errors


def _top_classes_of(path, outputs_list, inputs, top_k):
    """`_top_classes` of signature outputs (one batch or one per input), names from the export."""
    if not outputs_list:
        return []
    if any("probabilities" not in outputs for outputs in outputs_list):
        raise ZooError(f"{path}: no probabilities among the outputs {sorted(outputs_list[0])}")
    probabilities = np.concatenate([o["probabilities"].numpy() for o in outputs_list])  # (B, K)
    class_names = [str(i) for i in range(probabilities.shape[-1])]
    for outputs in outputs_list:
        if "classes" in outputs and "class_names" in outputs:  # the export's top-k names
            for ids, names in zip(outputs["classes"].numpy(), outputs["class_names"].numpy()):
                for index, name in zip(ids.tolist(), names.tolist()):
                    class_names[index] = name.decode("utf-8")
    return _top_classes(inputs, probabilities, class_names, top_k)
