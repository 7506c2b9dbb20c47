"""RNN encoder-decoder with Bahdanau attention (RNNsearch, Bahdanau et al., 2015).

Encoder: a bidirectional RNN, annotations `h_j = [→h_j; ←h_j]`. Decoder state
`s_0 = tanh(W_s ←h_1)`; at step t the alignment model scores every annotation
against `s_{t-1}`, the context `c_t = Σ_j α_tj h_j` and the previous word feed
the recurrent cell, `s_t = RNN([E y_{t-1}; c_t], s_{t-1})`, and the output is
`softmax(W_o maxout(U_o s_{t-1} + V_o E y_{t-1} + C_o c_t))` (appendix A.2.2).

With `attention="location"` the alignment model also convolves the previous
alignment `α_{t-1}` (Chorowski et al., 2015), which the decoder state carries.
With `attention="monotonic"` (Raffel et al., 2017) or `"mocha"` (Chiu & Raffel,
2018) the attention is monotonic: expected alignments in training, a hard head
that only moves forward at inference; the state carries `α_{t-1}` too.

With `copy=True` the output is a pointer-generator's (See et al. 2017,
`ka.PointerGenerator`): `p_gen = σ(w_cᵀ c_t + w_sᵀ s_{t-1} + w_xᵀ E y_{t-1} + b)`
from the features the output layer sees (the paper's decoder state `s_t` has read
`x_t`; here `s_{t-1}` and `E y_{t-1}` are that state's two halves), and the copy
distribution is the alignment `α_t`. With `coverage=True` the alignment model also
sees the coverage vector `Σ_{t'<t} α_{t'}` (See et al. §2.3), which the decoder state
carries, and the loss gains `coverage_weight · Σ_i min(α_{t,i}, coverage_{t,i})` per
target token (docs/math.md#the-pointer-generator).

Inputs `{"source": int32 (B, S), "target": int32 (B, T)}` (teacher forcing,
0 = padding), output logits `(B, T, V)`. With `copy=True`, also
`"source_extended"` int32 (B, S), the source's ids in the extended target
vocabulary (`zoo.text.copying`), and the output is `log P` over it, `(B, T, V + S)`;
target ids `>= V` (copies) are read as `[UNK]`.

This module holds the family's config, the output layer (`Maxout`), the model
builder and the registration. The decoder recurrence, `BahdanauDecoder`, and
`coverage_loss` are `zoo.seq2seq.decoder`'s.
"""


import keras
from keras import ops

import keras_attention as ka
from zoo import moved
from zoo.registry.model import FamilyModel
from zoo.seq2seq.config import ATTENTIONS, MONOTONIC, Seq2SeqConfig  # noqa: F401 - also importable from here, as before
from zoo.seq2seq.copying import copy_output, fixed_vocabulary
from zoo.seq2seq.decoder import BahdanauDecoder


@keras.saving.register_keras_serializable(package="zoo")
class Maxout(keras.layers.Layer):
    """`t_i = max(t̃_{2i-1}, t̃_{2i})`: halves the last axis by pairwise max (Goodfellow et al.)."""

    def __init__(self, num_units, **kwargs):
        super().__init__(**kwargs)
        self.num_units = num_units

    def call(self, inputs):
        if inputs.shape[-1] != 2 * self.num_units:
            raise ValueError(
                f"Maxout expects {2 * self.num_units} features; received {tuple(inputs.shape)}."
            )
        shape = ops.shape(inputs)
        pairs = ops.reshape(inputs, tuple(shape[:-1]) + (self.num_units, 2))
        return ops.max(pairs, axis=-1)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.num_units,)

    def get_config(self):
        config = super().get_config()
        config.update({"num_units": self.num_units})
        return config


def encode(layers, source, training=None):
    """Encoder half, shared by `build`, decoding and attention inspection.

    Returns annotations `(B, S, 2·encoder_units)`, the decoder's initial states
    and the source mask `(B, S)`.
    """
    embedded = layers["source_embedding"](source)
    embedded = layers["source_dropout"](embedded, training=training)
    outputs = layers["encoder"](embedded, training=training)
    annotations, states = outputs[0], outputs[1:]
    backward_first = states[len(states) // 2]  # ←h_1: the backward RNN's final state
    initial = layers["initial_state"](backward_first)  # s_0 = tanh(W_s ←h_1)
    initial_state = [initial] if len(states) == 2 else [initial, ops.zeros_like(initial)]
    return annotations, initial_state, ops.not_equal(source, 0)


def output_logits(layers, previous_states, embedded_targets, contexts, training=None):
    """`W_o maxout(U_o s_{t-1} + V_o E y_{t-1} + C_o c_t)` -> logits `(B, T, V)`."""
    features = ops.concatenate([previous_states, embedded_targets, contexts], axis=-1)
    hidden = layers["maxout"](layers["maxout_projection"](features))
    hidden = layers["output_dropout"](hidden, training=training)
    return layers["logits"](layers["output_projection"](hidden))


def _make_layers(config):
    rnn = keras.layers.GRU if config.cell == "gru" else keras.layers.LSTM
    return {
        "source_embedding": keras.layers.Embedding(
            config.source_vocab, config.embedding_dim, mask_zero=True, name="source_embedding"
        ),
        "source_dropout": keras.layers.Dropout(config.dropout, name="source_dropout"),
        "encoder": keras.layers.Bidirectional(
            rnn(config.encoder_units, return_sequences=True, return_state=True),
            name="encoder",
        ),
        "initial_state": keras.layers.Dense(
            config.decoder_units, activation="tanh", name="initial_state"
        ),
        "target_embedding": keras.layers.Embedding(
            config.target_vocab, config.embedding_dim, name="target_embedding"
        ),
        "target_dropout": keras.layers.Dropout(config.dropout, name="target_dropout"),
        "decoder": BahdanauDecoder(
            config.decoder_units, config.attention_units, cell=config.cell,
            attention=config.attention, location_filters=config.location_filters,
            location_kernel_size=config.location_kernel_size,
            mocha_chunk_size=config.mocha_chunk_size, sigmoid_noise=config.sigmoid_noise,
            score_bias_init=config.score_bias_init, coverage=config.coverage,
            coverage_weight=config.coverage_weight, name="decoder",
        ),
        "maxout_projection": keras.layers.Dense(2 * config.maxout_units, name="maxout_projection"),
        "maxout": Maxout(config.maxout_units, name="maxout"),
        "output_dropout": keras.layers.Dropout(config.dropout, name="output_dropout"),
        "output_projection": keras.layers.Dense(config.target_vocab, name="output_projection"),
        "logits": keras.layers.Activation("linear", dtype="float32", name="logits"),
        **({"pointer_generator": ka.PointerGenerator(dtype="float32", name="pointer_generator")}
           if config.copy else {}),
    }


def build(config):
    """The functional `keras.Model` for a `Seq2SeqConfig` (layer names as in `_make_layers`)."""
    layers = _make_layers(config)
    source = keras.Input((None,), dtype="int32", name="source")
    target = keras.Input((None,), dtype="int32", name="target")
    inputs = {"source": source, "target": target}
    annotations, initial_state, source_mask = encode(layers, source)
    decoder_input = fixed_vocabulary(target, config.target_vocab) if config.copy else target
    embedded = layers["target_dropout"](layers["target_embedding"](decoder_input))
    previous, contexts, alignments = layers["decoder"](
        embedded, annotations, initial_state, annotations_mask=source_mask,
        **({"target_mask": ops.not_equal(target, 0)} if config.coverage else {}),
    )
    logits = output_logits(layers, previous, embedded, contexts)
    if config.copy:
        inputs["source_extended"] = keras.Input((None,), dtype="int32", name="source_extended")
        logits = copy_output(layers, logits, alignments, inputs["source_extended"], previous,
                             embedded, contexts)
    return FamilyModel(inputs, logits, name="seq2seq_bahdanau", family="seq2seq")


def attention_weights(model, inputs):
    """The alignments `α` of a batch: `{"decoder/alignment": (B, T, S)}` (numpy)."""
    layers = {layer.name: layer for layer in model.layers}
    source = ops.convert_to_tensor(inputs["source"], "int32")
    target = ops.convert_to_tensor(inputs["target"], "int32")
    annotations, initial_state, source_mask = encode(layers, source)
    if "pointer_generator" in layers:
        target = fixed_vocabulary(target, layers["target_embedding"].input_dim)
    embedded = layers["target_embedding"](target)
    _, _, alignments = layers["decoder"](
        embedded, annotations, initial_state, annotations_mask=source_mask
    )
    return {"decoder/alignment": ops.convert_to_numpy(alignments)}


# `compile_model` moved to `recipe` (the family's shape); the old name still works.
__getattr__ = moved.names_getattr(__name__)
