"""The step protocol of `zoo.decode`'s searches, and the steps that need no family.

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
the loops drop finished sentences from the batch by gathering them (`with_context`). A
stepper may have `with_transposed_table()`, a copy of it whose steps under XLA read a table
made once for the search (the beam search takes it after its first step:
`TransformerStep.with_transposed_table`).

The cached steps are the families': `stepper` asks the registry for the model's family
(`zoo.registry.family_of_model`) and the family object for its step (`Family.step`:
`zoo.transformer.decoding`, `zoo.seq2seq.decoding`, `zoo.convs2s.decoding`). Without one
(`use_cache=False`, or a model of no family that decodes):

- `FullModelStep`: no cache; the whole model on a fixed-size target buffer.
- `CopyFullModelStep`: the same for a copying model (`zoo.decode.copy_steps`).
"""

import copy

import tensorflow as tf

from keras_attention.ops import repeat_rows
from zoo import moved, registry
from zoo.decode import copy_steps
from zoo.decode.arguments import output_size
from zoo.text.special import PAD_ID


def stepper(model, use_cache, pad_id=PAD_ID, source_extended=None):
    """The stepper that decodes `model`: its family's cached step (with `use_cache`), else
    the whole model at every step; with `source_extended` `(B, S)`, a copying model's."""
    family = registry.family_of_model(model) if use_cache else None
    if family is not None and family.step is not None:
        layers = {layer.name: layer for layer in model.layers}
        found = family.step(model, layers, pad_id, source_extended)
        if found is not None:
            return found
    if source_extended is not None:
        return CopyFullModelStep(model, source_extended)
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


def start(model, source, max_length, use_cache, pad_id):
    """What every search starts from: `(stepper, source ids (B, S), width, limit)`, the
    source (`zoo.decode.copy_steps.split_source`) split, the output's size
    (`zoo.decode.arguments.output_size`) checked against the learned positions."""
    source, extended = copy_steps.split_source(source)
    chosen = stepper(model, use_cache, pad_id, extended)
    width, limit = output_size(source, max_length, pad_id)
    return chosen, check_width(model, width, source), width, limit


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


class FullModelStep:
    """No cache: the whole model on a fixed-size target buffer at every step."""

    CONTEXT = ("source",)

    def __init__(self, model):
        self.model = model

    def prepare(self, source, copies, width):
        self.source = repeat_rows(source, copies)
        self.width = width
        return (tf.zeros([tf.shape(self.source)[0], width], tf.int32),)

    def step(self, tokens, t, state):
        (buffer,) = state  # decoder inputs [START] y_0 … y_{t-1}, then zeros
        buffer += tokens[:, None] * tf.one_hot(t, self.width, dtype=tf.int32)[None, :]
        logits = self.model(self.inputs(buffer), training=False)
        return tf.cast(logits[:, t, :], tf.float32), (buffer,)

    def inputs(self, buffer):
        """The model's inputs at a step: the source `(B, S)`, the target buffer `(B, width)`."""
        return {"source": self.source, "target": buffer}


class CopyFullModelStep(FullModelStep):
    """No cache: the whole copying model on a fixed-size target buffer at every step.

    Args:
        model: a copying model (`{"source", "target", "source_extended"}` -> `log P`
            `(B, T, V + S)`).
        source_extended: int32 `(B, S)`, the source's ids in the extended target vocabulary.
    """

    CONTEXT = (*FullModelStep.CONTEXT, "source_extended")

    def __init__(self, model, source_extended):
        super().__init__(model)
        self.extended = source_extended

    def prepare(self, source, copies, width):
        self.source_extended = repeat_rows(self.extended, copies)
        return super().prepare(source, copies, width)

    def inputs(self, buffer):
        return {**super().inputs(buffer), "source_extended": self.source_extended}


# The families' steps, here in earlier versions, still import from here (`zoo.moved`).
__getattr__ = moved.names_getattr(__name__)
