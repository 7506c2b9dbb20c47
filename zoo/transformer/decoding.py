"""The Transformer's cached step for `zoo.decode`'s searches (the step protocol of
`zoo.decode.steps`): the encoder once, then one token at a time through the decoder blocks.

- `TransformerStep`: self-attention key/value caches of `width` positions (`grow`), the
  cross-attention keys and values projected once per source.
- `CopyTransformerStep`: the same step with the pointer-generator (`copy=True`), the last
  decoder block's cross-attention (mean over heads) as the copy distribution.

`stepper` is what the family object gives the searches (`zoo.transformer.FAMILY.step`).
Shapes: B rows (sentences × beams), S source length, D model size, N heads, H head size,
V target vocabulary.
"""

import copy

import tensorflow as tf
from keras import ops

from keras_attention.ops import repeat_rows
from keras_attention.xla import in_xla_context
from zoo.families import numbered_layers
from zoo.transformer import copying

FEW_ROWS = 4  # the rows up to which tied logits read Eᵀ (`TransformerStep.with_transposed_table`)


def stepper(model, layers, pad_id, source_extended=None):
    """The cached step of a Transformer (`layers`: its layers by name), with the
    pointer-generator where `source_extended` `(B, S)` is given; None where the layers do
    not fit (no target embedding)."""
    if source_extended is not None:
        return CopyTransformerStep(layers, source_extended, pad_id)
    if "shared_embedding" in layers or "target_embedding" in layers:
        return TransformerStep(layers, pad_id)
    return None


class TransformerStep:
    """Encoder once, then one token at a time through the cached decoder blocks.

    Args:
        layers: the model's layers by name (a model from `zoo.transformer.model.build`, or
            loaded from a `.keras` file).
        pad_id: the source's padding id, masked in the cross-attention.
    """

    CONTEXT = ("source_mask", "cross_caches")

    def __init__(self, layers, pad_id):
        self.pad_id = pad_id
        self.final_logits_bias = layers.get("final_logits_bias")
        shared = "shared_embedding" in layers
        self.source_embedding = layers["shared_embedding" if shared else "source_embedding"]
        self.target_embedding = layers["shared_embedding" if shared else "target_embedding"]
        self.encoder_blocks = numbered_layers(layers, "encoder_block_")
        self.decoder_blocks = numbered_layers(layers, "decoder_block_")
        self.encoder_norm = layers.get("encoder_norm")
        self.decoder_norm = layers.get("decoder_norm")
        self.output_projection = layers.get("output_projection")
        self.output_table = None  # Eᵀ (D, V), set by `with_transposed_table`

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
        self.source_mask = repeat_rows(source_mask, copies)
        self.cross_caches = [
            tuple(repeat_rows(c, copies) for c in block.compute_cross_attention_cache(x))
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
        y, new_caches, _, _ = self.decode_token(tokens, t, caches)
        return tf.cast(self.logits(y)[:, 0, :], tf.float32), new_caches

    def decode_token(self, tokens, t, caches, scores=False):
        """tokens `(B,)` at position t through the decoder blocks: `(y (B, 1, D) after the
        final norm, new caches, the embedded tokens (B, 1, D), and with `scores` the last
        block's cross-attention weights (else None))`."""
        embedded = self.target_embedding(tokens[:, None], start_index=t, training=False)
        y, new_caches, weights, last = embedded, [], [None], len(self.decoder_blocks) - 1
        for i, (block, cache, cross) in enumerate(
                zip(self.decoder_blocks, caches, self.cross_caches)):
            y, cache, *found = block.call_with_cache(
                y, cache, t, cross_attention_cache=cross, encoder_padding_mask=self.source_mask,
                training=False, return_attention_scores=scores and i == last,
            )
            weights = found or weights
            new_caches.append(cache)
        if self.decoder_norm is not None:
            y = self.decoder_norm(y)
        return y, tuple(new_caches), embedded, weights[0]

    def with_transposed_table(self):
        """A copy of this step whose tied logits at a few rows (`FEW_ROWS`) read `Eᵀ` `(D, V)`
        under XLA: the token table transposed once, here, for the steps of a whole search.

        XLA:CPU's product of 2 to 4 rows with E `(V, D)` packs the whole table at every
        step; with `Eᵀ` laid out as the product reads it, a 4-row step of
        `transformer-small` (8,000 × 256 table) took 0.93-1.30 ms against 1.13-1.57 over
        five runs. From 8 rows up the same product from `Eᵀ` was slower (at 128 rows
        9.6-11.2 ms against 7.9-9.0), so there the step keeps E (`benchmarks/README.md`).
        The transpose costs about one such step, so the beam search takes it after its
        first step; greedy search does not. The same step where the logits are not the
        tied table's (an output projection, an int8 table)."""
        if self.output_projection is not None or \
                self.target_embedding.token_embedding.quantization_mode == "int8":
            return self
        chosen = copy.copy(self)
        table = self.target_embedding.embeddings
        chosen.output_table = tf.transpose(ops.cast(table, self.target_embedding.compute_dtype))
        return chosen

    def logits(self, y, tied=None):
        """Decoder outputs `(B, 1, D)` -> logits `(B, 1, V)`: the output projection, or
        `tied(y, embedding)` (default `tied_logits`) with the embedding tied, or under XLA
        `y Eᵀ` where `with_transposed_table` made `Eᵀ`."""
        if self.output_projection is not None:
            logits = self.output_projection(y)
        elif tied is None and self.output_table is not None and in_xla_context():
            logits = _tied_logits_of_few_rows(y, self.output_table, self.target_embedding)
        else:
            logits = (tied or tied_logits)(y, self.target_embedding)  # tied: y Eᵀ
        if self.final_logits_bias is not None:
            logits = self.final_logits_bias(logits)
        return logits


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


def _tied_logits_of_few_rows(y, table_t, embedding):
    """`y Eᵀ` from `Eᵀ` `(D, V)` where y `(B, T, D)` has at most `FEW_ROWS` rows (B·T), else
    `tied_logits`. Under XLA the row count is known when the program is compiled, and the
    condition on it is folded away."""
    rows = tf.reshape(y, [-1, tf.shape(y)[-1]])  # (B·T, D)
    shape = tf.concat([tf.shape(y)[:-1], tf.shape(table_t)[1:]], axis=0)
    return tf.cond(tf.shape(rows)[0] <= FEW_ROWS,
                   lambda: tf.reshape(tf.matmul(rows, table_t), shape),
                   lambda: tied_logits(y, embedding))


def _reversed_embedding(y, embedding):
    return embedding(y, reverse=True)


class CopyTransformerStep(TransformerStep):
    """The cached Transformer step with the pointer-generator: `step` returns the mixture's
    `log P` `(B, V + S)` as its logits.

    Args:
        layers, pad_id: as `TransformerStep`'s.
        source_extended: int32 `(B, S)`, the source's ids in the extended target vocabulary.
    """

    CONTEXT = (*TransformerStep.CONTEXT, "source_extended", "encoder_output")

    def __init__(self, layers, source_extended, pad_id):
        super().__init__(layers, pad_id)
        self.pointer_generator = layers["pointer_generator"]
        self.extended = source_extended

    def prepare(self, source, copies, width):
        caches = super().prepare(source, copies, width)
        self.source_extended = repeat_rows(self.extended, copies)
        self.encoder_output = repeat_rows(self.encoder_output, copies)  # h (B·copies, S, D)
        return caches

    def with_transposed_table(self):
        """This step: its logits are the embedding's reverse (`_reversed_embedding`)."""
        return self

    def step(self, tokens, t, caches):
        """tokens `(B,)` at position t -> `log P` `(B, V + S)` for position t, new caches."""
        tokens = copying.decoder_input(tokens, self.target_embedding.vocabulary_size)
        y, new_caches, embedded, weights = self.decode_token(tokens, t, caches, scores=True)
        logits = self.logits(y, tied=_reversed_embedding)
        log_probs = copying.copy_output(
            self.pointer_generator, logits, weights, self.encoder_output,
            self.source_extended, y, embedded,
        )  # (B, 1, V + S)
        return tf.cast(log_probs[:, 0, :], tf.float32), new_caches
