"""`ViTConfig`, the Vision Transformer's sizes and recipe, and the registered sizes.

Light (no Keras): `zoo list` and `zoo describe` read it. The model is built by
`zoo.vit.model.build` and compiled by `zoo.vit.recipe.compile_model`, which the
registry imports when a model is first built (`zoo.registry.Lazy`); pretrained
files are read by `zoo.vit.weights.pretrained` (`zoo.get(name, weights=PATH)`).
"""

import dataclasses

from keras_attention import checks
from zoo import registry
from zoo.errors import ZooError


@dataclasses.dataclass(frozen=True)
class ViTConfig:
    """Sizes and training recipe of a ViT classifier.

    Recipe: AdamW with linear warm-up then cosine decay over `decay_steps`
    (set it to epochs × steps per epoch; `zoo train` does), weight decay on the
    kernels only, cross-entropy with optional label smoothing. Augmentation
    layers (active only in training) are part of the model.

    `pooling`: what the classifier head sees. `"cls"` (the paper's default): a
    learnable class token is prepended to the P patch tokens and its output is
    classified. `"gap"` (the paper's Appendix D.3 alternative): no class token;
    the P patch outputs are averaged. `"seq"`: no class token; the P patch
    outputs are averaged with learned attention weights (`SequencePooling`,
    the SeqPool of Hassani et al., 2021).

    `pooled_norm`: with `pooling="gap"`, apply the final layer
    norm to the pooled `(B, D)` representation instead of to every token
    before pooling (timm's `fc_norm`, its default for average pooling).

    Pretrained weights (`zoo.get(name, weights=PATH)`, `zoo.vit.weights.checkpoint`)
    set the fields the file implies: `pixel_mean` and `pixel_std` (the model
    computes `(pixels / 255 - pixel_mean) / pixel_std` inside, so it still
    takes [0, 255]; the defaults 0 and 1 give [0, 1], while Google's, timm's
    augreg and Hugging Face's google/vit-* weights expect [-1, 1]: 0.5 and
    0.5; a float or one value per channel; a timm file's come from the
    `config.json` next to it, else [-1, 1] is assumed with a warning),
    `activation` (`"gelu"`, exact, or `"gelu_tanh"`, its tanh
    approximation), `layer_norm_epsilon`, `pooling`, `pooled_norm`,
    `image_size` and `num_classes`, and the fine-tuning recipe
    `zoo.vit.weights.checkpoint.FINE_TUNING` (a lower `learning_rate`, a short
    warm-up); overrides given to `zoo.get` win. `trainable_backbone=False`
    freezes every layer but the head (linear probing; `freeze_backbone`).

    `shifted_patches`: Shifted Patch Tokenization (Lee et al., 2021): each
    patch is embedded together with the same patch of the image shifted
    diagonally by P/2 in the four directions (`ShiftedImages`), so tokens see
    overlapping windows; it helps ViTs trained from scratch on small data.
    (The paper also layer-normalises the flattened patches before the
    projection; here they go straight into `PatchEmbedding`.)

    Augmentation (`Augmentation`): `random_flip` (horizontal),
    `random_translation` (whole-pixel shifts up to this fraction of the size,
    zero fill), `random_zoom` (a fraction, zero fill; not under
    `jit_compile=True`), `random_erasing` (the probability that a random
    rectangle of 2-33% of the image is set to 0). `augmentation_until`: the
    share of the schedule (`decay_steps`) trained on augmented images; the
    steps after `round(augmentation_until × decay_steps)` see the images as
    they are (1.0: augment throughout). A model that can only just fit the
    augmented images gains from a last stretch on the plain ones, whose
    distribution the test images follow. The layer `augmentation` counts its
    training steps in a non-trainable weight (saved, restored on resume), so
    `num_params()` and `count_params()` count one more then.

    Attention dropout: `attention_dropout` 0 (the paper's; every size registered here),
    so `ka.MultiHeadAttention` (`flash_attention=None`) computes the attention fused in
    training and inference on PyTorch and on JAX with a GPU or TPU
    (`keras.ops.dot_product_attention`: cuDNN's flash attention under JAX on a recent GPU
    in bfloat16, PyTorch's `scaled_dot_product_attention`). Above 0 the training steps
    take the explicit path (scores, softmax, dropout: slower and O(T²) memory per head on
    an accelerator), and inference stays fused. TensorFlow and JAX's CPU take the
    explicit path (`ka.layers.multi_head.fused_by_default`).
    """

    image_size: int = 224
    channels: int = 3
    num_classes: int = 1000
    patch_size: int = 16
    num_layers: int = 12
    hidden_dim: int = 768
    num_heads: int = 12
    mlp_dim: int = 3072
    dropout: float = 0.0
    attention_dropout: float = 0.0
    layer_norm_epsilon: float = 1e-6
    pooling: str = "cls"
    pooled_norm: bool = False
    shifted_patches: bool = False
    activation: str = "gelu"
    pixel_mean: float | tuple = 0.0
    pixel_std: float | tuple = 1.0
    trainable_backbone: bool = True
    # Augmentation (training only).
    random_flip: bool = False
    random_translation: float = 0.0
    random_zoom: float = 0.0
    random_erasing: float = 0.0
    augmentation_until: float = 1.0
    # Training recipe.
    learning_rate: float = 1e-3
    weight_decay: float = 0.05
    warmup_steps: int = 500
    decay_steps: int = 10000
    label_smoothing: float = 0.0
    jit_compile: bool = False

    def __post_init__(self):
        checks.check_fields(
            self, checks.check_positive_int, "image_size", "channels", "num_classes",
            "patch_size", "num_layers", "hidden_dim", "num_heads", "mlp_dim", "decay_steps",
        )
        checks.check_fields(
            self, checks.check_rate, "dropout", "attention_dropout", "label_smoothing",
            "random_translation", "random_zoom",
        )
        checks.check_number("random_erasing", self.random_erasing, 0, 1)
        checks.check_number("augmentation_until", self.augmentation_until, 0, 1,
                            open_minimum=True)
        checks.check_choice("pooling", self.pooling, ("cls", "gap", "seq"))
        checks.check_choice("activation", self.activation, ("gelu", "gelu_tanh"))
        if self.pooled_norm and self.pooling != "gap":
            raise ZooError(
                "`pooled_norm` needs pooling='gap' (the norm of timm's average-pooled ViTs); "
                f"received pooled_norm=True, pooling={self.pooling!r}."
            )
        _check_pixel_statistics(self)
        if self.image_size % self.patch_size:
            raise ZooError(
                "patch_size must divide image_size; received "
                f"image_size={self.image_size}, patch_size={self.patch_size}."
            )
        if self.hidden_dim % self.num_heads:
            raise ZooError(
                "num_heads must divide hidden_dim; received "
                f"num_heads={self.num_heads}, hidden_dim={self.hidden_dim}."
            )
        if self.jit_compile and self.random_zoom:
            # Keras's RandomZoom uses ImageProjectiveTransformV3, which XLA cannot compile.
            raise ZooError(
                "`random_zoom` is not supported with jit_compile=True (XLA has no kernel for "
                f"its image transform); received random_zoom={self.random_zoom!r}, "
                "jit_compile=True. Use random_translation / random_flip / random_erasing, "
                "or jit_compile=False."
            )
        checks.check_positive_number("learning_rate", self.learning_rate)
        checks.check_number("weight_decay", self.weight_decay, 0)
        checks.check_int("warmup_steps", self.warmup_steps, 0)

    @property
    def augments(self):
        """Whether the model has an `augmentation` layer (any random augmentation on)."""
        return bool(self.random_flip or self.random_translation or self.random_zoom
                    or self.random_erasing)

    @property
    def augmentation_steps(self):
        """The training steps that see augmented images; None: all of them."""
        if not self.augments or self.augmentation_until >= 1:
            return None
        return round(self.augmentation_until * self.decay_steps)

    @property
    def num_patches(self):
        return (self.image_size // self.patch_size) ** 2

    def num_params(self):
        """The parameter count, computed from the sizes (nothing is built)."""
        d, m = self.hidden_dim, self.mlp_dim
        channels = self.channels * (5 if self.shifted_patches else 1)
        patch = self.patch_size**2 * channels * d + d
        if self.pooling == "cls":
            tokens = d + (self.num_patches + 1) * d  # class token + position embeddings
        else:
            tokens = self.num_patches * d  # position embeddings
        pooling = d if self.pooling == "seq" else 0  # `SequencePooling`'s scoring vector
        layer = 4 * (d * d + d) + (2 * d * m + m + d) + 2 * (2 * d)
        head = 2 * d + d * self.num_classes + self.num_classes
        step_counter = 0 if self.augmentation_steps is None else 1  # `Augmentation.step`
        return patch + tokens + self.num_layers * layer + pooling + head + step_counter

    def signature(self):
        shape = f"({self.image_size}, {self.image_size}, {self.channels})"
        return (
            {"images": f"uint8 or float32 (batch, {shape[1:-1]}), pixel values in [0, 255]"},
            {"logits": f"float32 (batch, {self.num_classes})"},
        )


def _check_pixel_statistics(config):
    """Numbers, or tuples of `channels` numbers (a list, e.g. from JSON, becomes a tuple)."""
    for name in ("pixel_mean", "pixel_std"):
        value = getattr(config, name)
        if isinstance(value, list):
            value = tuple(value)
            object.__setattr__(config, name, value)  # frozen: set once, while validating
        values = value if isinstance(value, tuple) else (value,)
        if (isinstance(value, tuple) and len(value) != config.channels) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in values
        ):
            raise ZooError(
                f"`{name}` must be a number or a tuple of `channels`={config.channels} numbers; "
                f"received {name}={value!r}."
            )
        if name == "pixel_std" and not all(v > 0 for v in values):
            raise ZooError(f"`pixel_std` must be positive; received pixel_std={value!r}.")


_BUILD = registry.Lazy("zoo.vit.model", "build")
_PAPER = "Dosovitskiy et al., An Image is Worth 16x16 Words, ICLR 2021, Table 1"
_SIZES = {
    "vit-ti16": (dict(num_layers=12, hidden_dim=192, num_heads=3, mlp_dim=768), "Ti/16 (5.7M)"),
    "vit-s16": (dict(num_layers=12, hidden_dim=384, num_heads=6, mlp_dim=1536), "S/16 (22M)"),
    "vit-b16": (dict(num_layers=12, hidden_dim=768, num_heads=12, mlp_dim=3072), "B/16 (86M)"),
    "vit-l16": (dict(num_layers=24, hidden_dim=1024, num_heads=16, mlp_dim=4096), "L/16 (307M)"),
    "vit-h14": (
        dict(num_layers=32, hidden_dim=1280, num_heads=16, mlp_dim=5120, patch_size=14),
        "H/14 (632M)",
    ),
}
for _name, (_sizes, _label) in _SIZES.items():
    registry.register(_name, _BUILD, ViTConfig(**_sizes), reference=f"{_PAPER}, ViT-{_label}")

_CPU = dict(
    patch_size=4, num_layers=4, hidden_dim=64, num_heads=4, mlp_dim=128, num_classes=10,
    learning_rate=1e-3, weight_decay=0.05, warmup_steps=200, decay_steps=5000,
)
# vit-tiny's recipe was chosen on Fashion-MNIST
# (docs/experiments/vit-fashion-mnist.md#the-recipe-as-it-stands): patch 7 (16 tokens)
# leaves time for 56-80 epochs in 15 CPU-minutes, depending on the machine; 2 heads and sequence
# pooling (no class token) make a step cheaper at the same accuracy; shifted
# patch tokenization, flips, ±1-pixel shifts, random erasing and label smoothing
# keep that many epochs from overfitting (±2-pixel shifts: slower to learn); the
# last 10% of the schedule on the plain images (augmentation_until=0.9) adds
# about half a point.
_TINY_28 = dict(
    _CPU, patch_size=7, num_heads=2, pooling="seq", shifted_patches=True, random_flip=True,
    random_translation=0.036, random_erasing=0.25, label_smoothing=0.1, warmup_steps=900,
    augmentation_until=0.9,
)
registry.register(
    "vit-tiny",
    _BUILD,
    ViTConfig(image_size=28, channels=1, **_TINY_28),
    reference=(
        "CPU-sized ViT for 28x28x1 images (MNIST, Fashion-MNIST): patch 7 with shifted "
        "patch tokenization, 4 layers, D 64, 2 heads, sequence pooling; flip, ±1-pixel shift, "
        "erasing (the last 10% of the schedule without), label smoothing"
    ),
)
registry.register(
    "vit-tiny-32",
    _BUILD,
    ViTConfig(image_size=32, channels=3, random_flip=True, **_CPU),
    reference="CPU-sized ViT for 32x32x3 images (CIFAR-10 sized): patch 4, 4 layers, D 64",
)
