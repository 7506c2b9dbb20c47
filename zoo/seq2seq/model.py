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

import dataclasses

import keras
from keras import ops

import keras_attention as ka
from keras_attention import checks
from keras_attention.layers.pointer_generator import fixed_vocabulary_ids
from zoo import registry
from zoo.errors import ZooError
from zoo.seq2seq.decoder import ATTENTIONS, MONOTONIC, BahdanauDecoder
from zoo.text.special import UNK_ID


@dataclasses.dataclass(frozen=True)
class Seq2SeqConfig(registry.TranslationConfig):
    """Sizes and training recipe of an RNN encoder-decoder with additive (or location-aware) attention.

    Source and target vocabularies default to `vocabulary_size` each (two
    embedding matrices: RNNsearch does not share them). `attention="location"`
    makes the alignment model location-aware (Chorowski et al., 2015):
    `location_filters` filters of width `location_kernel_size` over the previous
    step's alignment join the additive score. `attention="monotonic"` is
    `ka.MonotonicAttention` (`sigmoid_noise`, `score_bias_init`: its noise and the
    initial r), `attention="mocha"` the same with chunks of `mocha_chunk_size`.
    `copy=True` makes the output a
    pointer-generator's (`ka.PointerGenerator`) and `coverage=True` adds See et
    al.'s coverage, with its loss weighted by `coverage_weight`; label smoothing
    then spreads over the fixed target vocabulary only.

    The recipe rescales the whole gradient to norm at most `global_clipnorm` (1, as the
    paper); `clipnorm` instead clips each variable's gradient on its own (Keras'), the field
    of runs saved before `global_clipnorm`, which resume with it. At most one is set
    (docs/math.md#gradient-clipping).
    """

    # `zoo.config(name, clipnorm=...)` given alone sets `global_clipnorm` to None (registry).
    ONE_OF = (("global_clipnorm", "clipnorm"),)

    vocabulary_size: int = 30000
    source_vocabulary_size: int | None = None
    target_vocabulary_size: int | None = None
    embedding_dim: int = 620
    encoder_units: int = 1000
    decoder_units: int = 1000
    attention_units: int = 1000
    maxout_units: int = 500
    cell: str = "gru"
    attention: str = "additive"  # or "location": location-aware (ka.LocationAwareAttention)
    location_filters: int = 10
    location_kernel_size: int = 15
    mocha_chunk_size: int = 3
    sigmoid_noise: float = 1.0
    score_bias_init: float = -1.0
    copy: bool = False  # pointer-generator output (See et al. 2017)
    coverage: bool = False  # coverage in the attention energy and the loss (See et al. §2.3)
    coverage_weight: float = 1.0  # λ of the coverage loss
    dropout: float = 0.0
    max_length: int = 256
    # Training recipe.
    learning_rate: float = 1e-3
    global_clipnorm: float | None = 1.0  # the whole gradient's norm (Bahdanau et al. 2015)
    clipnorm: float | None = None  # per variable (Keras'): runs saved before global_clipnorm
    label_smoothing: float = 0.0
    jit_compile: bool = False

    def __post_init__(self):
        checks.check_fields(
            self, checks.check_positive_int, "vocabulary_size", "embedding_dim",
            "encoder_units", "decoder_units", "attention_units", "maxout_units", "max_length",
            "location_filters", "location_kernel_size", "mocha_chunk_size",
        )
        checks.check_number("sigmoid_noise", self.sigmoid_noise, 0)
        checks.check_number("score_bias_init", self.score_bias_init)
        checks.check_fields(self, checks.check_positive_int, "source_vocabulary_size",
                            "target_vocabulary_size", allow_none=True)
        checks.check_fields(self, checks.check_rate, "dropout", "label_smoothing")
        for name in ("copy", "coverage"):
            checks.check(name, getattr(self, name), "a bool", isinstance(getattr(self, name), bool))
        checks.check_number("coverage_weight", self.coverage_weight, 0)
        checks.check_choice("cell", self.cell, ("gru", "lstm"))
        checks.check_choice("attention", self.attention, ATTENTIONS)
        checks.check_positive_number("learning_rate", self.learning_rate)
        checks.check_fields(self, checks.check_positive_number, "global_clipnorm", "clipnorm",
                            allow_none=True)
        checks.check_at_most_one(self, "global_clipnorm", "clipnorm")
        if self.jit_compile:
            raise ZooError(
                "`jit_compile=True` is not supported for the RNN encoder-decoder: its decoder "
                "loop (keras.ops.scan, a tf.while_loop of unknown length) cannot be "
                "differentiated under XLA. Use jit_compile=False."
            )

    def _cell_params(self, input_dim, units):
        if self.cell == "gru":  # Keras GRU, reset_after=True: two bias vectors
            return 3 * units * (input_dim + units + 2)
        return 4 * units * (input_dim + units + 1)

    def num_params(self):
        """The parameter count, computed from the sizes (nothing is built)."""
        e, enc, dec = self.embedding_dim, self.encoder_units, self.decoder_units
        a, m = self.attention_units, self.maxout_units
        embeddings = (self.source_vocab + self.target_vocab) * e
        encoder = 2 * self._cell_params(e, enc)
        initial_state = enc * dec + dec
        attention = dec * a + 2 * enc * a + a
        if self.attention == "location":  # F (k × 1 × F), U (F × a), b (a)
            f = self.location_filters
            attention += self.location_kernel_size * f + f * a + a
        if self.attention in MONOTONIC:  # b (a), g, r
            attention += a + 2
        if self.attention == "mocha":  # the chunk energy: W_c, U_c, b_c, v_c
            attention += dec * a + 2 * enc * a + 2 * a
        if self.coverage:  # w_c (a)
            attention += a
        decoder = self._cell_params(e + 2 * enc, dec)
        maxout = (dec + e + 2 * enc) * 2 * m + 2 * m
        output = m * self.target_vocab + self.target_vocab
        if self.copy:  # the switch: w over [c_t; s_{t-1}; E y_{t-1}], and b
            output += 2 * enc + dec + e + 1
        return embeddings + encoder + initial_state + attention + decoder + maxout + output


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


def fixed_vocabulary(target, vocabulary_size):
    """Decoder inputs in the extended vocabulary -> the fixed one: a copied token's id
    `>= V` becomes `[UNK]` (See et al. 2017 feed `[UNK]` for a copied OOV word)."""
    return fixed_vocabulary_ids(target, vocabulary_size, UNK_ID)


def copy_output(layers, logits, alignments, source_extended, previous_states, embedded,
                contexts):
    """The pointer-generator's `log P` `(B, T, V + S)` (or one step, `(B, V + S)`): the switch
    sees `[c_t; s_{t-1}; E y_{t-1}]`, the copy distribution is the alignment `α_t`."""
    features = ops.concatenate([contexts, previous_states, embedded], axis=-1)
    return layers["pointer_generator"](logits, alignments, source_extended, features)


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
    return keras.Model(inputs, logits, name="seq2seq_bahdanau")


def compile_model(model, config):
    """Adam with the gradient's global norm clipped, masked cross-entropy (with `copy`: the
    mixture's negative log-likelihood), masked accuracy."""
    if config.copy:
        loss = ka.PointerGeneratorCrossentropy(config.target_vocab,
                                               label_smoothing=config.label_smoothing)
    else:
        loss = ka.MaskedSparseCategoricalCrossentropy(label_smoothing=config.label_smoothing)
    model.compile(
        optimizer=keras.optimizers.Adam(config.learning_rate,
                                        global_clipnorm=config.global_clipnorm,
                                        clipnorm=config.clipnorm),
        loss=loss,
        metrics=[ka.MaskedAccuracy()],
        jit_compile=ka.backends.jit_compile(config.jit_compile),
    )


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


registry.register_family(Seq2SeqConfig, "seq2seq", compile_fn=compile_model)

registry.register(
    "seq2seq-bahdanau",
    build,
    Seq2SeqConfig(),
    reference="Bahdanau, Cho, Bengio, Neural Machine Translation by Jointly Learning to Align "
    "and Translate, ICLR 2015 (RNNsearch: GRU 1000, embeddings 620, maxout 500)",
)
registry.register(
    "seq2seq-bahdanau-small",
    build,
    Seq2SeqConfig(
        vocabulary_size=8000, embedding_dim=64, encoder_units=128, decoder_units=128,
        attention_units=128, maxout_units=64, max_length=128,
    ),
    reference="CPU-sized RNNsearch: GRU 128, embeddings 64, maxout 64",
)
