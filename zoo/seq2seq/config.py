"""`Seq2SeqConfig`, RNNsearch's sizes and recipe, and the registered sizes.

Light (no Keras): `zoo list` and `zoo describe` read it. The model is built by
`zoo.seq2seq.model.build` and compiled by its `compile_model`, which the
registry imports when a model is first built (`zoo.registry.Lazy`).
"""

import dataclasses

from keras_attention import checks
from zoo import registry
from zoo.errors import ZooError

# Bahdanau et al. (2015); Chorowski et al. (2015); Raffel et al. (2017); Chiu & Raffel (2018)
ATTENTIONS = ("additive", "location", "monotonic", "mocha")
MONOTONIC = ("monotonic", "mocha")  # ka.MonotonicAttention


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


_BUILD = registry.Lazy("zoo.seq2seq.model", "build")
registry.register(
    "seq2seq-bahdanau",
    _BUILD,
    Seq2SeqConfig(),
    reference="Bahdanau, Cho, Bengio, Neural Machine Translation by Jointly Learning to Align "
    "and Translate, ICLR 2015 (RNNsearch: GRU 1000, embeddings 620, maxout 500)",
)
registry.register(
    "seq2seq-bahdanau-small",
    _BUILD,
    Seq2SeqConfig(
        vocabulary_size=8000, embedding_dim=64, encoder_units=128, decoder_units=128,
        attention_units=128, maxout_units=64, max_length=128,
    ),
    reference="CPU-sized RNNsearch: GRU 128, embeddings 64, maxout 64",
)
