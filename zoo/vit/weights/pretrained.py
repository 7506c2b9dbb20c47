"""Pretrained ViT weights, whatever their format: `zoo.get("vit-b16", weights=PATH)`.

`read(path)` recognises the file (Google's `.npz`, a timm state dict in
`.safetensors` or `.pth`, a Hugging Face folder or `model.safetensors`) and
returns its `zoo.vit.weights.checkpoint.Checkpoint`; importing this module
registers `read` as the ViT family's weights reader.
"""

import pathlib

from zoo import checkpoints as tensor_files
from zoo import registry
from zoo.vit.weights import huggingface as vit_huggingface
from zoo.vit.weights import npz as vit_npz
from zoo.vit.weights import timm as vit_timm


def read(path):
    """The `Checkpoint` of a `.npz`, `.safetensors`, `.pth` file or a Hugging Face folder."""
    path = pathlib.Path(path)
    if path.is_dir():
        return vit_huggingface.read(path)
    tensors = tensor_files.read(path)
    if path.suffix.lower() == ".npz":
        return vit_npz.read(path, tensors)
    if vit_huggingface.matches(tensors):
        return vit_huggingface.read(path, tensors)
    return vit_timm.read(path, tensors)


def load(name, path, **overrides):
    """A ViT entry built from `zoo.get(name, **overrides)` with the weights at `path` (uncompiled).

    Same as `zoo.get(name, weights=path, compile=False, **overrides)`.
    """
    return registry.get(name, weights=path, compile=False, **overrides)

