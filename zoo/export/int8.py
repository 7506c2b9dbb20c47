"""int8 weights in an export: `zoo.export(model, path, quantize="int8")`, `zoo export --quantize int8`.

The export gets a copy of the model with Keras' int8 weights (`keras.Model.quantize("int8")`):
Keras quantizes the `Dense` kernels (feed-forward layers, an untied output projection, the
ViT's head) and the token tables (`Embedding`) itself; `keras_attention.quantization` does the
same for the attention projections of `ka.MultiHeadAttention` and for the tied output
projection `y Eᵀ`. Each weight matrix is stored as int8 with one float scale per output unit;
each input row is quantized at call time; products are int8 with int32 sums. Normalisation,
biases, the softmax, the ViT's patch embedding (a `Conv2D`, which Keras does not quantize)
and the position tables stay in float32.

Why Keras' scheme: it is what a Keras user gets from `model.quantize("int8")`, and its int8
products are core TensorFlow ops (`MatMul`/`BatchMatMulV3` with int32 output) that XLA compiles
too, so the export needs nothing the float export does not, with or without `--jit`. Its cost
and speed against the float export and CTranslate2's int8 are measured in
`docs/experiments/int8_export.md`.

Transformer (also imported OPUS-MT models) and ViT only: RNNsearch and ConvS2S keep weights
that Keras cannot quantize (recurrent cells, convolutions) on their decoding paths.
"""

import gc

import keras

import keras_attention as ka
from zoo.errors import ZooError

MODES = ("int8",)
FAMILIES = ("transformer", "vit")
QUANTIZED_LAYERS = (keras.layers.Dense, keras.layers.Embedding, ka.MultiHeadAttention)


def check_quantize(quantize, family):
    """Raise ZooError unless `quantize` is None or a mode this family supports."""
    if quantize is None:
        return
    if quantize not in MODES:
        raise ZooError(f"export: `quantize` must be one of {MODES} or None; received {quantize!r}.")
    if family not in FAMILIES:
        raise ZooError(
            f"export: quantize={quantize!r} is for Transformer and ViT models; this is a "
            f"{family!r} model, whose recurrent or convolutional weights Keras cannot quantize."
        )


def quantized_copy(model, mode="int8"):
    """A copy of `model` whose `Dense`, `Embedding` and attention weights are `mode` (int8);
    `model` itself is left as it is."""
    copy = keras.models.clone_model(model)
    copy.set_weights(model.get_weights())
    if hasattr(model, "family"):  # the family the model records (Keras' clone drops it)
        copy.family = model.family
    # Keras runs gc.collect() for every kernel it replaces, 0.2 s or more each in a process
    # holding a model; frozen objects are not scanned, which makes each collection cheap.
    gc.freeze()
    try:
        copy.quantize(mode, filters=lambda layer: isinstance(layer, QUANTIZED_LAYERS))
    finally:
        gc.unfreeze()
    return copy
