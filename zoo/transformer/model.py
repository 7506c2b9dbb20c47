"""The Transformer of "Attention Is All You Need" (Vaswani et al., 2017) in its paper sizes.

Inputs `{"source": int32 (B, S), "target": int32 (B, T)}` (teacher forcing: the
target is the decoder input, `[START] y_1 … y_n`; id 0 is padding), output
logits `(B, T, V)`. With `copy=True` (a pointer-generator, `zoo.transformer.copying`)
also `"source_extended"` int32 `(B, S)`, and the output is `log P` over the extended
vocabulary, `(B, T, V + S)`.

The config also expresses imported Marian (OPUS-MT) models (`zoo.transformer.weights.marian`):
swish or GELU feed-forward activations, sinusoidal positions in [sin | cos]
halves, unscaled embeddings, a `final_logits_bias`, and special ids other
than the zoo's (`pad_id`, `start_id`, `end_id`; Marian starts decoding from
its padding id, and its `</s>` is id 0).
"""


import keras

import keras_attention as ka
from zoo import moved
from zoo.families import numbered_layers
from zoo.registry.model import FamilyModel
from zoo.transformer import copying
from zoo.transformer.config import ACTIVATIONS, TransformerConfig  # noqa: F401 - also importable from here, as before
from zoo.transformer.layers import FinalLogitsBias, PaddingMask


def _embedding(config, vocabulary_size, name):
    return ka.TokenAndPositionEmbedding(
        vocabulary_size,
        config.max_length,
        config.d_model,
        positional=config.positional,
        mask_zero=config.pad_id == 0,
        scale_embeddings=config.scale_embeddings,
        dropout=config.dropout,
        layout=config.positional_layout,
        name=name,
    )


def _block_args(config):
    return dict(
        num_heads=config.num_heads,
        intermediate_dim=config.intermediate_dim,
        dropout=config.dropout,
        attention_dropout=config.attention_dropout,
        activation=config.activation,
        norm_first=config.norm_first,
        layer_norm_epsilon=config.layer_norm_epsilon,
        attention=config.attention,
    )


def build(config):
    """The functional `keras.Model` for a `TransformerConfig`.

    Layer names (used by decoding and attention inspection): `source_embedding`,
    `target_embedding` (the same layer when the vocabulary is shared),
    `encoder_block_{i}`, `decoder_block_{i}`, `encoder_norm`/`decoder_norm`
    (pre-norm only), `output_projection` (untied only), `final_logits_bias`
    (with that field), `source_padding_mask` (with `pad_id != 0`).
    """
    source = keras.Input((None,), dtype="int32", name="source")
    target = keras.Input((None,), dtype="int32", name="target")
    # pad_id 0: the embeddings' Keras masks; otherwise explicit source masks and
    # a decoder masked by causality only (it starts from pad_id in Marian).
    masks = {}
    if config.pad_id != 0:
        source_mask = PaddingMask(config.pad_id, name="source_padding_mask")(source)  # (B, S)
        masks = {"padding_mask": source_mask}
    source_embedding, target_embedding = _embeddings(config)
    encoder_output = _encoder(config, source_embedding(source), masks)  # (B, S, D)
    decoder_input = copying.decoder_input(target, config.target_vocab) if config.copy else target
    embedded = target_embedding(decoder_input)  # (B, T, D)
    y, cross_weights = _decoder(config, embedded, encoder_output, masks)
    logits = _output_logits(config, target_embedding, y)
    inputs = {"source": source, "target": target}
    if config.copy:
        inputs["source_extended"] = keras.Input((None,), dtype="int32", name="source_extended")
        pointer_generator = ka.PointerGenerator(dtype="float32", name="pointer_generator")
        logits = copying.copy_output(pointer_generator, logits, cross_weights, encoder_output,
                                     inputs["source_extended"], y, embedded)
    return FamilyModel(inputs, logits, name="transformer", family="transformer")


def _embeddings(config):
    """`(source, target)` embeddings: one shared layer (and tied output, as in the paper) by
    default, two with separate vocabularies."""
    if config.shared_vocabulary:
        shared = _embedding(config, config.vocabulary_size, "shared_embedding")
        return shared, shared
    return (_embedding(config, config.source_vocab, "source_embedding"),
            _embedding(config, config.target_vocab, "target_embedding"))


def _encoder(config, x, masks):
    """The encoder blocks (and the final norm when pre-norm): embedded source `(B, S, D)`
    (Keras mask `(B, S)`, or `masks["padding_mask"]`) -> encoder output `(B, S, D)`."""
    for i in range(config.num_encoder_layers):
        x = ka.TransformerEncoderBlock(**_block_args(config), name=f"encoder_block_{i}")(
            x, **masks
        )
    if config.norm_first:
        x = keras.layers.LayerNormalization(
            epsilon=config.layer_norm_epsilon, name="encoder_norm"
        )(x)
    return x


def _decoder(config, y, encoder_output, masks):
    """The decoder blocks (and the final norm when pre-norm): embedded target `(B, T, D)` ->
    `(B, T, D)` and, with `copy`, the last block's cross-attention `(B, N, T, S)` (what the
    copy uses; None without)."""
    cross_weights = None
    for i in range(config.num_decoder_layers):
        block = ka.TransformerDecoderBlock(**_block_args(config), name=f"decoder_block_{i}")
        scores = {"return_attention_scores": True} if config.copy and i == \
            config.num_decoder_layers - 1 else {}
        y = block(
            y, encoder_output, **({"encoder_padding_mask": masks["padding_mask"]} if masks else {}),
            **scores,
        )
        if scores:
            y, _, cross_weights = y
    if config.norm_first:
        y = keras.layers.LayerNormalization(
            epsilon=config.layer_norm_epsilon, name="decoder_norm"
        )(y)
    return y, cross_weights


def _output_logits(config, target_embedding, y):
    """Decoder output `(B, T, D)` -> float32 logits `(B, T, V)`: the transposed target
    embedding when tied, else a projection; plus Marian's `final_logits_bias`."""
    if config.tie_embeddings:
        logits = target_embedding(y, reverse=True)  # (B, T, V)
    else:
        logits = keras.layers.Dense(
            config.target_vocab, use_bias=False, name="output_projection"
        )(y)
    if config.final_logits_bias:
        logits = FinalLogitsBias(name="final_logits_bias")(logits)
    return keras.layers.Activation("linear", dtype="float32", name="logits")(logits)


def attention_weights(model, inputs):
    """Every attention map of a Transformer for a batch, computed eagerly.

    Args:
        model: a model built by `build` (also after `keras.saving.load_model`).
        inputs: `{"source": (B, S), "target": (B, T)}`.

    Returns:
        dict: `encoder_block_{i}/self_attention` `(B, N, S, S)`,
        `decoder_block_{i}/self_attention` `(B, N, T, T)` and
        `decoder_block_{i}/cross_attention` `(B, N, T, S)` as numpy arrays.
    """
    layers = {layer.name: layer for layer in model.layers}
    shared = "shared_embedding" in layers
    source_embedding = layers["shared_embedding" if shared else "source_embedding"]
    target_embedding = layers["shared_embedding" if shared else "target_embedding"]
    source = keras.ops.convert_to_tensor(inputs["source"], "int32")
    target = keras.ops.convert_to_tensor(inputs["target"], "int32")
    padding = layers.get("source_padding_mask")  # models with pad_id != 0 (Marian)
    source_mask = keras.ops.not_equal(source, padding.pad_id if padding else 0)
    # With pad_id != 0 the decoder is masked by causality only (it starts from pad_id).
    target_mask = None if padding else keras.ops.not_equal(target, 0)
    if "pointer_generator" in layers:
        target = copying.decoder_input(target, target_embedding.vocabulary_size)
    weights = {}
    x = source_embedding(source)
    for i, block in enumerate(numbered_layers(layers, "encoder_block_")):
        x, w = block(x, padding_mask=source_mask, return_attention_scores=True)
        weights[f"encoder_block_{i}/self_attention"] = keras.ops.convert_to_numpy(w)
    if "encoder_norm" in layers:
        x = layers["encoder_norm"](x)
    y = target_embedding(target)
    for i, block in enumerate(numbered_layers(layers, "decoder_block_")):
        y, self_w, cross_w = block(
            y,
            x,
            decoder_padding_mask=target_mask,
            encoder_padding_mask=source_mask,
            return_attention_scores=True,
        )
        weights[f"decoder_block_{i}/self_attention"] = keras.ops.convert_to_numpy(self_w)
        weights[f"decoder_block_{i}/cross_attention"] = keras.ops.convert_to_numpy(cross_w)
    return weights


# `compile_model` moved to `recipe` (the family's shape); the old name still works.
__getattr__ = moved.names_getattr(__name__)
