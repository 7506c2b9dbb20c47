"""Decoding a copying model (pointer-generator, `copy=True`): its source and its steps.

A copying model takes the source twice: its ids `(B, S)` and their ids in the
extended target vocabulary, `source_extended` `(B, S)` (`zoo.text.copying`). The
decoding functions of `zoo.decode` take both as one dict,
`{"source": …, "source_extended": …}`, in place of the ids. Each step returns the
mixture's log-probabilities `log P` `(B·K, V + S)` as its "logits" (the loops take a
log-softmax or an arg-max, and `log_softmax(log P) = log P`), so a generated id may
be `V + k`, a copy of the source's k-th out-of-vocabulary token; fed back as the
next decoder input, it reads as `[UNK]` (`zoo.seq2seq.copying.fixed_vocabulary`).

The steps are the families' (`Family.step` with the extended source: the Transformer's and
RNNsearch's copying steps), or without one `zoo.decode.steps.CopyFullModelStep`, the whole
model at every step (`zoo.decode.steps.stepper` picks). This module checks and splits the
source.
"""

from zoo import moved


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


# The steps that lived here in earlier versions still import from here (`zoo.moved`).
__getattr__ = moved.names_getattr(__name__)
