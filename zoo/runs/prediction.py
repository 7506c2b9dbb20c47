"""`predict`: translate sentences or classify image files with a run directory or an
exported SavedModel."""

import json
import pathlib

import keras
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401 - registers the tokenizer's ops for loading SavedModels

from zoo.runs.inference import translate
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


def _load_image_files(paths, height, width, channels):
    color_mode = {1: "grayscale", 3: "rgb", 4: "rgba"}[channels]
    images = []
    for path in paths:
        if not pathlib.Path(path).is_file():
            raise FileNotFoundError(f"image file not found: {path}")
        image = keras.utils.load_img(path, color_mode=color_mode, target_size=(height, width))
        images.append(np.asarray(keras.utils.img_to_array(image), np.uint8))
    return np.stack(images)  # (B, H, W, C)


def predict(path, inputs, beam_size=None, alpha=0.6, top_k=5, checkpoint="best"):
    """Translate sentences or classify image files with a run or an exported SavedModel.

    Args:
        path: a run directory (in-process decoding of its checkpoint) or a
            SavedModel (a version folder, or an export root: its newest
            version), loaded with `tf.saved_model.load`.
        inputs: sentences (translation) or image file paths (images).
        beam_size: run directories: 1 = greedy, more = beam search (default 4,
            as the export's `serving_default`).
            SavedModels: 1 uses the `greedy` signature, else `serving_default`.
        alpha: beam search length penalty (run directories).
        top_k: classes listed per image.
        checkpoint: run directories: `"best"` or `"last"`.

    Returns:
        list of dicts, one per input: `{"input", "translation"}` or
        `{"input", "classes": [(name, probability), ...]}`.
    """
    inputs = list(inputs)
    if not inputs:
        raise ValueError("predict needs at least one input (sentences or image files)")
    path = pathlib.Path(path)
    if (path / "config.json").is_file():
        run = load_run(path, checkpoint)
        if run.kind == "translation":
            if beam_size is None:
                beam_size = 4
            outputs = translate(run, inputs, beam_size=beam_size, alpha=alpha)
            return [{"input": s, "translation": t} for s, t in zip(inputs, outputs)]
        model_config = run.config["model_config"]
        size, channels = model_config["image_size"], model_config["channels"]
        images = _load_image_files(inputs, size, size, channels)
        logits = run.model.predict(images, verbose=0)
        probabilities = keras.ops.convert_to_numpy(keras.ops.softmax(logits, axis=-1))
        return _top_classes(inputs, probabilities, run.class_names, top_k)
    saved = resolve_saved_model(path)
    if saved is None:
        raise FileNotFoundError(
            f"{path} is neither a run directory (no config.json) nor a SavedModel "
            "(no saved_model.pb, nor numbered versions holding one)"
        )
    return _predict_saved_model(saved, inputs, beam_size, top_k)


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


def _translate_with_saved_model(path, signatures, inputs, beam_size):
    """Translations by the export's `serving_default` (beam search) or `greedy` signature."""
    default = signatures["serving_default"]
    metadata_path = path / "assets.extra" / "zoo_export.json"
    exported = json.loads(metadata_path.read_text()) if metadata_path.is_file() else {}
    if beam_size not in (None, 1) and beam_size != exported.get("beam_size", beam_size):
        raise ValueError(
            f"{path} was exported with beam size {exported['beam_size']}: use --beam-size "
            f"{exported['beam_size']} (serving_default) or 1 (greedy), or export again"
        )
    function = signatures.get("greedy") if beam_size == 1 else default
    if function is None:
        raise ValueError(f"{path} has no greedy signature")
    (name, _), = _signature_inputs(function).items()
    outputs = function(**{name: tf.constant(inputs, tf.string)})
    translations = [t.decode("utf-8") for t in outputs["translation"].numpy().tolist()]
    return [{"input": s, "translation": t} for s, t in zip(inputs, translations)]


def _predict_saved_model(path, inputs, beam_size, top_k):
    loaded = tf.saved_model.load(str(path))
    signatures = dict(loaded.signatures)
    if "serving_default" not in signatures:
        raise ValueError(f"{path} has no serving_default signature")
    default = signatures["serving_default"]
    specs = _signature_inputs(default)
    if len(specs) != 1:
        raise ValueError(f"{path}: serving_default should take one input; it takes {sorted(specs)}")
    ((input_name, spec),) = specs.items()
    if spec.dtype == tf.string:  # translation: text in
        return _translate_with_saved_model(path, signatures, inputs, beam_size)
    # Images: the signature that takes encoded image bytes, else uint8 arrays.
    by_bytes = [
        function for key, function in sorted(signatures.items())
        if len(_signature_inputs(function)) == 1
        and next(iter(_signature_inputs(function).values())).dtype == tf.string
    ]
    for item in inputs:
        if not pathlib.Path(item).is_file():
            raise FileNotFoundError(f"image file not found: {item}")
    if by_bytes:
        ((name, _),) = _signature_inputs(by_bytes[0]).items()
        data = [pathlib.Path(item).read_bytes() for item in inputs]
        outputs = by_bytes[0](**{name: tf.constant(data, tf.string)})
    else:
        height, width, channels = spec.shape[1:]
        images = _load_image_files(inputs, height, width, channels)
        outputs = default(**{input_name: tf.constant(images, spec.dtype)})
    if "probabilities" not in outputs:
        raise ValueError(f"{path}: no probabilities among the outputs {sorted(outputs)}")
    probabilities = outputs["probabilities"].numpy()  # (B, K)
    class_names = [str(i) for i in range(probabilities.shape[-1])]
    if "classes" in outputs and "class_names" in outputs:  # the export's top-k names
        for ids, names in zip(outputs["classes"].numpy(), outputs["class_names"].numpy()):
            for index, name in zip(ids.tolist(), names.tolist()):
                class_names[index] = name.decode("utf-8")
    return _top_classes(inputs, probabilities, class_names, top_k)
