"""The Vision Transformer (Dosovitskiy et al., 2021) in its paper sizes, and CPU-sized ones.

Input images `(B, H, W, C)` with pixel values in [0, 255] (uint8 or float;
rescaled inside the model), output logits `(B, num_classes)`.
"""


import keras
import numpy as np

import keras_attention as ka
from zoo.families import numbered_layers
from zoo.registry.model import FamilyModel
from zoo.vit.augmentation import Augmentation, ShiftedImages
from zoo.vit.config import ViTConfig  # noqa: F401 - also importable from here, as before
from zoo.vit.recipe import freeze_backbone


@keras.saving.register_keras_serializable(package="zoo")
def gelu_tanh(x):
    """GELU with the tanh approximation (Flax's `nn.gelu` default, Hugging Face's `gelu_new`)."""
    return keras.activations.gelu(x, approximate=True)


def _rescaling(config):
    """`(pixels / 255 - pixel_mean) / pixel_std` as one `Rescaling` layer."""
    mean, std = np.asarray(config.pixel_mean, "float64"), np.asarray(config.pixel_std, "float64")
    scale, offset = 1.0 / (255.0 * std), -mean / std
    if scale.ndim:
        scale, offset = scale.tolist(), offset.tolist()
    else:
        scale, offset = float(scale), float(offset)
    return keras.layers.Rescaling(scale, offset=offset, name="rescaling")


def build(config):
    """The functional `keras.Model` for a `ViTConfig`.

    Layer names: `patch_embedding`, `class_token` (`pooling="cls"`),
    `position_embedding`, `encoder_block_{i}`, `encoder_norm`, `pooling`
    (`pooling="gap"` or `"seq"`), `head`.
    """
    size, channels = config.image_size, config.channels
    images = keras.Input((size, size, channels), name="images")
    x = _rescaling(config)(images)
    if config.augments:
        x = Augmentation(
            config.random_flip, config.random_translation, config.random_zoom,
            random_erasing=config.random_erasing, stop_step=config.augmentation_steps,
            name="augmentation",
        )(x)
    if config.shifted_patches:
        x = ShiftedImages(config.patch_size // 2, name="shifted_images")(x)  # (B, H, W, 5C)
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
            activation=gelu_tanh if config.activation == "gelu_tanh" else "gelu",
            norm_first=True,
            layer_norm_epsilon=config.layer_norm_epsilon,
            name=f"encoder_block_{i}",
        )(x)
    encoder_norm = keras.layers.LayerNormalization(
        epsilon=config.layer_norm_epsilon, name="encoder_norm"
    )
    if not config.pooled_norm:
        x = encoder_norm(x)
    if cls:
        representation = x[:, 0]  # the class token's output, (B, D)
    elif config.pooling == "seq":
        representation = ka.SequencePooling(name="pooling")(x)  # (B, D)
    else:
        representation = keras.layers.GlobalAveragePooling1D(name="pooling")(x)  # (B, D)
    if config.pooled_norm:
        representation = encoder_norm(representation)
    logits = keras.layers.Dense(config.num_classes, name="head")(representation)
    logits = keras.layers.Activation("linear", dtype="float32", name="logits")(logits)
    model = FamilyModel(images, logits, name="vit", family="vit")
    if not config.trainable_backbone:
        freeze_backbone(model)
    return model


def attention_weights(model, images):
    """Every self-attention map of a ViT for a batch, computed eagerly.

    Returns:
        dict `encoder_block_{i}/self_attention` -> numpy `(B, N, T, T)`:
        T = P + 1 with `pooling="cls"` (P patches; index 0 is the class token),
        T = P with `pooling="gap"` or `"seq"` (no class token). Without a class
        token the dict also holds `pooling` -> numpy `(B, P)`, the weights with
        which the head's input averages the last layer's P outputs: `α` of
        `SequencePooling` for `"seq"`, `1 / P` each for `"gap"`.
    """
    layers = {layer.name: layer for layer in model.layers}
    x = keras.ops.cast(keras.ops.convert_to_tensor(images), "float32")
    x = layers["rescaling"](x)
    if "shifted_images" in layers:
        x = layers["shifted_images"](x)
    x = layers["patch_embedding"](x)
    if "class_token" in layers:
        x = layers["class_token"](x)
    x = layers["position_embedding"](x)
    weights = {}
    for i, block in enumerate(numbered_layers(layers, "encoder_block_")):
        x, w = block(x, return_attention_scores=True)
        weights[f"encoder_block_{i}/self_attention"] = keras.ops.convert_to_numpy(w)
    if "pooling" in layers:
        pooling = layers["pooling"]
        if isinstance(pooling, ka.SequencePooling):
            _, alpha = pooling(layers["encoder_norm"](x), return_attention_scores=True)
            weights["pooling"] = keras.ops.convert_to_numpy(alpha)
        else:  # global average pooling
            batch, length = x.shape[0], x.shape[1]
            weights["pooling"] = np.full((batch, length), 1.0 / length, "float32")
    return weights
