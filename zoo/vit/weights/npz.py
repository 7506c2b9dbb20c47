"""Google's ViT `.npz` checkpoints (vit_jax, big_vision) as a `zoo.vit.weights.checkpoint.Checkpoint`.

Names (optionally under `params/` or `opt/target/`): `embedding/kernel`
`(P, P, C, D)` (HWIO, the zoo's layout) and `bias`, `cls` `(1, 1, D)`,
`Transformer/posembed_input/pos_embedding` (big_vision: `pos_embedding`)
`(1, T, D)`, `Transformer/encoder_norm/{scale,bias}`, `head/{kernel,bias}`,
and per block `Transformer/encoderblock_{i}/`:

- `LayerNorm_0`, `MultiHeadDotProductAttention_1/{query,key,value}/kernel`
  `(D, N, H)` (+ bias `(N, H)`), `out/kernel` `(N, H, D)`, `LayerNorm_2`,
  `MlpBlock_3/Dense_{0,1}` (vit_jax);
- `MultiHeadDotProductAttention_0`, `LayerNorm_1`, `MlpBlock_0` (big_vision);
- or all blocks stacked on a leading axis under `Transformer/encoderblock/`
  (a scanned model).

The sub-module numbers are read from the names present, as timm's
`_load_weights` does from the layout. The file does not say the GELU kind:
Flax's `nn.gelu` is the tanh approximation, but timm (and the parity tests)
use the exact GELU on these weights; `activation="gelu_tanh"` is Flax's.
Google's models take pixels in [-1, 1] and use layer-norm epsilon 1e-6.
"""

import warnings

from zoo.errors import ZooError
from zoo.vit.weights.checkpoint import Checkpoint, block_path, implied_fields

_PREFIXES = ("", "params/", "opt/target/")


def _layout(names, block):
    """(attention, second layer norm, MLP) sub-module names used under `block`."""
    def first(options):
        found = [o for o in options if any(n.startswith(f"{block}{o}/") for n in names)]
        return found[0] if found else options[0]

    return (
        first(("MultiHeadDotProductAttention_1", "MultiHeadDotProductAttention_0")),
        first(("LayerNorm_2", "LayerNorm_1")),
        first(("MlpBlock_3", "MlpBlock_0")),
    )


def _blocks(path, w, prefix):
    """`(num_layers, block name pattern, scanned)` of the file."""
    scanned = f"{prefix}Transformer/encoderblock/LayerNorm_0/scale"
    if scanned in w:
        return w[scanned].shape[0], f"{prefix}Transformer/encoderblock/", True
    count = 0
    while f"{prefix}Transformer/encoderblock_{count}/LayerNorm_0/scale" in w:
        count += 1
    if not count:
        raise ZooError(f"{path}: no tensor '{prefix}Transformer/encoderblock_0/LayerNorm_0/scale'"
                       " (nor a scanned Transformer/encoderblock/): not a ViT checkpoint.")
    return count, f"{prefix}Transformer/encoderblock_{{i}}/", False


def _get(w, name, index=None):
    """`(name, array)`: the array (its slice `index` of a scanned file), None when absent."""
    array = w.get(name)
    if array is not None and index is not None:
        array = array[index]
    return (name, array)


def _prefix(path, w):
    prefix = next((p for p in _PREFIXES if f"{p}embedding/kernel" in w), None)
    if prefix is None:
        raise ZooError(f"{path}: no tensor 'embedding/kernel' (nor 'params/embedding/kernel'): "
                       "not a Google ViT checkpoint.")
    return prefix


# Our names outside the blocks -> theirs under the prefix.
_TOP_LEVEL = {
    "patch_embedding/projection/kernel": "embedding/kernel",
    "patch_embedding/projection/bias": "embedding/bias",
    "encoder_norm/gamma": "Transformer/encoder_norm/scale",
    "encoder_norm/beta": "Transformer/encoder_norm/bias",
    "head/kernel": "head/kernel",
    "head/bias": "head/bias",
}


def _top_level_tensors(path, w, prefix):
    """The embeddings, the final norm and the head."""
    if any("MAPHead_0/" in name for name in w):
        raise ZooError(f"{path}: tensor '{prefix}MAPHead_0/...' is an attention-pooling head, "
                       "which the zoo's ViT does not have.")
    tensors = {ours: _get(w, prefix + theirs) for ours, theirs in _TOP_LEVEL.items()}
    position = f"{prefix}Transformer/posembed_input/pos_embedding"
    if position not in w and f"{prefix}pos_embedding" in w:
        position = f"{prefix}pos_embedding"
    name, table = _get(w, position)
    tensors["position_embedding/position_embeddings"] = (
        name, None if table is None else table.reshape(-1, table.shape[-1])
    )
    if f"{prefix}cls" in w:
        tensors["class_token/token"] = _get(w, f"{prefix}cls")
    if f"{prefix}pre_logits/kernel" in w:  # the original ImageNet-21k files
        warnings.warn(f"{path}: its head sits on a 'pre_logits' layer the zoo's ViT does not "
                      "have; the head is left out.", stacklevel=5)
        tensors["head/kernel"] = tensors["head/bias"] = (f"{prefix}head/kernel", None)
    return tensors


def _attention_array(ours, kind, array):
    """(D, N, H) -> (D, N·H); (N, H) -> (N·H,); (N, H, D) -> (N·H, D); the output bias as is."""
    if array is None or (ours == "output" and kind == "bias"):
        return array
    if ours == "output":
        return array.reshape(-1, array.shape[-1])
    return array.reshape(array.shape[0], -1) if kind == "kernel" else array.ravel()


def _block_tensors(w, block, i, index):
    """Block `i`'s tensors, read under the name prefix `block` (slice `index` if scanned)."""
    attention, norm_2, mlp = _layout(w, block)
    tensors = {}
    for ours, theirs in (("self_attention_norm", "LayerNorm_0"), ("feed_forward_norm", norm_2)):
        tensors[block_path(i, f"{ours}/gamma")] = _get(w, f"{block}{theirs}/scale", index)
        tensors[block_path(i, f"{ours}/beta")] = _get(w, f"{block}{theirs}/bias", index)
    for ours, theirs in (("query", "query"), ("key", "key"), ("value", "value"),
                         ("output", "out")):
        for kind in ("kernel", "bias"):
            name, array = _get(w, f"{block}{attention}/{theirs}/{kind}", index)
            tensors[block_path(i, f"self_attention/{ours}_{kind}")] = (
                name, _attention_array(ours, kind, array))
    for ours, theirs in (("inner_dense", "Dense_0"), ("output_dense", "Dense_1")):
        for kind in ("kernel", "bias"):
            tensors[block_path(i, f"feed_forward/{ours}/{kind}")] = _get(
                w, f"{block}{mlp}/{theirs}/{kind}", index)
    return tensors


def read(path, w):
    """The `Checkpoint` of Google's named arrays `w` (from `zoo.checkpoints.read_npz`)."""
    prefix = _prefix(path, w)
    num_layers, pattern, scanned = _blocks(path, w, prefix)
    tensors = _top_level_tensors(path, w, prefix)
    for i in range(num_layers):
        tensors.update(_block_tensors(w, pattern.format(i=i), i, i if scanned else None))
    fields = dict(implied_fields(path, tensors), layer_norm_epsilon=1e-6, activation="gelu",
                  pooled_norm=False, pixel_mean=0.5, pixel_std=0.5)
    attention, _, _ = _layout(w, pattern.format(i=0))
    query = w.get(f"{pattern.format(i=0)}{attention}/query/kernel")  # (D, N, H), scanned (L, D, N, H)
    num_heads = None if query is None or query.ndim < 3 else int(query.shape[-2])
    return Checkpoint(str(path), "npz", tensors, num_layers, fields, num_heads)
