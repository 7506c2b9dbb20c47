"""`python tools/make_vit_fixtures.py paper-check DIR`, in the project's venv: the zoo's vit-b16
built from the full-size timm ViT-B/16 that `paper-write` saved in DIR (its safetensors file, the
same weights as Google's `ViT-B_16.npz`, and at `image_size=384`), checked against timm's
parameter count and logits (within 1e-3).

    python tools/vit_paper_check.py DIR
"""

import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import zoo  # noqa: E402 - after the path


def paper_check(folder):
    """zoo vit-b16 from the timm file: parameter count and logits (project venv)."""
    reference = np.load(folder / "reference.npz")
    model = zoo.get("vit-b16", weights=str(folder / "vit_base_patch16_224.safetensors"),
                    compile=False)
    ours = model.predict(reference["images"], verbose=0)
    error = np.abs(ours - reference["logits"]).max()
    print(f"zoo vit-b16: {model.count_params():,} parameters (timm: {int(reference['num_params']):,})")
    print(f"max |logit difference| on 2 images: {error:.2e} (logits up to "
          f"{np.abs(reference['logits']).max():.2f})")
    from_npz = zoo.get("vit-b16", weights=str(folder / "ViT-B_16.npz"), compile=False)
    error_npz = np.abs(from_npz.predict(reference["images"], verbose=0) - reference["logits"]).max()
    print(f"the same weights as Google's ViT-B_16.npz: max |logit difference| {error_npz:.2e}")
    model_384 = zoo.get("vit-b16", weights=str(folder / "vit_base_patch16_224.safetensors"),
                        image_size=384, compile=False)
    error_384 = np.abs(model_384.predict(reference["images_384"], verbose=0)
                       - reference["logits_384"]).max()
    print(f"image_size=384 (position embeddings resampled 14x14 -> 24x24): max |logit "
          f"difference| on 2 images: {error_384:.2e}")
    assert model.count_params() == int(reference["num_params"]) and error < 1e-3
    assert error_384 < 1e-3 and error_npz < 1e-3


if __name__ == "__main__":
    paper_check(pathlib.Path(sys.argv[1]))
