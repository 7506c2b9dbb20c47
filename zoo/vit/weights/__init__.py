"""Pretrained ViT weights: `zoo.get("vit-b16", weights=PATH)`.

`pretrained.read(path)` recognises the format and returns a
`checkpoint.Checkpoint`, read by one module per format: `npz` (Google's
vit_jax and big_vision), `timm` (a timm state dict), `huggingface` (a
`ViTModel` folder or `model.safetensors`); `resample` fits the position table
to another image size.
"""

from zoo.vit.weights.checkpoint import FINE_TUNING, LINEAR_PROBE_LEARNING_RATE, Checkpoint
from zoo.vit.weights.pretrained import load, read

__all__ = ["FINE_TUNING", "LINEAR_PROBE_LEARNING_RATE", "Checkpoint", "load", "read"]
