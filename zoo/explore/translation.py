"""A translation and its attention maps for `zoo explore`, computed without Gradio.

The sentence is decoded by `zoo.runs.inference.decode_batch`, the code `zoo predict` runs
(a batch of one), so the page shows the translation `zoo predict` gives for the same
settings. The maps are `zoo.attention_weights` of the model fed its own output: the
decoder input `[START] + y[:-1]`, so that row t is the step that wrote target token t.
"""

import dataclasses

import keras
import numpy as np
import tensorflow as tf

import zoo
from zoo.decode.sampling import Sampling
from zoo.errors import ZooError
from zoo.runs import inference, prediction

MAX_CHARACTERS = 1000  # longer input is refused on the page (the model's max_length cuts it anyway)
DECODINGS = ("greedy", "beam", "sampling")


@dataclasses.dataclass
class Translation:
    """What the page shows for a sentence.

    Attributes:
        text: the translation.
        source_tokens: the S source pieces the model read (`[END]` included).
        target_tokens: the T target pieces it wrote (`[END]` included).
        maps: attention map name (`zoo.attention_weights`' keys) -> one example's weights,
            `(N, rows, columns)` per head or `(rows, columns)`; empty for an export.
        seed: the sampling seed, or None.
        copy: a copying model's `1 − p_gen` per target token (the probability that it was
            copied from the source, See et al. 2017); None for other models.
    """

    text: str
    source_tokens: list = dataclasses.field(default_factory=list)
    target_tokens: list = dataclasses.field(default_factory=list)
    maps: dict = dataclasses.field(default_factory=dict)
    seed: int = None
    copy: list = None

    def axes(self, name):
        """`(row tokens, column tokens)` of map `name`: encoder self-attention source × source,
        decoder self-attention target × target, cross-attention target × source."""
        if name.startswith("encoder"):
            return self.source_tokens, self.source_tokens
        if name.endswith("self_attention"):
            return self.target_tokens, self.target_tokens
        return self.target_tokens, self.source_tokens


def check_sentence(sentence):
    """The sentence stripped; ZooError (shown on the page) if empty or too long."""
    sentence = (sentence or "").strip()
    if not sentence:
        raise ZooError("type a sentence to translate")
    if len(sentence) > MAX_CHARACTERS:
        raise ZooError(f"the sentence has {len(sentence):,} characters; at most "
                       f"{MAX_CHARACTERS:,} are taken here")
    return sentence


def sampling_of(decoding, temperature=1.0, top_k=0, top_p=1.0, seed=0):
    """The `Sampling` of `zoo predict --sample --temperature T [--top-k K] [--top-p P] --seed S`
    (top-k 0 and top-p 1 are the flags left out); None for greedy and beam search."""
    if decoding not in DECODINGS:
        raise ZooError(f"decoding must be one of {DECODINGS}; received {decoding!r}")
    if decoding != "sampling":
        return None
    try:
        return Sampling(temperature=float(temperature), top_k=int(top_k) or None,
                        top_p=None if float(top_p) >= 1 else float(top_p), seed=int(seed))
    except (TypeError, ValueError) as error:
        raise ZooError(" ".join(str(error).split())) from None


def translate(target, sentence, decoding="greedy", beam_size=4, **sampling):
    """A `Translation` of `sentence` by the run or export of `target` (`zoo.explore.targets`).

    `decoding`: `"greedy"` (`zoo predict --beam-size 1`), `"beam"` (`--beam-size
    beam_size`) or `"sampling"` (`--sample`, with `temperature`, `top_k`, `top_p`, `seed`).
    """
    sentence = check_sentence(sentence)
    chosen = sampling_of(decoding, **sampling)
    width = 1 if decoding == "greedy" else int(beam_size)
    if width < 1:
        raise ZooError(f"the beam width must be at least 1; received {width}")
    if target.run is None:  # an export: zoo predict's SavedModel path, no attention
        (result,) = prediction.predict(target.path, [sentence], beam_size=width, sampling=chosen)
        return Translation(result["translation"], seed=result.get("seed"))
    run = target.run
    max_length, options, table = target.setup
    texts, source, generated = inference.decode_batch(run, table, [sentence], width, max_length,
                                                      options, chosen)
    ids = _until_end(np.asarray(generated)[0], options["end_id"], options["pad_id"])
    source_ids = np.asarray(source["source"] if isinstance(source, dict) else source)  # (1, S)
    decoder_input = np.asarray([[options["start_id"], *ids[:-1]]], "int32")  # (1, T)
    maps = zoo.attention_weights(run.model, {"source": source_ids, "target": decoder_input})
    copy = None
    if isinstance(source, dict):
        copy = copy_probabilities(run.model, {**source, "target": decoder_input})[0].tolist()
    return Translation(
        texts.numpy()[0].decode("utf-8"),
        _pieces(run.source_tokenizer, source_ids[0]),
        _pieces(run.target_tokenizer, ids, run.target_tokenizer.vocab_size),
        {name: weights[0] for name, weights in maps.items()},
        None if chosen is None else chosen.seed,
        copy,
    )


def copy_probabilities(model, inputs):
    """`1 − p_gen` `(B, T)` of a copying model for `{"source", "source_extended", "target"}`.

    Read from the model's own `pointer_generator` layer (`ka.PointerGenerator`): its inputs
    as the model computes them (the functional model up to that layer), then the layer with
    `return_switch=True`, so nothing of a family's insides is repeated here.
    """
    layer = model.get_layer("pointer_generator")
    inputs = {name: keras.ops.convert_to_tensor(value) for name, value in inputs.items()}
    features = keras.Model(model.inputs, list(layer.input))(inputs)
    _, switch = layer(*features, return_switch=True)
    return 1.0 - keras.ops.convert_to_numpy(switch)


def _until_end(ids, end_id, pad_id):
    """The generated ids up to and including `[END]` (all of them when the length ran out)."""
    ends = np.flatnonzero(ids == end_id)
    if len(ends):
        return ids[: ends[0] + 1].tolist()
    kept = ids.tolist()
    while len(kept) > 1 and kept[-1] == pad_id:
        kept.pop()
    return kept


def _pieces(tokenizer, ids, vocab_size=None):
    """The tokenizer's pieces of `ids`; an id past the vocabulary (a copying model's copy of
    a source word) reads `[copy]`."""
    pieces = tokenizer.lookup(tf.constant([ids], tf.int32)).numpy()[0]
    labels = [piece.decode("utf-8") for piece in pieces]
    if vocab_size is not None:
        labels = ["[copy]" if i >= vocab_size else label for i, label in zip(ids, labels)]
    return labels
