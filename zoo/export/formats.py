"""A ViT as LiteRT, ONNX or OpenVINO: `zoo.export(model, path, format="onnx")`, `zoo export RUN
--format onnx`.

Each format holds what the SavedModel's `serving_default` computes, uint8 images in and
probabilities out: `probabilities_model` wraps the ViT in a Keras model (uint8 `(B, H, W, C)`
cast to float32, the ViT with its own `Rescaling`, softmax), and Keras 3's
`model.export(path, format=...)` writes it:

    litert    model.tflite             TensorFlow's converter, LiteRT built-in ops only
    onnx      model.onnx               tf2onnx (opset 17), with a handler for TensorFlow's
                                       `Erfc` (the exact GELU), which tf2onnx lacks
    openvino  model.xml, model.bin     `openvino.convert_model` of the traced function

Every format is written into `<path>/<version>/` with `assets.extra/zoo_export.json` beside the
model file (`zoo.export`: written beside, renamed when complete), the layout that OpenVINO
Model Server and Triton read too. The JSON says the format, the input and output, the
preprocessing inside the graph, the class names and the runtime to load it with
(`zoo.export.runtimes`). Input `images` uint8 `(B, H, W, C)`, any batch size; output
`probabilities` float32 `(B, K)`: no top-k, no class names, no encoded-image signature
(the caller decodes and resizes, `zoo.export.runtimes.read_images`).

`quantize="int8"`: LiteRT's dynamic-range quantization (int8 weights, float activations
quantized at run time) and ONNX Runtime's `quantize_dynamic` (int8 weights of the MatMuls);
OpenVINO's int8 needs NNCF, which the `deploy` extra leaves out. The converters and
runtimes are the `deploy` extra (`pip install -e '.[deploy]'`); a missing one is named
in one line.
"""

import dataclasses
import functools
import importlib
import warnings
from importlib import metadata

import keras
import numpy as np
import tensorflow as tf

from zoo.errors import ZooError
from zoo.export.image import check_image_arguments

SAVED_MODEL = "savedmodel"
CTRANSLATE2 = "ctranslate2"  # a Transformer for CTranslate2 (`zoo.export.ctranslate2`)
INSTALL = "pip install -e '.[deploy]'"
ONNX_OPSET = 17


@dataclasses.dataclass(frozen=True)
class Format:
    """A deployment format: its files, the packages that write and run it, its int8 scheme."""

    name: str
    files: tuple
    converter: tuple  # (module, pip package) that writes it, besides TensorFlow
    runtime: tuple  # (module, pip package) that runs it
    int8: str = None  # what quantize="int8" does, or None
    options: dict = dataclasses.field(default_factory=dict)  # the runtime's, for parity


FORMATS = {
    "litert": Format("litert", ("model.tflite",), (),
                     ("ai_edge_litert.interpreter", "ai-edge-litert"),
                     "LiteRT dynamic-range quantization: int8 weights, activations "
                     "quantized at run time"),
    "onnx": Format("onnx", ("model.onnx",), ("tf2onnx", "tf2onnx"),
                   ("onnxruntime", "onnxruntime"),
                   "ONNX Runtime quantize_dynamic: int8 MatMul weights (QInt8), activations "
                   "quantized at run time"),
    # OpenVINO's CPU plugin computes in bfloat16 by default on CPUs with AVX512_BF16 or AMX
    # (1.6e-3 from float32 on vit-tiny); f32 keeps the SavedModel's probabilities.
    "openvino": Format("openvino", ("model.xml", "model.bin"), ("openvino", "openvino"),
                       ("openvino", "openvino"), options={"INFERENCE_PRECISION_HINT": "f32"}),
}


def require(module, package, purpose):
    """`importlib.import_module(module)`, or a ZooError saying how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ZooError(
            f"{purpose} needs {package}, which is not installed: {INSTALL} (the deploy "
            "extra), or make test-deploy"
        ) from None


def check_format(format, family, quantize, jit_compile):  # noqa: A002 - export's argument
    """Raise ZooError unless `format` can be written for this family with these options."""
    known = (SAVED_MODEL, *FORMATS, CTRANSLATE2)
    if format not in known:
        raise ZooError(f"export: `format` must be one of {known}; received {format!r}.")
    if format == SAVED_MODEL:
        return
    if family != "vit" and format != CTRANSLATE2:  # which models CTranslate2 takes: its check_model
        raise ZooError(
            f"export: format={format!r} is for ViT models; a {family!r} model exports as a "
            f"SavedModel (format={SAVED_MODEL!r}), or a Transformer as {CTRANSLATE2!r}."
        )
    if jit_compile:
        raise ZooError(f"export: jit_compile is for SavedModels; format={format!r} has none.")
    if format == CTRANSLATE2:
        return
    if quantize is not None and FORMATS[format].int8 is None:
        raise ZooError(
            f"export: quantize={quantize!r} is for the litert and onnx formats; OpenVINO's int8 "
            "needs NNCF, which the deploy extra leaves out."
        )


def probabilities_model(model):
    """`images` uint8 (B, H, W, C) -> `{"probabilities": float32 (B, K)}`: the ViT (its own
    `Rescaling` inside) and a softmax, as the SavedModel's `serving_default` computes them."""
    policies = sorted({layer.dtype_policy.name for layer in model.layers if layer.weights})
    if policies != ["float32"]:
        raise ZooError(
            f"export: the deploy formats need a float32 ViT; this one computes in {policies} "
            "(a mixed-precision run: export it as a SavedModel)."
        )
    images = keras.Input(tuple(model.inputs[0].shape[1:]), dtype="uint8", name="images")
    logits = model(keras.ops.cast(images, "float32"), training=False)  # (B, K)
    probabilities = keras.layers.Activation(
        "softmax", dtype="float32", name="probabilities")(logits)
    return keras.Model(images, {"probabilities": probabilities}, name=f"{model.name}_probabilities")


def preprocessing(model):
    """What happens to the pixels inside the exported graph, for the metadata."""
    layers = {layer.name: layer for layer in model.layers}
    described = {
        "input": "uint8 pixels 0-255, (B, H, W, C), RGB or grayscale as image_shape says; "
        "decoding and resizing are the caller's",
        "in_graph": "cast to float32, then x * scale + offset (the ViT's Rescaling layer), "
        "the ViT, softmax",
    }
    if "rescaling" in layers:
        rescaling = layers["rescaling"]
        described["scale"], described["offset"] = rescaling.scale, rescaling.offset
    return described


def deploy_export(model, format, top_k, class_names, quantize):  # noqa: A002
    """Check the arguments; return `(write(directory), metadata)` of a ViT in `format`."""
    spec = FORMATS[format]
    top_k, class_names = check_image_arguments(model, top_k, class_names)
    if spec.converter:
        require(*spec.converter, f"export format={format!r}")
    wrapper = probabilities_model(model)
    height, width, channels = (int(d) for d in model.inputs[0].shape[1:])
    converter = spec.converter[1] if spec.converter else "tensorflow"
    described = {
        "format": format,
        "files": list(spec.files),
        "inputs": {"images": f"uint8 (B, {height}, {width}, {channels})"},
        "outputs": {"probabilities": f"float32 (B, {len(class_names)}), softmax of the logits"},
        "preprocessing": preprocessing(model),
        "image_shape": [height, width, channels],
        "top_k": top_k,
        "class_names": class_names,
        "quantization_scheme": spec.int8 if quantize else None,
        "runtime": spec.runtime[1],
        "runtime_options": spec.options,
        "converter": {"keras": keras.__version__, converter: metadata.version(converter)},
    }
    writer = {"litert": write_litert, "onnx": write_onnx, "openvino": write_openvino}[format]
    return functools.partial(writer, wrapper, quantize=quantize), described


def input_signature(wrapper):
    """`images` uint8 (B, H, W, C), any batch size."""
    return [tf.TensorSpec((None, *wrapper.inputs[0].shape[1:]), tf.uint8, name="images")]


def write_litert(wrapper, directory, quantize=None):
    """`model.tflite`: built-in ops only (ai-edge-litert has no TensorFlow ops)."""
    options = {"target_spec": {"supported_ops": [tf.lite.OpsSet.TFLITE_BUILTINS]},
               "input_signature": input_signature(wrapper)}
    if quantize is not None:
        options["optimizations"] = [tf.lite.Optimize.DEFAULT]  # dynamic range
    wrapper.export(str(directory / "model.tflite"), format="litert", verbose=False, **options)


def write_openvino(wrapper, directory, quantize=None):
    """`model.xml` and `model.bin`."""
    wrapper.export(str(directory / "model.xml"), format="openvino", verbose=False,
                   input_signature=input_signature(wrapper))


def write_onnx(wrapper, directory, quantize=None):
    """`model.onnx` (opset 17), its batch axis named `batch`; with `quantize`, ONNX Runtime's
    dynamic int8 quantization of it."""
    onnx = require("onnx", "onnx", "export format='onnx'")
    register_erfc()
    path = directory / "model.onnx"
    written = directory / "float32.onnx" if quantize else path
    with warnings.catch_warnings():  # Keras' numpy-2 patch of tf2onnx warns about np.object
        warnings.simplefilter("ignore", FutureWarning)
        wrapper.export(str(written), format="onnx", verbose=False, opset_version=ONNX_OPSET,
                       input_signature=input_signature(wrapper))
    proto = onnx.load(str(written))
    for value in (*proto.graph.input, *proto.graph.output):
        value.type.tensor_type.shape.dim[0].dim_param = "batch"
    onnx.save(proto, str(written))
    if quantize:
        quantization = require("onnxruntime.quantization", "onnxruntime", "quantize='int8'")
        quantization.quantize_dynamic(str(written), str(path),
                                      weight_type=quantization.QuantType.QInt8)
        written.unlink()


@functools.cache
def register_erfc():
    """Teach tf2onnx TensorFlow's `Erfc` (in `tf.nn.gelu(approximate=False)`, the ViT's GELU):
    erfc(x) = 1 - erf(x), with ONNX's `Erf` (opset 9 on)."""
    handler = require("tf2onnx.handler", "tf2onnx", "export format='onnx'")
    make_name = require("tf2onnx.utils", "tf2onnx", "export format='onnx'").make_name

    class Erfc:
        @classmethod
        def version_9(cls, ctx, node, **kwargs):
            node.type = "Erf"
            one = ctx.make_const(make_name("erfc_one"), np.array(1, np.float32))
            ctx.insert_new_node_on_output("Sub", node.output[0], name=make_name(f"{node.name}_erfc"),
                                          inputs=[one.output[0], node.output[0]])

    handler.tf_op("Erfc")(Erfc)
