"""Decoding a copying model (pointer-generator, `copy=True`): its source and its steps.

A copying model takes the source twice: its ids `(B, S)` and their ids in the
extended target vocabulary, `source_extended` `(B, S)` (`zoo.text.copying`). The
decoding functions of `zoo.decode` take both as one dict,
`{"source": …, "source_extended": …}`, in place of the ids. Each step returns the
mixture's log-probabilities `log P` `(B·K, V + S)` as its "logits" (the loops take a
log-softmax or an arg-max, and `log_softmax(log P) = log P`), so a generated id may
be `V + k`, a copy of the source's k-th out-of-vocabulary token; fed back as the
next decoder input, it reads as `[UNK]` (`zoo.seq2seq.fixed_vocabulary`).

- `CopyRNNSearchStep`: RNNsearch's recurrent step, then `ka.PointerGenerator` on
  the step's alignment.
- `CopyTransformerStep`: the cached Transformer step, the last decoder block's
  cross-attention (mean over heads) as the copy distribution.
- `CopyFullModelStep`: no cache; the whole model on a fixed-size target buffer.
"""

import tensorflow as tf

from zoo import families, seq2seq
from zoo.decode.steps import FullModelStep, RNNSearchStep, TransformerStep, _repeat
from zoo.text.special import PAD_ID
from zoo.transformer import copying as transformer_copying


def is_copying(model):
    """Whether `model` is a copying model (it has a `pointer_generator` layer)."""
    return any(layer.name == "pointer_generator" for layer in model.layers)


def split_source(source):
    """`source` as `zoo.decode` takes it -> `(ids (B, S), source_extended (B, S) or None)`."""
    if isinstance(source, dict):
        return source["source"], source["source_extended"]
    return source, None


def check_source(model, source):
    """Raise a `ValueError` unless a copying model gets both sources and another model the ids."""
    extended = split_source(source)[1]
    if is_copying(model) and extended is None:
        raise ValueError(
            f"{model.name!r} copies from its source (a pointer-generator): pass "
            "{'source': ids, 'source_extended': extended ids} (see "
            "zoo.text.copying.encode_copy_sources), not the ids alone."
        )
    if not is_copying(model) and extended is not None:
        raise ValueError(f"{model.name!r} does not copy: pass the source ids alone.")


def stepper(model, use_cache, source_extended, pad_id=PAD_ID):
    """The step of a copying model (as `zoo.decode.steps.stepper` for the others)."""
    layers = {layer.name: layer for layer in model.layers}
    family = families.model_family(model) if use_cache else None
    if family == "seq2seq":
        return CopyRNNSearchStep(layers, source_extended)
    if family == "transformer":
        return CopyTransformerStep(layers, source_extended, pad_id)
    return CopyFullModelStep(model, source_extended)


class CopyRNNSearchStep(RNNSearchStep):
    """RNNsearch's step with the pointer-generator: the state is the recurrent state."""

    CONTEXT = (*RNNSearchStep.CONTEXT, "source_extended")

    def __init__(self, layers, source_extended):
        super().__init__(layers)
        self.extended = source_extended
        self.vocabulary = layers["target_embedding"].input_dim

    def prepare(self, source, copies, width):
        self.source_extended = _repeat(self.extended, copies)  # (B·copies, S)
        return super().prepare(source, copies, width)

    def step(self, tokens, t, states):
        tokens = seq2seq.fixed_vocabulary(tokens, self.vocabulary)
        embedded = self.layers["target_embedding"](tokens)  # E y_{t-1} (B, E)
        new_states, previous, context, alignment = self.decoder.step(
            embedded, list(states), self.annotations, self.projected_key, self.source_mask,
            training=False,
        )
        logits = seq2seq.output_logits(
            self.layers, previous[:, None], embedded[:, None], context[:, None], training=False
        )[:, 0]  # (B, V)
        log_probs = seq2seq.copy_output(self.layers, logits, alignment, self.source_extended,
                                        previous, embedded, context)  # (B, V + S)
        return tf.cast(log_probs, tf.float32), tuple(new_states)


class CopyTransformerStep(TransformerStep):
    """The cached Transformer step with the pointer-generator."""

    CONTEXT = (*TransformerStep.CONTEXT, "source_extended", "encoder_output")

    def __init__(self, layers, source_extended, pad_id=PAD_ID):
        super().__init__(layers, pad_id)
        self.pointer_generator = layers["pointer_generator"]
        self.extended = source_extended

    def prepare(self, source, copies, width):
        caches = super().prepare(source, copies, width)
        self.source_extended = _repeat(self.extended, copies)
        self.encoder_output = _repeat(self.encoder_output, copies)  # h (B·copies, S, D)
        return caches

    def step(self, tokens, t, caches):
        """tokens `(B,)` at position t -> `log P` `(B, V + S)` for position t, new caches."""
        tokens = transformer_copying.decoder_input(tokens, self.target_embedding.vocabulary_size)
        embedded = self.target_embedding(tokens[:, None], start_index=t, training=False)
        y, new_caches, last = embedded, [], len(self.decoder_blocks) - 1
        for i, (block, cache, cross) in enumerate(
                zip(self.decoder_blocks, caches, self.cross_caches)):
            y, cache, *weights = block.call_with_cache(
                y, cache, t, cross_attention_cache=cross, encoder_padding_mask=self.source_mask,
                training=False, return_attention_scores=i == last,
            )
            new_caches.append(cache)
        if self.decoder_norm is not None:
            y = self.decoder_norm(y)
        if self.output_projection is not None:
            logits = self.output_projection(y)
        else:
            logits = self.target_embedding(y, reverse=True)  # tied: y Eᵀ
        if self.final_logits_bias is not None:
            logits = self.final_logits_bias(logits)
        log_probs = transformer_copying.copy_output(
            self.pointer_generator, logits, weights[0], self.encoder_output,
            self.source_extended, y, embedded,
        )  # (B, 1, V + S)
        return tf.cast(log_probs[:, 0, :], tf.float32), tuple(new_caches)


class CopyFullModelStep(FullModelStep):
    """No cache: the whole copying model on a fixed-size target buffer at every step."""

    CONTEXT = (*FullModelStep.CONTEXT, "source_extended")

    def __init__(self, model, source_extended):
        super().__init__(model)
        self.extended = source_extended

    def prepare(self, source, copies, width):
        self.source_extended = _repeat(self.extended, copies)
        return super().prepare(source, copies, width)

    def step(self, tokens, t, state):
        (buffer,) = state
        buffer += tokens[:, None] * tf.one_hot(t, self.width, dtype=tf.int32)[None, :]
        log_probs = self.model({"source": self.source, "target": buffer,
                                "source_extended": self.source_extended}, training=False)
        return tf.cast(log_probs[:, t, :], tf.float32), (buffer,)
