"""The Transformer of "Attention Is All You Need" (Vaswani et al., 2017) in its paper sizes.

Inputs `{"source": int32 (B, S), "target": int32 (B, T)}` (teacher forcing: the
target is the decoder input, `[START] y_1 … y_n`; id 0 is padding), output
logits `(B, T, V)`. With `copy=True` (a pointer-generator, `zoo.transformer.copying`)
also `"source_extended"` int32 `(B, S)`, and the output is `log P` over the extended
vocabulary, `(B, T, V + S)`.

The config also expresses imported Marian (OPUS-MT) models (`zoo.transformer.marian`):
swish or GELU feed-forward activations, sinusoidal positions in [sin | cos]
halves, unscaled embeddings, a `final_logits_bias`, and special ids other
than the zoo's (`pad_id`, `start_id`, `end_id`; Marian starts decoding from
its padding id, and its `</s>` is id 0).
"""

import dataclasses

import keras

import keras_attention as ka
from keras_attention import checks
from keras_attention.layers.positional import LAYOUTS
from zoo import registry
from zoo.errors import ZooError
from zoo.families import numbered_layers
from zoo.transformer import copying
from zoo.transformer.layers import FinalLogitsBias, PaddingMask

ACTIVATIONS = ("relu", "gelu", "swish")


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
    return keras.Model(inputs, logits, name="transformer")


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


def compile_model(model, config):
    """The paper's recipe: Adam(0.9, 0.98, 1e-9), warm-up schedule, label smoothing 0.1
    (with `copy`, on the mixture's negative log-likelihood)."""
    schedule = ka.TransformerSchedule(
        config.d_model, warmup_steps=config.warmup_steps, scale=config.learning_rate_scale
    )
    if config.copy:
        loss = ka.PointerGeneratorCrossentropy(config.target_vocab, pad_id=config.pad_id,
                                               label_smoothing=config.label_smoothing)
    else:
        loss = ka.MaskedSparseCategoricalCrossentropy(
            label_smoothing=config.label_smoothing, pad_id=config.pad_id
        )
    model.compile(
        optimizer=keras.optimizers.Adam(schedule, beta_1=0.9, beta_2=0.98, epsilon=1e-9),
        loss=loss,
        metrics=[ka.MaskedAccuracy(pad_id=config.pad_id)],
        jit_compile=ka.backends.jit_compile(config.jit_compile),
    )


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


# `zoo.get(name, weights=folder)` (a Marian / OPUS-MT folder) is registered by `zoo.transformer.marian`.
registry.register_family(TransformerConfig, "transformer", compile_fn=compile_model)

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
    "transformer-tiny", build, TransformerConfig(**_TINY),
    reference="CPU-sized: 2+2 layers, d_model 128, 4 heads, d_ff 512",
)
registry.register(
    "transformer-small", build, TransformerConfig(**_SMALL),
    reference="3+3 layers, d_model 256, 4 heads, d_ff 1024 (the size benchmarked against keras-hub)",
)
registry.register(
    "transformer-base", build, TransformerConfig(), reference=_PAPER + ", base (65M)"
)
registry.register(
    "transformer-big",
    build,
    TransformerConfig(d_model=1024, num_heads=16, intermediate_dim=4096, dropout=0.3),
    reference=_PAPER + ", big (213M)",
)
