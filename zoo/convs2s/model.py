"""Convolutional sequence to sequence learning (ConvS2S, Gehring et al., 2017).

Encoder and decoder are stacks of GLU convolutions (`zoo.convs2s.layers`): the
encoder's are centred, the decoder's causal (`ka.CausalConv1D`), and every
decoder layer attends to the encoder output ("multi-step attention") with the
keys `z` and the values `z + e` (encoder output plus source embedding).

    embeddings   e = w + p (token + learned position), g likewise for the target
    encoder      h^0 = W e;  h^l = (GLU(conv(h^{l-1})) + h^{l-1})·√½;  z = W' h^L
    decoder      h^l = (attention(GLU(causalconv(h^{l-1})), g, z, z + e) + h^{l-1})·√½
    output       logits = W_o Dropout(W h^L)

Inputs `{"source": int32 (B, S), "target": int32 (B, T)}` (teacher forcing:
the target is the decoder input `[START] y_1 … y_n`; id 0 is padding), output
logits `(B, T, V)`, as the Transformer's. A decoder of L layers of width k sees
the last `ka.receptive_field(k, [1] * L)` target tokens; the attention sees
the whole source.

Why this entry: the zoo's translation pipeline, decoding and export are built
for `{"source", "target"} -> logits` encoder-decoders, so an encoder-decoder
with causal convolutions compares directly with the Transformer and RNNsearch
on the same data, and each of its layers is one row of the cost table:
convolution O(k·n·d²) with O(n/k) path length, next to self-attention and
recurrence. A decoder-only dilated model would need a language-model pipeline
the zoo does not have.

Simplified from the paper: no weight normalisation (the initialisation of
section 3.5 is kept), the same width for every layer (no residual projections),
and one kernel size for encoder and decoder. Cached decoding
(`zoo.convs2s.decoding.IncrementalDecoder`) keeps each decoder layer's last
k-1 inputs, as fairseq's `LinearizedConvolution` does.
"""


import keras
from keras import ops

import keras_attention as ka
from zoo import moved
from zoo.convs2s.config import OPTIMIZERS, ConvS2SConfig  # noqa: F401 - also importable from here, as before
from zoo.convs2s.layers import ConvS2SDecoderBlock, ConvS2SEncoderBlock, SourceKeysAndValues
from zoo.families import numbered_layers
from zoo.registry.model import FamilyModel
from zoo.transformer import PaddingMask


def _linear(units, fan_in, dropout, name):
    """Dense with the paper's init: normal, variance `(1 - dropout) / fan_in`, bias 0."""
    stddev = ((1 - dropout) / fan_in) ** 0.5
    return keras.layers.Dense(
        units, kernel_initializer=keras.initializers.RandomNormal(stddev=stddev), name=name
    )


def _embedding(config, vocabulary_size, name):
    return ka.TokenAndPositionEmbedding(
        vocabulary_size, config.max_length, config.embedding_dim, positional="learned",
        scale_embeddings=False, dropout=config.dropout,
        embeddings_initializer=keras.initializers.RandomNormal(stddev=0.1), name=name,
    )


def _make_layers(config):
    f, d, p = config.embedding_dim, config.hidden_dim, config.dropout
    layers = {
        "source_padding_mask": PaddingMask(0, name="source_padding_mask"),
        "source_embedding": _embedding(config, config.source_vocab, "source_embedding"),
        "encoder_input_projection": _linear(d, f, p, "encoder_input_projection"),
        "encoder_output_projection": _linear(f, d, 0.0, "encoder_output_projection"),
        "source_keys_and_values": SourceKeysAndValues(
            config.num_decoder_layers, name="source_keys_and_values"
        ),
        "target_embedding": _embedding(config, config.target_vocab, "target_embedding"),
        "decoder_input_projection": _linear(d, f, p, "decoder_input_projection"),
        "decoder_output_projection": _linear(
            config.output_embedding_dim, d, 0.0, "decoder_output_projection"
        ),
        "output_dropout": keras.layers.Dropout(p, name="output_dropout"),
        "output_projection": _linear(
            config.target_vocab, config.output_embedding_dim, p, "output_projection"
        ),
        "logits": keras.layers.Activation("linear", dtype="float32", name="logits"),
    }
    for i in range(config.num_encoder_layers):
        layers[f"convolutional_encoder_block_{i}"] = ConvS2SEncoderBlock(
            d, config.kernel_size, dropout=p, name=f"convolutional_encoder_block_{i}"
        )
    for i in range(config.num_decoder_layers):
        layers[f"convolutional_decoder_block_{i}"] = ConvS2SDecoderBlock(
            d, f, config.kernel_size, dropout=p, name=f"convolutional_decoder_block_{i}"
        )
    return layers


def encode(layers, source, training=None):
    """Source ids `(B, S)` -> attention keys `z`, values `(z + e)·√½` `(B, S, F)`, mask `(B, S)`.

    Shared by `build` and `attention_weights` (`layers`: the model's layers by name).
    """
    mask = layers["source_padding_mask"](source)  # (B, S)
    embedded = layers["source_embedding"](source, training=training)  # e (B, S, F)
    x = layers["encoder_input_projection"](embedded)  # (B, S, D)
    for block in numbered_layers(layers, "convolutional_encoder_block_"):
        x = block(x, padding_mask=mask, training=training)
    z = layers["encoder_output_projection"](x)  # (B, S, F)
    keys, values = layers["source_keys_and_values"](z, embedded, padding_mask=mask)
    return keys, values, mask


def decode(layers, target, keys, values, mask, training=None):
    """Target ids `(B, T)` and the encoder's keys and values -> logits `(B, T, V)`, and each
    decoder layer's attention `(B, T, S)`."""
    embedded = layers["target_embedding"](target, training=training)  # g (B, T, F)
    y = layers["decoder_input_projection"](embedded)  # (B, T, D)
    attention = []
    for block in numbered_layers(layers, "convolutional_decoder_block_"):
        y, weights = block(
            y, embedded, keys, values, encoder_padding_mask=mask, training=training,
            return_attention_scores=True,
        )
        attention.append(weights)
    y = layers["decoder_output_projection"](y)  # (B, T, output_embedding_dim)
    y = layers["output_dropout"](y, training=training)
    return layers["logits"](layers["output_projection"](y)), attention


def build(config):
    """The functional `keras.Model` for a `ConvS2SConfig`.

    Layer names (used by decoding, export and attention inspection):
    `source_embedding`, `target_embedding`, `convolutional_encoder_block_{i}`,
    `convolutional_decoder_block_{i}`, `source_keys_and_values`, `logits`.
    """
    layers = _make_layers(config)
    source = keras.Input((None,), dtype="int32", name="source")
    target = keras.Input((None,), dtype="int32", name="target")

    # === Encoder ===
    keys, values, mask = encode(layers, source)

    # === Decoder and output ===
    logits, _ = decode(layers, target, keys, values, mask)
    return FamilyModel({"source": source, "target": target}, logits, name="convs2s",
                       family="convs2s")


def attention_weights(model, inputs):
    """Each decoder layer's attention for a batch: `convolutional_decoder_block_{i}/attention`
    `(B, T, S)` (numpy), computed eagerly (also on models loaded from `.keras` files)."""
    layers = {layer.name: layer for layer in model.layers}
    source = ops.convert_to_tensor(inputs["source"], "int32")
    target = ops.convert_to_tensor(inputs["target"], "int32")
    keys, values, mask = encode(layers, source)
    _, attention = decode(layers, target, keys, values, mask)
    return {
        f"convolutional_decoder_block_{i}/attention": ops.convert_to_numpy(weights)
        for i, weights in enumerate(attention)
    }


# `compile_model` moved to `recipe` (the family's shape); the old name still works.
__getattr__ = moved.names_getattr(__name__)
