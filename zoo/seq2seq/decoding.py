"""RNNsearch's cached step for `zoo.decode`'s searches (the step protocol of
`zoo.decode.steps`): the encoder once, then one `BahdanauDecoder.step` per token.

- `RNNSearchStep`: the state is the decoder's recurrent state (with location-aware
  attention, also the previous alignment `α_{t-1}`), O(S) per step.
- `CopyRNNSearchStep`: the same step with the pointer-generator (`copy=True`) on the
  step's alignment.

`stepper` is what the family object gives the searches (`zoo.seq2seq.FAMILY.step`).
Shapes: B rows (sentences × beams), S source length, A annotation size, E embedding size,
V target vocabulary.
"""

import tensorflow as tf

from keras_attention.ops import repeat_rows
from zoo.seq2seq.copying import copy_output, fixed_vocabulary
from zoo.seq2seq.decoder import BahdanauDecoder
from zoo.seq2seq.model import encode, output_logits


def stepper(model, layers, pad_id, source_extended=None):
    """The cached step of an RNNsearch (`layers`: its layers by name), with the
    pointer-generator where `source_extended` `(B, S)` is given; None where its decoder is
    not a `BahdanauDecoder`. (`pad_id`: the encoder masks id 0.)"""
    if source_extended is not None:
        return CopyRNNSearchStep(layers, source_extended)
    if isinstance(layers.get("decoder"), BahdanauDecoder):
        return RNNSearchStep(layers)
    return None


class RNNSearchStep:
    """Encoder once, then `BahdanauDecoder.step`: the state is the recurrent state.

    Args:
        layers: the model's layers by name (a model from `zoo.seq2seq.model.build`, or
            loaded from a `.keras` file).
    """

    CONTEXT = ("annotations", "source_mask", "projected_key")

    def __init__(self, layers):
        self.layers = layers
        self.decoder = layers["decoder"]

    def prepare(self, source, copies, width):
        """Encode `(B, S)`, repeat per beam; return the initial recurrent state."""
        annotations, states, source_mask = encode(self.layers, source, training=False)
        self.annotations = repeat_rows(annotations, copies)  # (B·copies, S, A)
        self.source_mask = repeat_rows(source_mask, copies)
        self.projected_key = self.decoder.attention.project_key(self.annotations)  # U_a h
        states = [repeat_rows(s, copies) for s in states]
        # Location-aware attention: the state also carries α_{t-1} (B·copies, S).
        return tuple(self.decoder.get_initial_state(states, self.annotations, self.source_mask))

    def step(self, tokens, t, states):
        """tokens `(B,)` at position t -> logits `(B, V)` for position t, the new state."""
        logits, new_states, _ = self.recur(tokens, states)
        return tf.cast(logits, tf.float32), new_states

    def recur(self, tokens, states):
        """One step of the recurrence: `(logits (B, V), new state, (s_{t-1} (B, dec),
        E y_{t-1} (B, E), c_t (B, A), α_t (B, S)))`."""
        embedded = self.layers["target_embedding"](tokens)  # E y_{t-1} (B, E)
        new_states, previous, context, alignment = self.decoder.step(
            embedded, list(states), self.annotations, self.projected_key, self.source_mask,
            training=False,
        )
        logits = output_logits(
            self.layers, previous[:, None], embedded[:, None], context[:, None], training=False
        )[:, 0]  # (B, V)
        return logits, tuple(new_states), (previous, embedded, context, alignment)


class CopyRNNSearchStep(RNNSearchStep):
    """RNNsearch's step with the pointer-generator: `step` returns the mixture's `log P`
    `(B, V + S)` as its logits.

    Args:
        layers: as `RNNSearchStep`'s.
        source_extended: int32 `(B, S)`, the source's ids in the extended target vocabulary.
    """

    CONTEXT = (*RNNSearchStep.CONTEXT, "source_extended")

    def __init__(self, layers, source_extended):
        super().__init__(layers)
        self.extended = source_extended
        self.vocabulary = layers["target_embedding"].input_dim

    def prepare(self, source, copies, width):
        self.source_extended = repeat_rows(self.extended, copies)  # (B·copies, S)
        return super().prepare(source, copies, width)

    def step(self, tokens, t, states):
        """tokens `(B,)` (extended ids read as `[UNK]`) -> `log P` `(B, V + S)`, new state."""
        tokens = fixed_vocabulary(tokens, self.vocabulary)
        logits, new_states, (previous, embedded, context, alignment) = self.recur(tokens, states)
        log_probs = copy_output(self.layers, logits, alignment, self.source_extended,
                                previous, embedded, context)  # (B, V + S)
        return tf.cast(log_probs, tf.float32), new_states
