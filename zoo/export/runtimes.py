"""Running a LiteRT, ONNX or OpenVINO export of a ViT (`zoo.export.formats`).

    deployed = runtimes.load("saved_models/fashion-onnx")  # a version, or a root: its newest
    probabilities = deployed.classify(images)              # uint8 (B, H, W, C) -> (B, K)
    results = runtimes.predict(path, ["shirt.png"], top_k=3)  # what `zoo predict` prints

Each format runs in its own runtime (the `deploy` extra), as a user's process would run it:
`ai_edge_litert`'s interpreter, an ONNX Runtime session on the CPU, OpenVINO's CPU plugin
with the export's `runtime_options` (f32 inference precision). `read_images` decodes and
resizes image files as the SavedModel's `predict_image_bytes` does
(`zoo.export.image.decode_image`) and rounds them to uint8, the formats' input: an image of
the model's size reaches the model with the SavedModel's pixels.
"""

import dataclasses
import pathlib
import typing

import numpy as np
import tensorflow as tf

from zoo import files
from zoo.errors import ZooError
from zoo.export.formats import FORMATS, require
from zoo.export.image import decode_image

METADATA = pathlib.Path("assets.extra") / "zoo_export.json"


@dataclasses.dataclass(frozen=True)
class Deployed:
    """A loaded export: its version directory, format, metadata (`zoo_export.json`) and
    `classify(images uint8 (B, H, W, C)) -> probabilities float32 (B, K)`."""

    path: pathlib.Path
    format: str
    metadata: dict
    classify: typing.Callable


def _format(directory):
    """The `format` its metadata names; None without readable metadata (a SavedModel's is
    then the SavedModel path's to report)."""
    try:
        return files.read_json(directory / METADATA, dict).get("format")
    except (OSError, files.CorruptFileError):
        return None


def resolve(path, formats=tuple(FORMATS)):
    """The version directory of a LiteRT, ONNX or OpenVINO export at `path` (a version, or a
    root whose newest version is one); else None (a SavedModel, a run, anything else).
    `formats`: the formats looked for (`zoo.export.ctranslate2_runtime`: CTranslate2's)."""
    path = pathlib.Path(path)
    if _format(path) in formats:
        return path
    if not path.is_dir():
        return None
    versions = sorted((int(child.name), child) for child in path.iterdir()
                      if child.name.isdigit() and child.is_dir()
                      and (_format(child) is not None or (child / "saved_model.pb").is_file()))
    if versions and _format(versions[-1][1]) in formats:
        return versions[-1][1]
    return None


def load(path):
    """The `Deployed` export at `path` (see `resolve`); its runtime must be installed."""
    directory = resolve(path)
    if directory is None:
        raise FileNotFoundError(f"{path} is not a LiteRT, ONNX or OpenVINO export "
                                f"(no {METADATA} naming one of {tuple(FORMATS)})")
    metadata = files.read_json(directory / METADATA, dict)
    spec = FORMATS[metadata["format"]]
    runtime = require(spec.runtime[0], spec.runtime[1], f"a {spec.name} export ({directory})")
    model_file = directory / spec.files[0]
    options = metadata.get("runtime_options", spec.options)
    run = {"litert": _litert, "onnx": _onnx, "openvino": _openvino}[spec.name](
        runtime, model_file, options)
    empty = np.zeros((0, len(metadata["class_names"])), np.float32)

    def classify(images):  # an empty batch as the SavedModel answers it (ONNX Runtime fails)
        return run(np.asarray(images, np.uint8)) if len(images) else empty

    return Deployed(directory, spec.name, metadata, classify)


def _litert(runtime, model_file, options):
    runner = runtime.Interpreter(model_path=str(model_file)).get_signature_runner()
    return lambda images: runner(images=images)["probabilities"]


def _onnx(runtime, model_file, options):
    session = runtime.InferenceSession(str(model_file), providers=["CPUExecutionProvider"])
    return lambda images: session.run(["probabilities"], {"images": images})[0]


def _openvino(runtime, model_file, options):
    compiled = runtime.Core().compile_model(str(model_file), "CPU", options)
    return lambda images: compiled({"images": images})["probabilities"]


def read_images(paths, height, width, channels):
    """`(uint8 (B', H, W, C) of the readable files, {path: reason} of the others)`: decoded,
    converted to `channels` and resized as `predict_image_bytes` does, rounded to uint8."""
    images, errors = [], {}
    for path in paths:
        file = pathlib.Path(path)
        if not file.is_file():
            errors[path] = "not a file" if file.exists() else "file not found"
            continue
        try:
            image = decode_image(tf.constant(file.read_bytes()), height, width, channels)
        except tf.errors.InvalidArgumentError as error:
            message = " ".join((error.message or "").split())
            errors[path] = ("not an image (unknown format)" if "Unknown image file format" in message
                            else f"not a readable image ({message[:200]})")
            continue
        images.append(tf.cast(tf.round(image), tf.uint8).numpy())
    stacked = np.stack(images) if images else np.zeros((0, height, width, channels), np.uint8)
    return stacked, errors


def predict(path, inputs, top_k=5):
    """Classify image files with the export at `path`: one dict per input, as `zoo.runs.predict`
    gives for a SavedModel, `{"input", "classes": [(name, probability), ...]}` (the `top_k`
    most probable, most probable first) or `{"input", "error"}` for a file it cannot read."""
    inputs = list(inputs)
    if not inputs:
        raise ZooError("predict needs at least one input (image files)")
    deployed = load(path)
    images, errors = read_images(inputs, *deployed.metadata["image_shape"])
    rows = iter(deployed.classify(images))
    names = deployed.metadata["class_names"]
    results = []
    for item in inputs:
        if item in errors:
            results.append({"input": str(item), "error": errors[item]})
            continue
        row = next(rows)
        order = np.argsort(-row)[:top_k]
        results.append({"input": str(item), "classes": [(names[i], float(row[i])) for i in order]})
    return results
