"""A timm `VisionTransformer` state dict as a `zoo.vit.weights.checkpoint.Checkpoint`.

Names (PyTorch layouts: linear weights `(out, in)`, convolutions OIHW):
`patch_embed.proj.{weight,bias}`, `cls_token` `(1, 1, D)` (absent with
`class_token=False`), `pos_embed` `(1, T, D)`, per block `blocks.{i}.`:
`norm1`, `attn.qkv` (query, key and value fused: weight `(3D, D)`, bias
`(3D,)`, absent with `qkv_bias=False`), `attn.proj`, `norm2`, `mlp.fc1`,
`mlp.fc2`; then `norm` (before pooling) or `fc_norm` (after average pooling,
timm's default with `global_pool="avg"`), `head`.

timm's ViTs use layer-norm epsilon 1e-6 and the exact GELU. The state dict
does not say how inputs were normalised; timm's Hub folders do, in the
`config.json` next to the weights (`save_for_hf`): `pretrained_cfg.mean` and
`.std` (at the top level in older versions), which become `pixel_mean` and
`pixel_std`. Without them [-1, 1] is assumed (`pixel_mean=0.5, pixel_std=0.5`,
timm's augreg weights and Google's they come from), with a warning; weights
trained on ImageNet statistics need `pixel_mean=(0.485, 0.456, 0.406),
pixel_std=(0.229, 0.224, 0.225)` given to `zoo.get`.
"""

import json
import pathlib

from zoo.errors import ZooError
from zoo.vit.weights.checkpoint import Checkpoint, block_path, implied_fields

# What a timm file is assumed to take when its folder does not say: [-1, 1].
ASSUMED_STATISTICS = dict(pixel_mean=0.5, pixel_std=0.5)

# Parts of timm ViT variants the zoo's ViT does not have.
_UNSUPPORTED = {
    ".ls1.": "layer scale", ".ls2.": "layer scale", "norm_pre.": "a pre-norm",
    ".q_norm.": "query-key norm", ".k_norm.": "query-key norm", "reg_token": "register tokens",
    "attn_pool.": "attention pooling",
}


def _check_supported(path, sd):
    for name in sd:
        for marker, what in _UNSUPPORTED.items():
            if marker in name:
                raise ZooError(f"{path}: tensor {name!r} is {what}, which the zoo's ViT does "
                                 "not have.")


def _linear(sd, name):
    """`(name, weight transposed to (in, out))` or `(name, None)`."""
    weight = sd.get(name)
    return (name, None if weight is None else weight.T)


def _attention(sd, i):
    """The block's fused `qkv` split into query, key and value, and `proj`."""
    tensors = {}
    qkv, bias = sd.get(f"blocks.{i}.attn.qkv.weight"), sd.get(f"blocks.{i}.attn.qkv.bias")
    for j, part in enumerate(("query", "key", "value")):
        name = f"blocks.{i}.attn.qkv.weight"
        if qkv is not None and qkv.ndim == 2 and qkv.shape[0] % 3 == 0:
            rows = qkv.shape[0] // 3
            tensors[block_path(i, f"self_attention/{part}_kernel")] = (
                f"{name}[{part}]", qkv[j * rows : (j + 1) * rows].T)
        else:  # missing, or not 3 stacked matrices: reported with the fused shape
            tensors[block_path(i, f"self_attention/{part}_kernel")] = (name, qkv)
        rows = None if bias is None else bias.shape[0] // 3
        tensors[block_path(i, f"self_attention/{part}_bias")] = (
            f"blocks.{i}.attn.qkv.bias[{part}]",
            None if bias is None else bias[j * rows : (j + 1) * rows])
    tensors[block_path(i, "self_attention/output_kernel")] = _linear(sd, f"blocks.{i}.attn.proj.weight")
    tensors[block_path(i, "self_attention/output_bias")] = (
        f"blocks.{i}.attn.proj.bias", sd.get(f"blocks.{i}.attn.proj.bias"))
    return tensors


def _block(sd, i):
    tensors = _attention(sd, i)
    for ours, theirs in (("self_attention_norm", "norm1"), ("feed_forward_norm", "norm2")):
        for kind, leaf in (("gamma", "weight"), ("beta", "bias")):
            name = f"blocks.{i}.{theirs}.{leaf}"
            tensors[block_path(i, f"{ours}/{kind}")] = (name, sd.get(name))
    for ours, theirs in (("inner_dense", "fc1"), ("output_dense", "fc2")):
        tensors[block_path(i, f"feed_forward/{ours}/kernel")] = _linear(
            sd, f"blocks.{i}.mlp.{theirs}.weight")
        name = f"blocks.{i}.mlp.{theirs}.bias"
        tensors[block_path(i, f"feed_forward/{ours}/bias")] = (name, sd.get(name))
    return tensors


def _statistic(config, key, value):
    """A `mean`/`std` of timm's config as a `ViTConfig` value (a float, or one per channel)."""
    values = value if isinstance(value, list) else [value]
    if not values or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        raise ZooError(f"{config}: {key}={value!r} is not a number or a list of numbers.")
    return float(values[0]) if len(set(values)) == 1 else tuple(float(v) for v in values)


def input_statistics(path):
    """`(fields, warning)`: `pixel_mean`/`pixel_std` from timm's `config.json` next to `path`,
    and None; else `ASSUMED_STATISTICS` and the warning that says so."""
    config = pathlib.Path(path).parent / "config.json"
    if not config.is_file():
        reason = "no config.json next to it says them"
    else:
        try:
            hub = json.loads(config.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            hub = None
        cfg = hub.get("pretrained_cfg", hub) if isinstance(hub, dict) else None  # older: flat
        if isinstance(cfg, dict) and cfg.get("mean") is not None and cfg.get("std") is not None:
            return {"pixel_mean": _statistic(config, "mean", cfg["mean"]),
                    "pixel_std": _statistic(config, "std", cfg["std"])}, None
        reason = f"{config} has no timm pretrained_cfg with mean and std"
    mean, std = ASSUMED_STATISTICS["pixel_mean"], ASSUMED_STATISTICS["pixel_std"]
    warning = (f"{path}: the input statistics of this timm state dict are not known ({reason}); "
               f"assuming pixel_mean={mean}, pixel_std={std} (inputs scaled to [-1, 1], as timm's "
               "augreg and Google's weights). For weights trained otherwise give them: "
               "zoo.get(..., pixel_mean=..., pixel_std=...), e.g. ImageNet's "
               "pixel_mean=(0.485, 0.456, 0.406), pixel_std=(0.229, 0.224, 0.225).")
    return dict(ASSUMED_STATISTICS), warning


def read(path, sd):
    """The `Checkpoint` of a timm state dict `sd` (from `zoo.checkpoints.read`)."""
    if "patch_embed.proj.weight" not in sd or "pos_embed" not in sd:
        raise ZooError(f"{path}: no tensors 'patch_embed.proj.weight' and 'pos_embed': not a "
                         "timm ViT state dict (nor a Hugging Face one).")
    _check_supported(path, sd)
    num_layers = 0
    while f"blocks.{num_layers}.norm1.weight" in sd:
        num_layers += 1
    kernel, table = sd["patch_embed.proj.weight"], sd["pos_embed"]
    norm = "fc_norm" if "fc_norm.weight" in sd else "norm"
    tensors = {
        # OIHW -> HWIO
        "patch_embedding/projection/kernel": ("patch_embed.proj.weight",
                                              kernel.transpose(2, 3, 1, 0) if kernel.ndim == 4 else kernel),
        "patch_embedding/projection/bias": ("patch_embed.proj.bias", sd.get("patch_embed.proj.bias")),
        "position_embedding/position_embeddings": ("pos_embed", table.reshape(-1, table.shape[-1])),
        "encoder_norm/gamma": (f"{norm}.weight", sd.get(f"{norm}.weight")),
        "encoder_norm/beta": (f"{norm}.bias", sd.get(f"{norm}.bias")),
        "head/kernel": _linear(sd, "head.weight"),
        "head/bias": ("head.bias", sd.get("head.bias")),
    }
    if "cls_token" in sd:
        tensors["class_token/token"] = ("cls_token", sd["cls_token"])
    for i in range(num_layers):
        tensors.update(_block(sd, i))
    statistics, warning = input_statistics(path)
    fields = dict(implied_fields(path, tensors), layer_norm_epsilon=1e-6, activation="gelu",
                  pooled_norm=norm == "fc_norm", **statistics)
    return Checkpoint(str(path), "timm", tensors, num_layers, fields, statistics_warning=warning)
