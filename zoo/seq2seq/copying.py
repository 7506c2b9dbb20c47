"""RNNsearch's pointer-generator output (`Seq2SeqConfig(copy=True)`; See et al. 2017).

The copy distribution is the step's alignment `α_t` `(B, T, S)`; the switch
`p_gen = σ(w_cᵀ c_t + w_sᵀ s_{t-1} + w_xᵀ E y_{t-1} + b)` sees the context, the previous
decoder state and the decoder input's embedding. A copied token's id `>= V` is fed back as
`[UNK]` (`fixed_vocabulary`). Used by `zoo.seq2seq.model.build` and by the cached decoding
step (`zoo.seq2seq.decoding.CopyRNNSearchStep`), so both compute the same distribution.
"""

from keras import ops

from keras_attention.layers.pointer_generator import fixed_vocabulary_ids
from zoo.text.special import UNK_ID


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
