"""One decoding step per model family, for `zoo.decode`'s loops.

A stepper has `prepare(source, copies, width)`, which encodes the source once
and returns the initial decoding state for `B·copies` rows (beam k of row b is
row `b·K + k`), and `step(tokens, t, state)`, which takes the tokens `(B·K,)`
at position t and returns the logits `(B·K, V)` for position t and the next
state. The loops reorder every tensor of the state by parent beam, so a state
is any nest of tensors with `B·K` rows. A stepper whose state has `width`
positions may have `grow(state, width)`, the state padded to a wider buffer: the
loops then start with 16 positions and double them as they go
(`zoo.decode.segments`). A stepper's `CONTEXT` names the attributes that `prepare` sets to
per-row tensors the steps read (`B·copies` rows: the encoder's outputs, the source mask):
the loops drop finished sentences from the batch by gathering them (`with_context`).

- `TransformerStep`: self-attention key/value caches of `width` positions (`grow`).
- `RNNSearchStep`: the decoder's recurrent state (with location-aware
  attention, also the previous alignment `α_{t-1}`).
- `IncrementalDecoder`: ConvS2S, each decoder layer's last k-1 inputs.
- `FullModelStep`: no cache; the whole model on a fixed-size target buffer.
"""

import copy

import tensorflow as tf
from keras import ops

from keras_attention.xla import in_xla_context
from zoo import convs2s, families, seq2seq
from zoo.families import numbered_layers
from zoo.text.special import PAD_ID


def stepper(model, use_cache, pad_id=PAD_ID):
    layers = {layer.name: layer for layer in model.layers}
    family = families.model_family(model) if use_cache else None
    if family == "transformer" and ("shared_embedding" in layers or "target_embedding" in layers):
        return TransformerStep(layers, pad_id)
    if family == "seq2seq" and isinstance(layers.get("decoder"), seq2seq.BahdanauDecoder):
        return RNNSearchStep(layers)
    if family == "convs2s":  # each decoder layer's last k-1 inputs
        return IncrementalDecoder(layers)
    try:
        input_names = {tensor.name for tensor in model.inputs or []}
    except AttributeError:  # a subclassed model: try it
        input_names = set()
    if input_names and not {"source", "target"} <= input_names:
        raise ValueError(
            f"Decoding needs a seq2seq model with inputs 'source' and 'target'; "
            f"{model.name!r} has inputs {sorted(input_names)}."
        )
    return FullModelStep(model)


def learned_positions(model):
    """The number of target positions a model has learned (its target embedding's
    `positional="learned"` table: a Transformer's or ConvS2S's), or None: no limit."""
    for layer in model.layers:
        if layer.name in ("target_embedding", "shared_embedding") and \
                getattr(layer, "positional", None) == "learned":
            return layer.sequence_length
    return None


def check_width(model, width, source):
    """`source`, once decoding `width` positions (an int, or a scalar int tensor) is known
    to stay within the model's learned target positions.

    A Python int is checked now (`ValueError`). A tensor is checked when the graph runs,
    by an assert (`InvalidArgumentError` naming the limit); XLA drops asserts, so the
    graph also holds a zero-size tensor whose size is the excess, which XLA evaluates
    when it compiles (its `InvalidArgumentError` names
    `width_exceeds_learned_positions/excess_positions` and the excess).
    Without the check, the embedding of a position past the table reads out of range:
    an error on CPU, zeros on GPU, a clamped (wrong) row under XLA.
    """
    positions = learned_positions(model)
    if positions is None:
        return source
    limit = f"The model has {positions} learned target positions"
    if isinstance(width, int):
        if width > positions:
            raise ValueError(
                f"{limit}; cannot generate {width} tokens. Pass a smaller `max_length` "
                "(the default is the source length + 50)."
            )
        return source
    with tf.name_scope("width_exceeds_learned_positions"):
        excess = tf.maximum(width - positions, 0)
        checks = [
            tf.debugging.assert_less_equal(width, positions, message=(
                f"{limit}; cannot generate as many tokens as max_length (default: the "
                "source length + 50) asks for"
            )),
            tf.ensure_shape(
                tf.zeros(tf.reshape(excess, [1]), tf.bool, name="excess_positions"), [0]
            ),
        ]
    with tf.control_dependencies(checks):
        return tf.identity(source)


def has_context(stepper):
    """Whether the loops can gather `stepper`'s per-row tensors (its `CONTEXT`)."""
    return getattr(stepper, "CONTEXT", None) is not None


def context(stepper):
    """The per-row tensors of a prepared `stepper`, a tuple in `CONTEXT`'s order."""
    return tuple(getattr(stepper, name) for name in stepper.CONTEXT)


def with_context(stepper, values):
    """A copy of `stepper` whose `CONTEXT` attributes are `values` (`context`'s layout)."""
    chosen = copy.copy(stepper)
    for name, value in zip(stepper.CONTEXT, values):
        setattr(chosen, name, value)
    return chosen


def _repeat(tensor, copies):
    return tensor if copies == 1 else tf.repeat(tensor, copies, axis=0)


class TransformerStep:
    """Encoder once, then one token at a time through the cached decoder blocks."""

    CONTEXT = ("source_mask", "cross_caches")

    def __init__(self, layers, pad_id=PAD_ID):
        self.pad_id = pad_id
        self.final_logits_bias = layers.get("final_logits_bias")
        shared = "shared_embedding" in layers
        self.source_embedding = layers["shared_embedding" if shared else "source_embedding"]
        self.target_embedding = layers["shared_embedding" if shared else "target_embedding"]
        self.encoder_blocks = families.numbered_layers(layers, "encoder_block_")
        self.decoder_blocks = families.numbered_layers(layers, "decoder_block_")
        self.encoder_norm = layers.get("encoder_norm")
        self.decoder_norm = layers.get("decoder_norm")
        self.output_projection = layers.get("output_projection")

    def prepare(self, source, copies, width):
        """Encode `(B, S)`; keep per-beam copies of the cross-attention keys/values;
        return empty self-attention caches of `width` positions for B·copies rows."""
        source_mask = tf.not_equal(source, self.pad_id)  # (B, S)
        x = self.source_embedding(source, training=False)  # (B, S, D)
        for block in self.encoder_blocks:
            x = block(x, padding_mask=source_mask, training=False)
        if self.encoder_norm is not None:
            x = self.encoder_norm(x)
        self.encoder_output = x  # (B, S, D), for a copying model's context
        self.source_mask = _repeat(source_mask, copies)
        self.cross_caches = [
            tuple(_repeat(c, copies) for c in block.compute_cross_attention_cache(x))
            for block in self.decoder_blocks
        ]  # each (B·copies, N, H, S) and (B·copies, N, S, H)
        rows = tf.shape(source)[0] * copies
        return tuple(block.empty_self_attention_cache(rows, width) for block in self.decoder_blocks)

    def grow(self, caches, width):
        """The self-attention caches padded with zeros to `width` positions."""
        return tuple(block.grow_self_attention_cache(cache, width)
                     for block, cache in zip(self.decoder_blocks, caches))

    def step(self, tokens, t, caches):
        """tokens `(B,)` at position t -> logits `(B, V)` for position t, new caches."""
        y = self.target_embedding(tokens[:, None], start_index=t, training=False)  # (B, 1, D)
        new_caches = []
        for block, cache, cross in zip(self.decoder_blocks, caches, self.cross_caches):
            y, cache = block.call_with_cache(
                y, cache, t, cross_attention_cache=cross,
                encoder_padding_mask=self.source_mask, training=False,
            )
            new_caches.append(cache)
        if self.decoder_norm is not None:
            y = self.decoder_norm(y)
        if self.output_projection is not None:
            logits = self.output_projection(y)
        else:
            logits = tied_logits(y, self.target_embedding)  # tied: y Eᵀ
        if self.final_logits_bias is not None:
            logits = self.final_logits_bias(logits)
        return tf.cast(logits[:, 0, :], tf.float32), tuple(new_caches)


def tied_logits(y, embedding):
    """Decoder outputs y `(B, T, D)` -> logits `y Eᵀ` `(B, T, V)`, E the `(V, D)` token table
    of `embedding` (a `TokenAndPositionEmbedding`; what `embedding(y, reverse=True)` computes).

    Under XLA as `(E yᵀ)ᵀ`: XLA:CPU lays the right operand of a dot out with the contracting
    dimension major, so `y Eᵀ` copies the whole transposed table at every decoding step
    (119 MB for OPUS-MT's 58,101 × 512, more than the step's weights); `E yᵀ` reads E's
    rows where they are and transposes only the `(V, B·T)` result (a free reshape at B·T = 1).
    Elsewhere TensorFlow's MatMul takes `Eᵀ` as is (`transpose_b`), so the plain product stays.
    """
    if not in_xla_context():
        return embedding(y, reverse=True)
    if embedding.token_embedding.quantization_mode == "int8":
        return embedding.int8_logits(y, table_major=True)
    table = ops.cast(embedding.embeddings, embedding.compute_dtype)  # (V, D)
    rows = tf.reshape(y, [-1, tf.shape(y)[-1]])  # (B·T, D)
    logits = tf.transpose(tf.matmul(table, rows, transpose_b=True))  # (B·T, V)
    return tf.reshape(logits, tf.concat([tf.shape(y)[:-1], tf.shape(table)[:1]], axis=0))


class RNNSearchStep:
    """Encoder once, then `BahdanauDecoder.step`: the state is the recurrent state."""

    CONTEXT = ("annotations", "source_mask", "projected_key")

    def __init__(self, layers):
        self.layers = layers
        self.decoder = layers["decoder"]

    def prepare(self, source, copies, width):
        annotations, states, source_mask = seq2seq.encode(self.layers, source, training=False)
        self.annotations = _repeat(annotations, copies)  # (B·copies, S, A)
        self.source_mask = _repeat(source_mask, copies)
        self.projected_key = self.decoder.attention.project_key(self.annotations)  # U_a h
        states = [_repeat(s, copies) for s in states]
        # Location-aware attention: the state also carries α_{t-1} (B·copies, S).
        return tuple(self.decoder.get_initial_state(states, self.annotations, self.source_mask))

    def step(self, tokens, t, states):
        embedded = self.layers["target_embedding"](tokens)  # E y_{t-1} (B, E)
        new_states, previous, context, _ = self.decoder.step(
            embedded, list(states), self.annotations, self.projected_key, self.source_mask,
            training=False,
        )
        logits = seq2seq.output_logits(
            self.layers, previous[:, None], embedded[:, None], context[:, None], training=False
        )  # (B, 1, V)
        return tf.cast(logits[:, 0, :], tf.float32), tuple(new_states)


class FullModelStep:
    """No cache: the whole model on a fixed-size target buffer at every step."""

    CONTEXT = ("source",)

    def __init__(self, model):
        self.model = model

    def prepare(self, source, copies, width):
        self.source = _repeat(source, copies)
        self.width = width
        return (tf.zeros([tf.shape(self.source)[0], width], tf.int32),)

    def step(self, tokens, t, state):
        (buffer,) = state  # decoder inputs [START] y_0 … y_{t-1}, then zeros
        buffer += tokens[:, None] * tf.one_hot(t, self.width, dtype=tf.int32)[None, :]
        logits = self.model({"source": self.source, "target": buffer}, training=False)
        return tf.cast(logits[:, t, :], tf.float32), (buffer,)


class IncrementalDecoder:
    """`zoo.decode`'s cached step for ConvS2S: the encoder once, then one token at a time.

    The cache of each decoder layer is its last k-1 inputs `(B, k-1, D)` (zeros
    at the start, the causal convolution's left padding), so a step costs O(k)
    convolution positions and one attention row, instead of the whole prefix.
    `zoo.decode` keeps the decoding within the learned target positions
    (`zoo.decode.steps.check_width`).

    Args:
        layers: the model's layers by name (models from `build` or `.keras` files).
    """

    CONTEXT = ("keys", "values", "mask")

    def __init__(self, layers):
        self.layers = layers
        self.blocks = numbered_layers(layers, "convolutional_decoder_block_")

    def prepare(self, source, copies, width):
        """Encode `(B, S)`, repeat per beam; return the empty windows for B·copies rows."""
        keys, values, mask = convs2s.encode(self.layers, source, training=False)
        self.keys, self.values, self.mask = (
            ops.repeat(tensor, copies, axis=0) for tensor in (keys, values, mask)
        )
        rows = ops.shape(self.keys)[0]
        return tuple(
            ops.zeros((rows, block.kernel_size - 1, block.hidden_dim), self.keys.dtype)
            for block in self.blocks
        )

    def step(self, tokens, t, windows):
        """tokens `(B,)` at position t -> logits `(B, V)` for position t, new windows."""
        embedded = self.layers["target_embedding"](tokens[:, None], start_index=t, training=False)
        y = self.layers["decoder_input_projection"](embedded)  # (B, 1, D)
        new_windows = []
        for block, window in zip(self.blocks, windows):
            y, window = block.call_with_cache(
                y, window, embedded, self.keys, self.values, encoder_padding_mask=self.mask
            )
            new_windows.append(window)
        logits = self.layers["output_projection"](self.layers["decoder_output_projection"](y))
        return ops.cast(logits[:, 0, :], "float32"), tuple(new_windows)
