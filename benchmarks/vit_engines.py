"""The ViT engines of `bench_inference.py vit`, each served in a process of its own.

    python benchmarks/vit_engines.py write-timm SETTINGS.json   # the timm model, its ONNX export
    python benchmarks/vit_zoo_export.py SETTINGS.json           # the zoo's exports (PYTHONPATH: the repo)
    python benchmarks/vit_engines.py ENGINE SETTINGS.json       # serve one engine

An engine loads, prints `ready`, then answers one JSON line per request line
`{"batch": B, "count": N, "outputs": bool}`: it classifies the first N images of the
settings' `.npy` file (uint8 `(N, H, W, 3)`) in batches of B and replies
`{"seconds": wall time, "log_probs": [[...], ...] or null}` (each image's log-softmax over
the classes, when `outputs`). Every engine takes the same uint8 images and ends with the
same normalised input, `x / 255` minus 0.5, divided by 0.5 (timm's `vit_base_patch16_224`
statistics): the zoo's exports inside their graph (the model's `pixel_mean`/`pixel_std`,
read from the `config.json` written beside the weights), timm and ONNX Runtime in the
timed call (NHWC uint8 -> NCHW float32, in torch and in numpy).

Engines: `saved-model`, `saved-model-jit` (`tf.saved_model.load` of the zoo's default and
`jit_compile=True` exports, `serving_default`: probabilities, top-k and class names; the
process never imports the zoo, as a user's serving process would), `timm` (the
PyTorch model, eval, `torch.inference_mode()`), `onnxruntime` (timm's model exported by
`torch.onnx.export`, CPU provider). With the `deploy` extra, the zoo's own exports in the
formats' runtimes (issue #51; `zoo export --format`, uint8 images in, probabilities out, as
`serving_default`): `litert` (`ai_edge_litert`'s interpreter, one per batch size so that no
call reallocates its tensors), `onnxruntime-zoo` (the zoo's ONNX file, written through
tf2onnx), `openvino` (OpenVINO's CPU plugin at f32 inference precision, as the export's
`runtime_options` say) and `openvino-bf16` (the plugin's default on CPUs with AVX512_BF16 or
AMX: bfloat16), and `litert-int8`, `onnxruntime-zoo-int8` (`--quantize int8`). Threads:
`threads` for TensorFlow's intra- and inter-op pools, `torch.set_num_threads`, ONNX Runtime's
intra-op pool (inter-op 1, sequential execution), LiteRT's `num_threads`, OpenVINO's
`INFERENCE_NUM_THREADS`.

The model: timm's `vit_base_patch16_224` (`size` "full") or a one-block VisionTransformer
of width 32 at 224x224 (`size` "tiny"), random weights from `seed` (timm's own
initialisation, `pretrained=False`), saved as a timm state dict (safetensors) and read
into the zoo by `zoo.get(..., weights=PATH)` (`zoo.vit.weights.timm`).
"""

import json
import os
import sys
import time

import numpy as np
from engine_processes import set_tf_threads  # standard library only

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

MEAN = STD = 0.5  # timm's vit_base_patch16_224 (augreg): inputs in [-1, 1]
TINY_TIMM = dict(img_size=224, patch_size=16, embed_dim=32, depth=1, num_heads=2, mlp_ratio=2.0,
                 num_classes=10)
TINY_ZOO = dict(image_size=224, patch_size=16, hidden_dim=32, num_layers=1, num_heads=2, mlp_dim=64,
                num_classes=10)


def log_softmax(x):
    x = np.asarray(x, np.float64)
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def normalised(images):
    """uint8 NHWC -> float32 NCHW, `(x / 255 - MEAN) / STD`."""
    x = (images.astype(np.float32) / np.float32(255) - np.float32(MEAN)) / np.float32(STD)
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2))


def timm_model(settings):
    import timm
    import torch

    torch.manual_seed(settings["seed"])
    if settings["size"] == "tiny":
        from timm.models.vision_transformer import VisionTransformer

        return VisionTransformer(**TINY_TIMM).eval()
    return timm.create_model("vit_base_patch16_224", pretrained=False).eval()


def write_timm(settings):
    """The state dict (safetensors) with the statistics in a `config.json` beside it, as
    timm's `save_for_hf` writes them, and the ONNX export (batch axis dynamic)."""
    import safetensors.torch
    import torch

    model = timm_model(settings)
    state = {name: tensor.contiguous() for name, tensor in model.state_dict().items()}
    safetensors.torch.save_file(state, settings["timm"])
    config = {"pretrained_cfg": {"mean": [MEAN] * 3, "std": [STD] * 3}}
    with open(os.path.join(os.path.dirname(settings["timm"]), "config.json"), "w") as file:
        json.dump(config, file)
    example = torch.from_numpy(normalised(np.load(settings["images"])[:2]))
    torch.onnx.export(model, (example,), settings["onnx"], input_names=["images"],
                      output_names=["logits"], dynamo=False, opset_version=17,
                      dynamic_axes={"images": {0: "batch"}, "logits": {0: "batch"}})
    print(f"timm model: {sum(p.numel() for p in model.parameters()):,} parameters", flush=True)


# The engines of the zoo's LiteRT, ONNX and OpenVINO exports: (format, quantize) of the export.
FORMAT_ENGINES = {"litert": ("litert", None), "litert-int8": ("litert", "int8"),
                  "onnxruntime-zoo": ("onnx", None), "onnxruntime-zoo-int8": ("onnx", "int8"),
                  "openvino": ("openvino", None), "openvino-bf16": ("openvino", None)}


def saved_model_engine(settings, jit):
    tf = set_tf_threads(settings["threads"])
    signature = tf.saved_model.load(settings["export_jit" if jit else "export"]).signatures["serving_default"]
    if any(module == "zoo" or module.startswith("zoo.") for module in sys.modules):
        raise SystemExit("the SavedModel engine imported the zoo")

    def classify(images):  # uint8 (B, H, W, 3) -> log-probabilities (B, K)
        return np.log(signature(images=tf.constant(images))["probabilities"].numpy())

    return classify


def timm_engine(settings):
    import safetensors.torch
    import torch

    torch.set_num_threads(settings["threads"])
    model = timm_model(settings)
    model.load_state_dict(safetensors.torch.load_file(settings["timm"]))
    mean, std = torch.tensor(MEAN), torch.tensor(STD)

    def classify(images):
        with torch.inference_mode():
            x = torch.from_numpy(images).permute(0, 3, 1, 2).float().div_(255).sub_(mean).div_(std)
            return log_softmax(model(x.contiguous()).numpy())

    return classify


def onnxruntime_engine(settings):
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = settings["threads"]
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    session = onnxruntime.InferenceSession(settings["onnx"], options, providers=["CPUExecutionProvider"])

    def classify(images):
        return log_softmax(session.run(["logits"], {"images": normalised(images)})[0])

    return classify


def litert_engine(settings, engine):
    from ai_edge_litert.interpreter import Interpreter

    path = os.path.join(settings["formats"][engine], "model.tflite")
    runners = {}  # one interpreter per batch size: a new size reallocates every tensor

    def classify(images):
        if len(images) not in runners:
            interpreter = Interpreter(model_path=path, num_threads=settings["threads"])
            runners[len(images)] = interpreter.get_signature_runner()
        return np.log(runners[len(images)](images=images)["probabilities"])

    return classify


def onnxruntime_zoo_engine(settings, engine):
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = settings["threads"]
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    session = onnxruntime.InferenceSession(os.path.join(settings["formats"][engine], "model.onnx"),
                                           options, providers=["CPUExecutionProvider"])
    return lambda images: np.log(session.run(["probabilities"], {"images": images})[0])


def openvino_engine(settings, engine):
    import openvino

    config = {"INFERENCE_NUM_THREADS": settings["threads"]}
    if engine == "openvino":
        config["INFERENCE_PRECISION_HINT"] = "f32"
    compiled = openvino.Core().compile_model(
        os.path.join(settings["formats"][engine], "model.xml"), "CPU", config)
    return lambda images: np.log(compiled({"images": images})["probabilities"])


def load(engine, settings):
    if engine in ("saved-model", "saved-model-jit"):
        return saved_model_engine(settings, engine.endswith("jit"))
    if engine == "timm":
        return timm_engine(settings)
    if engine == "onnxruntime":
        return onnxruntime_engine(settings)
    if engine in FORMAT_ENGINES:
        loader = {"litert": litert_engine, "onnx": onnxruntime_zoo_engine,
                  "openvino": openvino_engine}[FORMAT_ENGINES[engine][0]]
        return loader(settings, engine)
    raise SystemExit(f"unknown engine {engine!r}")


def serve(engine, settings):
    classify = load(engine, settings)
    images = np.load(settings["images"])
    print("ready", flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        batch, outputs = request["batch"], []
        start = time.perf_counter()
        for i in range(0, request["count"], batch):
            outputs.append(classify(images[i: min(i + batch, request["count"])]))
        seconds = time.perf_counter() - start
        log_probs = np.concatenate(outputs).tolist() if request.get("outputs") else None
        print(json.dumps({"seconds": seconds, "log_probs": log_probs}), flush=True)


if __name__ == "__main__":
    with open(sys.argv[2], encoding="utf-8") as settings_file:
        settings_ = json.load(settings_file)
    {"write-timm": write_timm}.get(sys.argv[1], lambda s: serve(sys.argv[1], s))(
        settings_)
