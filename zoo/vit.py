"""The Vision Transformer (Dosovitskiy et al., 2021) in its paper sizes, and CPU-sized ones.

Input images `(B, H, W, C)` with pixel values in [0, 255] (uint8 or float;
rescaled inside the model), output logits `(B, num_classes)`.
"""

import dataclasses

import keras

import keras_attention as ka
from zoo import registry


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
    the P patch outputs are averaged.
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
    # Augmentation (training only).
    random_flip: bool = False
    random_translation: float = 0.0
    random_zoom: float = 0.0
    # Training recipe.
    learning_rate: float = 1e-3
    weight_decay: float = 0.05
    warmup_steps: int = 500
    decay_steps: int = 10000
    label_smoothing: float = 0.0
    jit_compile: bool = False

    def __post_init__(self):
        registry.check_positive(
            self, "image_size", "channels", "num_classes", "patch_size", "num_layers",
            "hidden_dim", "num_heads", "mlp_dim", "decay_steps",
        )
        registry.check_rate(
            self, "dropout", "attention_dropout", "label_smoothing", "random_translation",
            "random_zoom",
        )
        registry.check_choice(self, "pooling", ("cls", "gap"))
        if self.image_size % self.patch_size:
            raise ValueError(
                "patch_size must divide image_size; received "
                f"image_size={self.image_size}, patch_size={self.patch_size}."
            )
        if self.hidden_dim % self.num_heads:
            raise ValueError(
                "num_heads must divide hidden_dim; received "
                f"num_heads={self.num_heads}, hidden_dim={self.hidden_dim}."
            )
        if not self.learning_rate > 0:
            raise ValueError(f"`learning_rate` must be positive; received {self.learning_rate!r}.")
        if not self.weight_decay >= 0:
            raise ValueError(f"`weight_decay` must be >= 0; received {self.weight_decay!r}.")
        if not (isinstance(self.warmup_steps, int) and 0 <= self.warmup_steps):
            raise ValueError(f"`warmup_steps` must be an integer >= 0; received {self.warmup_steps!r}.")

    @property
    def num_patches(self):
        return (self.image_size // self.patch_size) ** 2

    def num_params(self):
        """The parameter count, computed from the sizes (nothing is built)."""
        d, m = self.hidden_dim, self.mlp_dim
        patch = self.patch_size**2 * self.channels * d + d
        if self.pooling == "cls":
            tokens = d + (self.num_patches + 1) * d  # class token + position embeddings
        else:
            tokens = self.num_patches * d  # position embeddings
        layer = 4 * (d * d + d) + (2 * d * m + m + d) + 2 * (2 * d)
        head = 2 * d + d * self.num_classes + self.num_classes
        return patch + tokens + self.num_layers * layer + head

    def signature(self):
        shape = f"({self.image_size}, {self.image_size}, {self.channels})"
        return (
            {"images": f"uint8 or float32 (batch, {shape[1:-1]}), pixel values in [0, 255]"},
            {"logits": f"float32 (batch, {self.num_classes})"},
        )


def build(config):
    """The functional `keras.Model` for a `ViTConfig`.

    Layer names: `patch_embedding`, `class_token` (`pooling="cls"`),
    `position_embedding`, `encoder_block_{i}`, `encoder_norm`, `pooling`
    (`pooling="gap"`), `head`.
    """
    size, channels = config.image_size, config.channels
    images = keras.Input((size, size, channels), name="images")
    x = keras.layers.Rescaling(1.0 / 255.0, name="rescaling")(images)
    if config.random_flip or config.random_translation or config.random_zoom:
        x = Augmentation(
            config.random_flip, config.random_translation, config.random_zoom, name="augmentation"
        )(x)
    x = ka.PatchEmbedding(config.patch_size, config.hidden_dim, name="patch_embedding")(x)
    cls = config.pooling == "cls"
    if cls:
        x = ka.ClassToken(name="class_token")(x)  # (B, T = P + 1, D)
    x = ka.PositionEmbedding(
        config.num_patches + int(cls),
        initializer=keras.initializers.RandomNormal(stddev=0.02),
        name="position_embedding",
    )(x)
    x = keras.layers.Dropout(config.dropout, name="embedding_dropout")(x)
    for i in range(config.num_layers):
        x = ka.TransformerEncoderBlock(
            config.num_heads,
            config.mlp_dim,
            dropout=config.dropout,
            attention_dropout=config.attention_dropout,
            activation="gelu",
            norm_first=True,
            layer_norm_epsilon=config.layer_norm_epsilon,
            name=f"encoder_block_{i}",
        )(x)
    x = keras.layers.LayerNormalization(epsilon=config.layer_norm_epsilon, name="encoder_norm")(x)
    if cls:
        representation = x[:, 0]  # the class token's output, (B, D)
    else:
        representation = keras.layers.GlobalAveragePooling1D(name="pooling")(x)  # (B, D)
    logits = keras.layers.Dense(config.num_classes, name="head")(representation)
    logits = keras.layers.Activation("linear", dtype="float32", name="logits")(logits)
    return keras.Model(images, logits, name="vit")


@keras.saving.register_keras_serializable(package="zoo")
class Augmentation(keras.layers.Layer):
    """Random flip / translation / zoom, applied only when `training=True` is explicit.

    Keras's random preprocessing layers augment whenever `training` is not
    given (their default is True), so `model(images)` would augment at
    inference; this wrapper makes inference the default.

    Call arguments:
        inputs: images `(B, H, W, C)`.
        training: augment only if True.
    """

    def __init__(self, random_flip=False, random_translation=0.0, random_zoom=0.0, seed=None,
                 **kwargs):
        super().__init__(**kwargs)
        self.random_flip = random_flip
        self.random_translation = random_translation
        self.random_zoom = random_zoom
        self.seed = seed
        self.augmenters = []
        if random_flip:
            self.augmenters.append(keras.layers.RandomFlip("horizontal", seed=seed))
        if random_translation:
            self.augmenters.append(keras.layers.RandomTranslation(
                random_translation, random_translation, fill_mode="constant", seed=seed))
        if random_zoom:
            self.augmenters.append(
                keras.layers.RandomZoom(random_zoom, fill_mode="constant", seed=seed))

    def call(self, inputs, training=None):
        if not training:
            return inputs
        for augmenter in self.augmenters:
            inputs = augmenter(inputs, training=True)
        return inputs

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({
            "random_flip": self.random_flip,
            "random_translation": self.random_translation,
            "random_zoom": self.random_zoom,
            "seed": self.seed,
        })
        return config


def compile_model(model, config):
    """AdamW, linear warm-up to `learning_rate` then cosine decay; cross-entropy; accuracy."""
    schedule = keras.optimizers.schedules.CosineDecay(
        initial_learning_rate=0.0 if config.warmup_steps else config.learning_rate,
        decay_steps=config.decay_steps,
        warmup_target=config.learning_rate if config.warmup_steps else None,
        warmup_steps=config.warmup_steps,
    )
    optimizer = keras.optimizers.AdamW(schedule, weight_decay=config.weight_decay, clipnorm=1.0)
    optimizer.exclude_from_weight_decay(
        var_names=["bias", "gamma", "beta", "position_embeddings", "token"]
    )
    # The keras_attention loss and metric with no padding (`pad_id=None`): the
    # sparse cross-entropy (label smoothing as Keras' categorical one) and
    # accuracy, exact under a tf.distribute strategy whatever the split of a
    # batch over the replicas (Keras' own are not on an uneven last batch).
    model.compile(
        optimizer=optimizer,
        loss=ka.MaskedSparseCategoricalCrossentropy(
            pad_id=None, label_smoothing=config.label_smoothing, from_logits=True,
            name="sparse_categorical_crossentropy",
        ),
        metrics=[ka.MaskedAccuracy(pad_id=None, name="accuracy")],
        jit_compile=config.jit_compile,
    )


def attention_weights(model, images):
    """Every self-attention map of a ViT for a batch, computed eagerly.

    Returns:
        dict `encoder_block_{i}/self_attention` -> numpy `(B, N, T, T)`:
        T = P + 1 with `pooling="cls"` (P patches; index 0 is the class token),
        T = P with `pooling="gap"` (no class token).
    """
    layers = {layer.name: layer for layer in model.layers}
    x = keras.ops.cast(keras.ops.convert_to_tensor(images), "float32")
    x = layers["rescaling"](x)
    x = layers["patch_embedding"](x)
    if "class_token" in layers:
        x = layers["class_token"](x)
    x = layers["position_embedding"](x)
    weights = {}
    i = 0
    while f"encoder_block_{i}" in layers:
        x, w = layers[f"encoder_block_{i}"](x, return_attention_scores=True)
        weights[f"encoder_block_{i}/self_attention"] = keras.ops.convert_to_numpy(w)
        i += 1
    return weights


registry.register_family(ViTConfig, "vit", compile_fn=compile_model)

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
    registry.register(_name, build, ViTConfig(**_sizes), reference=f"{_PAPER}, ViT-{_label}")

_CPU = dict(
    patch_size=4, num_layers=4, hidden_dim=64, num_heads=4, mlp_dim=128, num_classes=10,
    learning_rate=1e-3, weight_decay=0.05, warmup_steps=200, decay_steps=5000,
)
registry.register(
    "vit-tiny",
    build,
    ViTConfig(image_size=28, channels=1, **_CPU),
    reference="CPU-sized ViT for 28x28x1 images (MNIST, Fashion-MNIST): patch 4, 4 layers, D 64",
)
registry.register(
    "vit-tiny-32",
    build,
    ViTConfig(image_size=32, channels=3, random_flip=True, **_CPU),
    reference="CPU-sized ViT for 32x32x3 images (CIFAR-10 sized): patch 4, 4 layers, D 64",
)
