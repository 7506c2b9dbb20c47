"""`TransformerConfig`, the Transformer's sizes and recipe, and the registered sizes.

Light (no Keras): `zoo list` and `zoo describe` read it. The model is built by
`zoo.transformer.model.build` and compiled by its `compile_model`, which the
registry imports when a model is first built (`zoo.registry.Lazy`); an OPUS-MT
folder is imported by `zoo.transformer.weights.marian` (`zoo.get(name, weights=FOLDER)`).
"""

import dataclasses

from keras_attention import checks
from zoo import registry
from zoo.errors import ZooError

ACTIVATIONS = ("relu", "gelu", "swish")
# `keras_attention.layers.positional.LAYOUTS`, written here so that the config imports no Keras
# (tests/test_cli_light.py checks that they agree).
LAYOUTS = ("interleaved", "halves")


@dataclasses.dataclass(frozen=True)
class TransformerConfig(registry.TranslationConfig):
    """Sizes and training recipe of an encoder-decoder Transformer.

    With `source_vocabulary_size` and `target_vocabulary_size` unset, source and
    target share one vocabulary of `vocabulary_size` tokens and one embedding
    matrix, which (with `tie_embeddings`) is also the pre-softmax projection, as
    in the paper. Setting either gives separate vocabularies; then
    `tie_embeddings` ties the target embedding with the output projection.
    `copy=True` adds See et al.'s pointer-generator, copying with the last decoder
    block's cross-attention averaged over the heads (`zoo.transformer.copying`);
    label smoothing then spreads over the fixed target vocabulary only.

    Dropout is the paper's (section 5.4): `dropout` on each sub-layer's output and on
    the embeddings, and none on the attention weights (`attention_dropout` 0, every size
    registered here; imported Marian models take their file's, 0 for OPUS-MT). So the
    attention of `ka.MultiHeadAttention` (`flash_attention=None`) runs fused in training
    too on PyTorch and on JAX with a GPU or TPU (`keras.ops.dot_product_attention`:
    cuDNN's flash attention under JAX on a recent GPU in bfloat16, PyTorch's
    `scaled_dot_product_attention` kernels); `attention_dropout` above 0 makes the
    training steps take the explicit path (scores, softmax, dropout; slower and O(T·S)
    memory on an accelerator), and inference stays fused. TensorFlow and JAX's CPU take
    the explicit path (`ka.layers.multi_head.fused_by_default`), and so do the cached
    decoding steps on every backend.
    """

    vocabulary_size: int = 37000
    source_vocabulary_size: int | None = None
    target_vocabulary_size: int | None = None
    tie_embeddings: bool = True
    num_encoder_layers: int = 6
    num_decoder_layers: int = 6
    d_model: int = 512
    num_heads: int = 8
    intermediate_dim: int = 2048
    dropout: float = 0.1
    attention_dropout: float = 0.0
    max_length: int = 256
    norm_first: bool = False
    positional: str = "sinusoidal"
    layer_norm_epsilon: float = 1e-6
    activation: str = "relu"
    positional_layout: str = "interleaved"
    scale_embeddings: bool = True
    final_logits_bias: bool = False
    pad_id: int = 0
    start_id: int = 2
    end_id: int = 3
    # "softmax" (the paper) or "linear" (Katharopoulos et al. 2020: O(n) in the length,
    # cached decoding keeps a constant-size state per layer instead of keys and values).
    attention: str = "softmax"
    copy: bool = False  # pointer-generator output (See et al. 2017)
    # Training recipe (section 5.3 of the paper).
    label_smoothing: float = 0.1
    warmup_steps: int = 4000
    learning_rate_scale: float = 1.0
    jit_compile: bool = False

    def __post_init__(self):
        checks.check_fields(
            self,
            checks.check_positive_int,
            "vocabulary_size",
            "num_encoder_layers",
            "num_decoder_layers",
            "d_model",
            "num_heads",
            "intermediate_dim",
            "max_length",
            "warmup_steps",
        )
        checks.check_fields(self, checks.check_positive_int, "source_vocabulary_size",
                            "target_vocabulary_size", allow_none=True)
        checks.check_fields(self, checks.check_rate, "dropout", "attention_dropout",
                            "label_smoothing")
        checks.check_choice("positional", self.positional, ("sinusoidal", "learned"))
        checks.check_choice("activation", self.activation, ACTIVATIONS)
        checks.check_choice("positional_layout", self.positional_layout, LAYOUTS)
        for name in ("scale_embeddings", "final_logits_bias", "copy"):
            value = getattr(self, name)
            checks.check(name, value, "a bool", isinstance(value, bool))
        smallest = min(self.source_vocab, self.target_vocab)
        for name in ("pad_id", "start_id", "end_id"):
            value = getattr(self, name)
            checks.check(name, value, f"an id in [0, {smallest}) (the vocabulary)",
                         checks.is_int(value) and 0 <= value < smallest)
        if self.end_id == self.pad_id:
            raise ZooError(f"`end_id` must differ from `pad_id`; both are {self.pad_id}.")
        checks.check_choice("attention", self.attention, ("softmax", "linear"))
        if self.attention == "linear" and self.attention_dropout > 0:
            raise ZooError(
                "attention='linear' has no attention weights to drop; received "
                f"attention_dropout={self.attention_dropout}."
            )
        if self.copy and (self.attention != "softmax" or self.pad_id != 0):
            raise ZooError(
                "copy=True copies with the cross-attention weights: it needs "
                f"attention='softmax' and pad_id=0; received attention={self.attention!r}, "
                f"pad_id={self.pad_id}."
            )
        if self.d_model % self.num_heads:
            raise ZooError(
                "num_heads must divide d_model; received "
                f"num_heads={self.num_heads}, d_model={self.d_model}."
            )
        checks.check_positive_number("learning_rate_scale", self.learning_rate_scale)

    @property
    def shared_vocabulary(self):
        return self.source_vocabulary_size is None and self.target_vocabulary_size is None

    def num_params(self):
        """The parameter count, computed from the sizes (nothing is built)."""
        d, f = self.d_model, self.intermediate_dim
        attention = 4 * (d * d + d)
        feed_forward = 2 * d * f + f + d
        norm = 2 * d
        encoder_layer = attention + feed_forward + 2 * norm
        decoder_layer = 2 * attention + feed_forward + 3 * norm
        positions = self.max_length * d if self.positional == "learned" else 0
        if self.shared_vocabulary:
            embeddings = self.vocabulary_size * d + positions
        else:
            embeddings = (self.source_vocab + self.target_vocab) * d + 2 * positions
        output = 0 if self.tie_embeddings else d * self.target_vocab
        final_norms = 2 * norm if self.norm_first else 0
        logits_bias = self.target_vocab if self.final_logits_bias else 0
        switch = 3 * d + 1 if self.copy else 0  # w over [c_t; s_t; x_t], and b
        return (
            switch
            + logits_bias
            + embeddings
            + self.num_encoder_layers * encoder_layer
            + self.num_decoder_layers * decoder_layer
            + final_norms
            + output
        )


_BUILD = registry.Lazy("zoo.transformer.model", "build")
_PAPER = "Vaswani et al., Attention Is All You Need, NeurIPS 2017, Table 3"
_TINY = dict(
    vocabulary_size=8000, num_encoder_layers=2, num_decoder_layers=2, d_model=128,
    num_heads=4, intermediate_dim=512, max_length=128, warmup_steps=1000,
)
_SMALL = dict(
    vocabulary_size=8000, num_encoder_layers=3, num_decoder_layers=3, d_model=256,
    num_heads=4, intermediate_dim=1024, max_length=256, warmup_steps=4000,
)
registry.register(
    "transformer-tiny", _BUILD, TransformerConfig(**_TINY),
    reference="CPU-sized: 2+2 layers, d_model 128, 4 heads, d_ff 512",
)
registry.register(
    "transformer-small", _BUILD, TransformerConfig(**_SMALL),
    reference="3+3 layers, d_model 256, 4 heads, d_ff 1024 (the size benchmarked against keras-hub)",
)
registry.register(
    "transformer-base", _BUILD, TransformerConfig(), reference=_PAPER + ", base (65M)"
)
registry.register(
    "transformer-big",
    _BUILD,
    TransformerConfig(d_model=1024, num_heads=16, intermediate_dim=4096, dropout=0.3),
    reference=_PAPER + ", big (213M)",
)
