"""A Hugging Face `ViTModel` / `ViTForImageClassification` as a `zoo.vit.weights.checkpoint.Checkpoint`.

A folder from `save_pretrained`: `config.json` and `model.safetensors` (or
`pytorch_model.bin`), optionally `preprocessor_config.json`. Names, under
`vit.` for `ViTForImageClassification`: `embeddings.cls_token`,
`embeddings.position_embeddings` `(1, T, D)`,
`embeddings.patch_embeddings.projection` (OIHW), per layer
`encoder.layer.{i}.`: `layernorm_before`, `attention.attention.{query,key,value}`,
`attention.output.dense`, `layernorm_after`, `intermediate.dense`,
`output.dense` (the names of the Hub's checkpoints; transformers 5 writes
`attention.{q,k,v,o}_proj`, `mlp.fc1`, `mlp.fc2`, also read), then `layernorm`,
and `classifier`. Linear weights are `(out, in)`.

From `config.json`: `layer_norm_eps` (1e-12 by default), `hidden_act`
(`"gelu"` exact; `"gelu_new"`, `"gelu_pytorch_tanh"` the tanh approximation).
From `preprocessor_config.json`: `image_mean`, `image_std` (0.5 without it, as
google/vit-*).
"""

import json
import pathlib

from zoo import checkpoints as tensor_files
from zoo.errors import ZooError
from zoo.vit.weights.checkpoint import Checkpoint, block_path, implied_fields

_GELU = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh",
         "gelu_fast": "gelu_tanh"}
# zoo part -> the layer's names (the Hub's, then transformers 5's).
_LAYER = {
    "self_attention_norm": ("layernorm_before",),
    "feed_forward_norm": ("layernorm_after",),
    "self_attention/query": ("attention.attention.query", "attention.q_proj"),
    "self_attention/key": ("attention.attention.key", "attention.k_proj"),
    "self_attention/value": ("attention.attention.value", "attention.v_proj"),
    "self_attention/output": ("attention.output.dense", "attention.o_proj"),
    "feed_forward/inner_dense": ("intermediate.dense", "mlp.fc1"),
    "feed_forward/output_dense": ("output.dense", "mlp.fc2"),
}


def matches(tensors):
    """Whether a state dict has Hugging Face ViT names."""
    return any(n.startswith(("embeddings.patch_embeddings", "vit.embeddings.")) for n in tensors)


def _get(sd, prefix, names, leaf, transpose=False):
    """`(name, array)` of the first of `prefix + name + leaf` present (the first name if none)."""
    for name in names:
        if f"{prefix}{name}.{leaf}" in sd:
            array = sd[f"{prefix}{name}.{leaf}"]
            return (f"{prefix}{name}.{leaf}", array.T if transpose else array)
    return (f"{prefix}{names[0]}.{leaf}", None)


def _layer(sd, prefix, i):
    tensors = {}
    for part, names in _LAYER.items():
        p = f"{prefix}encoder.layer.{i}."
        if part.endswith("_norm"):
            tensors[block_path(i, f"{part}/gamma")] = _get(sd, p, names, "weight")
            tensors[block_path(i, f"{part}/beta")] = _get(sd, p, names, "bias")
        elif part.startswith("self_attention/"):
            tensors[block_path(i, f"{part}_kernel")] = _get(sd, p, names, "weight", True)
            tensors[block_path(i, f"{part}_bias")] = _get(sd, p, names, "bias")
        else:
            tensors[block_path(i, f"{part}/kernel")] = _get(sd, p, names, "weight", True)
            tensors[block_path(i, f"{part}/bias")] = _get(sd, p, names, "bias")
    return tensors


def _files(folder):
    config = folder / "config.json"
    weights = [folder / n for n in ("model.safetensors", "pytorch_model.bin")]
    weights = [w for w in weights if w.is_file()]
    if not config.is_file() or not weights:
        raise FileNotFoundError(f"{folder}: a checkpoint folder needs config.json and "
                                "model.safetensors (or pytorch_model.bin).")
    return config, weights[0]


def _fields(folder, hf_config):
    activation = hf_config.get("hidden_act", "gelu")
    if activation not in _GELU:
        raise ZooError(f"{folder / 'config.json'}: hidden_act={activation!r} is not a GELU "
                       f"the zoo's ViT has ({', '.join(_GELU)}).")
    fields = dict(layer_norm_epsilon=float(hf_config.get("layer_norm_eps", 1e-12)),
                  activation=_GELU[activation], pooled_norm=False, pixel_mean=0.5, pixel_std=0.5)
    preprocessor = folder / "preprocessor_config.json"
    if preprocessor.is_file():
        statistics = json.loads(preprocessor.read_text())
        for ours, theirs in (("pixel_mean", "image_mean"), ("pixel_std", "image_std")):
            value = statistics.get(theirs)
            if isinstance(value, list):
                value = value[0] if len(set(value)) == 1 else tuple(value)
            if value is not None:
                fields[ours] = value
    return fields


def read(path, sd=None):
    """The `Checkpoint` of a Hugging Face folder (or of its state dict `sd`, with defaults)."""
    path = pathlib.Path(path)
    hf_config, folder = {}, path.parent
    if sd is None:
        config_file, weights = _files(path)
        try:
            hf_config = json.loads(config_file.read_text())
        except ValueError:
            raise ZooError(f"{config_file}: not a JSON file.") from None
        sd, folder = tensor_files.read(weights), path
    prefix = "vit." if any(n.startswith("vit.") for n in sd) else ""
    if f"{prefix}embeddings.patch_embeddings.projection.weight" not in sd:
        raise ZooError(f"{path}: no tensor '{prefix}embeddings.patch_embeddings.projection."
                       "weight': not a Hugging Face ViT checkpoint.")
    num_layers = 0
    while any(n.startswith(f"{prefix}encoder.layer.{num_layers}.") for n in sd):
        num_layers += 1
    e = f"{prefix}embeddings."
    kernel, table = sd[f"{e}patch_embeddings.projection.weight"], sd[f"{e}position_embeddings"]
    tensors = {
        "patch_embedding/projection/kernel": (f"{e}patch_embeddings.projection.weight",
                                              kernel.transpose(2, 3, 1, 0)),  # OIHW -> HWIO
        "patch_embedding/projection/bias": _get(sd, e, ("patch_embeddings.projection",), "bias"),
        "class_token/token": (f"{e}cls_token", sd.get(f"{e}cls_token")),
        "position_embedding/position_embeddings": (f"{e}position_embeddings",
                                                   table.reshape(-1, table.shape[-1])),
        "encoder_norm/gamma": _get(sd, prefix, ("layernorm",), "weight"),
        "encoder_norm/beta": _get(sd, prefix, ("layernorm",), "bias"),
        "head/kernel": _get(sd, "", ("classifier",), "weight", True),
        "head/bias": _get(sd, "", ("classifier",), "bias"),
    }
    for i in range(num_layers):
        tensors.update(_layer(sd, prefix, i))
    fields = dict(implied_fields(path, tensors), **_fields(folder, hf_config))
    num_heads = hf_config.get("num_attention_heads")
    return Checkpoint(str(path), "huggingface", tensors, num_layers, fields,
                      None if num_heads is None else int(num_heads))
