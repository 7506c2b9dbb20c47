"""`ConvS2SConfig`, ConvS2S's sizes and recipe, and the registered sizes.

Light (no Keras): `zoo list` and `zoo describe` read it. The model is built by
`zoo.convs2s.model.build` and compiled by its `compile_model`, which the
registry imports when a model is first built (`zoo.registry.Lazy`).
"""

import dataclasses

from keras_attention import checks
from zoo import registry

OPTIMIZERS = ("nesterov", "adam")


@dataclasses.dataclass(frozen=True)
class ConvS2SConfig(registry.TranslationConfig):
    """Sizes and training recipe of a convolutional encoder-decoder with attention.

    Source and target have their own embedding matrices (as in the paper);
    their vocabularies default to `vocabulary_size` each. `embedding_dim` is F
    (embeddings, attention keys and values), `hidden_dim` D (the convolutions),
    `output_embedding_dim` the layer before the softmax.

    The recipe rescales the whole gradient to norm at most `global_clipnorm` (0.1, as the
    paper and fairseq's `--clip-norm`); `clipnorm` instead clips each variable's gradient on
    its own (Keras'), the field of runs saved before `global_clipnorm`, which resume with
    it. At most one is set (docs/math.md#gradient-clipping).
    """

    # `zoo.config(name, clipnorm=...)` given alone sets `global_clipnorm` to None (registry).
    ONE_OF = (("global_clipnorm", "clipnorm"),)

    vocabulary_size: int = 40000
    source_vocabulary_size: int | None = None
    target_vocabulary_size: int | None = None
    embedding_dim: int = 512
    hidden_dim: int = 512
    output_embedding_dim: int = 512
    num_encoder_layers: int = 20
    num_decoder_layers: int = 20
    kernel_size: int = 3
    dropout: float = 0.2
    max_length: int = 1024
    # Training recipe (section 4.2): Nesterov momentum 0.99, learning rate 0.25,
    # gradients renormalised to norm 0.1; "adam" is Adam at `learning_rate`.
    optimizer: str = "nesterov"
    learning_rate: float = 0.25
    momentum: float = 0.99
    global_clipnorm: float | None = 0.1  # the whole gradient's norm
    clipnorm: float | None = None  # per variable (Keras'): runs saved before global_clipnorm
    label_smoothing: float = 0.0
    jit_compile: bool = False

    def __post_init__(self):
        checks.check_fields(
            self, checks.check_positive_int, "vocabulary_size", "embedding_dim", "hidden_dim",
            "output_embedding_dim", "num_encoder_layers", "num_decoder_layers", "kernel_size",
            "max_length",
        )
        checks.check_fields(self, checks.check_positive_int, "source_vocabulary_size",
                            "target_vocabulary_size", allow_none=True)
        checks.check_fields(self, checks.check_rate, "dropout", "label_smoothing")
        checks.check_choice("optimizer", self.optimizer, OPTIMIZERS)
        checks.check_positive_number("learning_rate", self.learning_rate)
        checks.check_fields(self, checks.check_positive_number, "global_clipnorm", "clipnorm",
                            allow_none=True)
        checks.check_at_most_one(self, "global_clipnorm", "clipnorm")
        checks.check_rate("momentum", self.momentum)

    def num_params(self):
        """The parameter count, computed from the sizes (nothing is built)."""
        f, d, o, k = self.embedding_dim, self.hidden_dim, self.output_embedding_dim, self.kernel_size
        embeddings = (self.source_vocab + self.target_vocab + 2 * self.max_length) * f
        convolution = k * d * 2 * d + 2 * d
        attention = (d * f + f) + (f * d + d)
        projections = 2 * (f * d + d) + (d * f + f)  # into both stacks, out of the encoder
        encoder = self.num_encoder_layers * convolution
        decoder = self.num_decoder_layers * (convolution + attention)
        output = (d * o + o) + (o * self.target_vocab + self.target_vocab)
        return embeddings + projections + encoder + decoder + output


_BUILD = registry.Lazy("zoo.convs2s.model", "build")
registry.register(
    "convs2s-small",
    _BUILD,
    ConvS2SConfig(
        vocabulary_size=8000, embedding_dim=256, hidden_dim=256, output_embedding_dim=256,
        num_encoder_layers=4, num_decoder_layers=3, max_length=256,
        optimizer="adam", learning_rate=1e-3, global_clipnorm=1.0,
    ),
    reference="CPU-sized ConvS2S: 4+3 layers of width 256, kernel 3 (fairseq's "
    "fconv_iwslt_de_en), Adam instead of the paper's Nesterov SGD",
)
registry.register(
    "convs2s-wmt-en-ro",
    _BUILD,
    ConvS2SConfig(),
    reference="Gehring et al., Convolutional Sequence to Sequence Learning, ICML 2017, "
    "WMT'16 En-Ro: 20+20 layers of width 512, kernel 3, 40K BPE types",
)
