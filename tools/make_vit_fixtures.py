"""Write the ViT checkpoint fixtures of tests/test_vit_checkpoints.py, from timm and transformers.

Needs the `fixtures` extra (torch, timm, transformers, safetensors), never the
project's test run. Everything is random-initialised here; nothing is
downloaded.

    python tools/make_vit_fixtures.py fixtures [--out tests/fixtures/vit]
    python tools/make_vit_fixtures.py paper-write DIR      # (fixtures venv) full-size timm ViT-B/16
    python tools/make_vit_fixtures.py paper-check DIR      # (project venv) zoo vit-b16 vs timm

`paper-write` saves a random-initialised timm `vit_base_patch16_224` state
dict (346 MB, not committed), its logits on two 224×224 images, and the
logits of timm's `vit_base_patch16_384` loaded from it by timm's
`checkpoint_filter_fn` (position embeddings resampled) on two 384×384 images;
it also writes the weights as Google's `ViT-B_16.npz` (read back by timm's
npz loader, checked). `paper-check` builds `zoo.get("vit-b16", weights=...)`
from both files (and at `image_size=384`) and compares parameter counts and logits (within 1e-3).

`fixtures` makes tiny ViTs (depth 2, width 32, 2 heads, MLP 64, patch 4,
16×16 RGB images, 5 classes) and saves:

- `timm_cls.safetensors`, `timm_cls.pth`: timm, class token;
- `timm_gap.safetensors`: timm, `class_token=False, global_pool="avg"`
  (its default `fc_norm`: the final norm after pooling);
- `google_cls.npz`: the class-token model in vit_jax naming;
  `google_gap_scanned.npz`: a `class_token=False, global_pool="avg",
  fc_norm=False` model in big_vision naming (`params/`, blocks stacked on a
  leading axis). timm's own npz loader reads each into a fresh model, which
  must give the reference logits (checked here);
- `hf_classifier/`: a `ViTForImageClassification` folder, with the names of
  the Hub's checkpoints (`attention.attention.query`, ...; transformers'
  `from_pretrained` reads it back and must give its logits, checked here);
- `hf_model/`: a `ViTModel` with `hidden_act="gelu_new"` and ImageNet
  statistics in `preprocessor_config.json`;
- `references.npz`: the input batch `images` (uint8 NHWC), each model's logits
  (`hf_model`: its normed class-token features), the logits of timm's model
  for 32×32 images loaded from `timm_cls` with its `checkpoint_filter_fn`
  (position embeddings resampled), and `resample_*`: timm's
  `resample_abs_pos_embed` on a fixed table, antialias on and off, up and down.
"""

import argparse
import json
import pathlib
import subprocess
import sys

import numpy as np

TINY = dict(patch_size=4, embed_dim=32, depth=2, num_heads=2, mlp_ratio=2.0, num_classes=5)
HALF = (0.5, 0.5, 0.5)
IMAGENET = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
HF_LEGACY = {  # transformers 5 name -> the Hub's name
    ".attention.q_proj.": ".attention.attention.query.",
    ".attention.k_proj.": ".attention.attention.key.",
    ".attention.v_proj.": ".attention.attention.value.",
    ".attention.o_proj.": ".attention.output.dense.",
    ".mlp.fc1.": ".intermediate.dense.",
    ".mlp.fc2.": ".output.dense.",
}


def to_input(images, mean=HALF, std=HALF):
    """uint8 NHWC -> float32 NCHW torch tensor, `(x / 255 - mean) / std`."""
    import torch

    x = (images.astype(np.float32) / 255.0 - np.float32(mean)) / np.float32(std)
    return torch.from_numpy(x.transpose(0, 3, 1, 2).copy())


def randomise(model, seed):
    """Weights large enough that logits are O(1) and GELU / norm choices show."""
    import torch

    generator = torch.Generator().manual_seed(seed)

    def normal(tensor, std, mean=0.0):
        with torch.no_grad():
            tensor.copy_(mean + std * torch.randn(tensor.shape, generator=generator))

    for module in model.modules():
        for name, parameter in module.named_parameters(recurse=False):
            if isinstance(module, torch.nn.LayerNorm):
                normal(parameter, 0.2, 1.0 if name == "weight" else 0.0)
            elif parameter.ndim >= 2 and isinstance(module, (torch.nn.Linear, torch.nn.Conv2d)):
                normal(parameter, 1.5 / parameter[0].numel() ** 0.5)
            elif parameter.ndim == 1:
                normal(parameter, 0.2)
            else:  # class token, position embeddings
                normal(parameter, 0.5)
    return model.eval()


def timm_vit(img_size=16, seed=None, **kwargs):
    import timm.models.vision_transformer as vt

    model = vt.VisionTransformer(img_size=img_size, **{**TINY, **kwargs})
    return model.eval() if seed is None else randomise(model, seed)


def logits(model, images, **kwargs):
    import torch

    with torch.no_grad():
        return model(to_input(images, **kwargs)).numpy()


def google_names(model, scanned):
    """A timm ViT's weights in Google's naming (vit_jax, or big_vision scanned)."""
    sd = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    d, n = model.embed_dim, model.blocks[0].attn.num_heads
    prefix = "params/" if scanned else ""
    mha, ln2, mlp = ("MultiHeadDotProductAttention_0", "LayerNorm_1", "MlpBlock_0") if scanned \
        else ("MultiHeadDotProductAttention_1", "LayerNorm_2", "MlpBlock_3")
    w = {"embedding/kernel": sd["patch_embed.proj.weight"].transpose(2, 3, 1, 0),
         "embedding/bias": sd["patch_embed.proj.bias"],
         "Transformer/encoder_norm/scale": sd["norm.weight"],
         "Transformer/encoder_norm/bias": sd["norm.bias"],
         "head/kernel": sd["head.weight"].T, "head/bias": sd["head.bias"]}
    w["pos_embedding" if scanned else "Transformer/posembed_input/pos_embedding"] = sd["pos_embed"]
    if "cls_token" in sd:
        w["cls"] = sd["cls_token"]
    blocks = []
    for i in range(len(model.blocks)):
        b = f"blocks.{i}."
        qkv, qkv_bias = sd[b + "attn.qkv.weight"], sd[b + "attn.qkv.bias"]
        block = {"LayerNorm_0/scale": sd[b + "norm1.weight"], "LayerNorm_0/bias": sd[b + "norm1.bias"],
                 f"{ln2}/scale": sd[b + "norm2.weight"], f"{ln2}/bias": sd[b + "norm2.bias"],
                 f"{mha}/out/kernel": sd[b + "attn.proj.weight"].T.reshape(n, d // n, d),
                 f"{mha}/out/bias": sd[b + "attn.proj.bias"]}
        for j, part in enumerate(("query", "key", "value")):
            block[f"{mha}/{part}/kernel"] = qkv[j * d:(j + 1) * d].T.reshape(d, n, d // n)
            block[f"{mha}/{part}/bias"] = qkv_bias[j * d:(j + 1) * d].reshape(n, d // n)
        for r in range(2):
            block[f"{mlp}/Dense_{r}/kernel"] = sd[b + f"mlp.fc{r + 1}.weight"].T
            block[f"{mlp}/Dense_{r}/bias"] = sd[b + f"mlp.fc{r + 1}.bias"]
        blocks.append(block)
    if scanned:
        for key in blocks[0]:
            w[f"Transformer/encoderblock/{key}"] = np.stack([b[key] for b in blocks])
    else:
        for i, block in enumerate(blocks):
            w.update({f"Transformer/encoderblock_{i}/{k}": v for k, v in block.items()})
    return {prefix + k: np.ascontiguousarray(v, np.float32) for k, v in w.items()}


def save_npz_checked(model, path, images, scanned, fresh=None, **kwargs):
    """Write `model` in Google naming; timm's npz loader must read it back exactly."""
    np.savez(path, **google_names(model, scanned))
    fresh = fresh if fresh is not None else timm_vit(**kwargs)
    fresh.load_pretrained(str(path))
    error = np.abs(logits(fresh, images) - logits(model, images)).max()
    print(f"{path.name}: timm's npz loader -> max |logit difference| {error:.2e}")
    assert error < 1e-6, error


def save_timm(model, out, stem, pth=False):
    import safetensors.torch
    import torch

    sd = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    safetensors.torch.save_file(sd, str(out / f"{stem}.safetensors"))
    if pth:  # the state dict itself (an OrderedDict with `_metadata`), as timm saves it
        torch.save(model.state_dict(), out / f"{stem}.pth")


def hf_models(out, images, references):
    import torch
    import transformers

    kwargs = dict(image_size=16, patch_size=4, num_channels=3, hidden_size=32,
                  num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
    classifier = randomise(transformers.ViTForImageClassification(
        transformers.ViTConfig(**kwargs, num_labels=5)), 4)
    folder = out / "hf_classifier"
    classifier.save_pretrained(folder)
    _legacy_names(folder / "model.safetensors")
    reloaded = transformers.ViTForImageClassification.from_pretrained(folder).eval()
    with torch.no_grad():
        references["hf_classifier"] = classifier(to_input(images)).logits.numpy()
        error = np.abs(reloaded(to_input(images)).logits.numpy() - references["hf_classifier"]).max()
    print(f"hf_classifier: transformers reads the Hub-named file back -> max |difference| {error:.2e}")
    assert error < 1e-6, error
    model = randomise(transformers.ViTModel(
        transformers.ViTConfig(**kwargs, hidden_act="gelu_new"), add_pooling_layer=False), 5)
    model.save_pretrained(out / "hf_model")
    (out / "hf_model" / "preprocessor_config.json").write_text(json.dumps(
        {"image_mean": list(IMAGENET[0]), "image_std": list(IMAGENET[1])}))
    with torch.no_grad():
        features = model(to_input(images, *IMAGENET)).last_hidden_state[:, 0]
    references["hf_model_features"] = features.numpy()


def _legacy_names(path):
    """Rename transformers 5's names to the Hub's (what google/vit-* files hold)."""
    import safetensors.torch

    sd = safetensors.torch.load_file(str(path))
    renamed = {}
    for name, tensor in sd.items():
        for new, old in HF_LEGACY.items():
            name = name.replace(new, old)
        renamed[name] = tensor
    safetensors.torch.save_file(renamed, str(path), metadata={"format": "pt"})


def resample_references(references):
    import torch
    from timm.layers import resample_abs_pos_embed

    table = np.random.default_rng(7).normal(size=(1, 1 + 5 * 5, 6)).astype(np.float32)
    references["resample_table"] = table[0]
    for size in (3, 8):
        for antialias in (True, False):
            resampled = resample_abs_pos_embed(torch.from_numpy(table), [size, size],
                                               num_prefix_tokens=1, antialias=antialias)
            references[f"resample_{size}_{'aa' if antialias else 'plain'}"] = resampled[0].numpy()


def make_fixtures(out):
    import torch
    from timm.models.vision_transformer import checkpoint_filter_fn

    torch.manual_seed(0)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (2, 16, 16, 3)).astype(np.uint8)
    images_32 = rng.integers(0, 256, (2, 32, 32, 3)).astype(np.uint8)
    references = {"images": images, "images_32": images_32}

    cls = timm_vit(seed=1)
    references["timm_cls"] = logits(cls, images)
    save_timm(cls, out, "timm_cls", pth=True)
    save_npz_checked(cls, out / "google_cls.npz", images, scanned=False)
    big = timm_vit(img_size=32)  # timm's fine-tuning path: the 16×16 weights at 32×32
    big.load_state_dict(checkpoint_filter_fn(cls.state_dict(), big))
    references["timm_cls_32"] = logits(big.eval(), images_32)

    gap = timm_vit(seed=2, class_token=False, global_pool="avg")
    references["timm_gap"] = logits(gap, images)
    save_timm(gap, out, "timm_gap")
    gap_google = timm_vit(seed=3, class_token=False, global_pool="avg", fc_norm=False)
    references["google_gap_scanned"] = logits(gap_google, images)
    save_npz_checked(gap_google, out / "google_gap_scanned.npz", images, scanned=True,
                     class_token=False, global_pool="avg", fc_norm=False)

    hf_models(out, images, references)
    resample_references(references)
    np.savez_compressed(out / "references.npz", **references)
    total = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"wrote {out} ({total / 1024:.0f} KiB)")


def paper_write(folder):
    """A random full-size timm vit_base_patch16_224, its safetensors and its logits."""
    import safetensors.torch
    import timm
    import torch
    from timm.models.vision_transformer import checkpoint_filter_fn

    torch.manual_seed(0)
    folder.mkdir(parents=True, exist_ok=True)
    model = timm.create_model("vit_base_patch16_224", pretrained=False).eval()
    sd = {k: v.contiguous() for k, v in model.state_dict().items()}
    safetensors.torch.save_file(sd, str(folder / "vit_base_patch16_224.safetensors"))
    images = np.random.default_rng(1).integers(0, 256, (2, 224, 224, 3)).astype(np.uint8)
    save_npz_checked(model, folder / "ViT-B_16.npz", images, scanned=False,
                     fresh=timm.create_model("vit_base_patch16_224", pretrained=False).eval())
    images_384 = np.random.default_rng(2).integers(0, 256, (2, 384, 384, 3)).astype(np.uint8)
    model_384 = timm.create_model("vit_base_patch16_384", pretrained=False)
    model_384.load_state_dict(checkpoint_filter_fn(model.state_dict(), model_384))  # resampled
    np.savez(folder / "reference.npz", images=images, logits=logits(model, images),
             num_params=sum(p.numel() for p in model.parameters()), images_384=images_384,
             logits_384=logits(model_384.eval(), images_384))
    print(f"timm vit_base_patch16_224: {sum(p.numel() for p in model.parameters()):,} parameters")


def paper_check(folder):
    """zoo vit-b16 from the timm file: parameter count and logits (project venv), in a process
    of `tools/vit_paper_check.py`, which imports the zoo (this script's other commands run
    where it is not installed)."""
    script = pathlib.Path(__file__).resolve().parent / "vit_paper_check.py"
    subprocess.run([sys.executable, str(script), str(folder)], check=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=("fixtures", "paper-write", "paper-check"))
    parser.add_argument("folder", nargs="?", type=pathlib.Path)
    args = parser.parse_args(argv)
    if args.command == "fixtures":
        make_fixtures(args.folder or pathlib.Path(__file__).resolve().parents[1] / "tests/fixtures/vit")
    elif args.folder is None:
        parser.error(f"{args.command} needs a folder")
    elif args.command == "paper-write":
        paper_write(args.folder)
    else:
        paper_check(args.folder)


if __name__ == "__main__":
    main()
    sys.exit(0)
