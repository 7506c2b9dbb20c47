"""The Transformer's pointer-generator output (`TransformerConfig(copy=True)`; See et al. 2017).

The copy distribution is the last decoder block's cross-attention, averaged over its
heads: `a_t = (1/N) Σ_n A^n_t` `(B, T, S)`, so every head contributes and none is
set aside for copying. The switch `p_gen = σ(w_cᵀ c_t + w_sᵀ s_t + w_xᵀ x_t + b)` sees
the context under that distribution, `c_t = Σ_i a_{t,i} h_i` over the encoder outputs
`h`, the decoder's output `s_t` (after its final norm, where there is one) and the
decoder input's embedding `x_t` (token and position). Used by `zoo.transformer.model.build`
and by the cached decoding step (`zoo.transformer.decoding.CopyTransformerStep`), so both
compute the same distribution.
"""

from keras import ops

from keras_attention.layers.pointer_generator import fixed_vocabulary_ids
from zoo.text.special import UNK_ID


def copy_output(pointer_generator, logits, cross_weights, encoder_output, source_extended,
                decoder_output, embedded):
    """`log P` over the extended vocabulary.

    Args:
        pointer_generator: the model's `ka.PointerGenerator`.
        logits: `(B, T, V)`.
        cross_weights: the last decoder block's cross-attention, `(B, N, T, S)`.
        encoder_output: `h`, `(B, S, D)`.
        source_extended: int32 `(B, S)`.
        decoder_output: `s_t`, `(B, T, D)`.
        embedded: `x_t`, `(B, T, D)`.

    Returns:
        `(B, T, V + S)`.
    """
    attention = ops.mean(ops.cast(cross_weights, "float32"), axis=1)  # (B, T, S)
    context = ops.matmul(ops.cast(attention, encoder_output.dtype), encoder_output)
    features = ops.concatenate(
        [ops.cast(x, "float32") for x in (context, decoder_output, embedded)], axis=-1)
    return pointer_generator(logits, attention, source_extended, features)


def decoder_input(target, vocabulary_size):
    """The decoder's input ids: copies (`>= V`) read as `[UNK]`."""
    return fixed_vocabulary_ids(target, vocabulary_size, UNK_ID)
