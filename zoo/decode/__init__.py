"""Auto-regressive decoding for the zoo's seq2seq models (docs/math.md#beam-search-with-the-gnmt-length-penalty).

Two searches over `p(y | x) = Π_t p(y_t | y_<t, x)`:

- `greedy_decode`: the most likely next token at every step.
- `beam_search`: the best hypothesis of a beam of `beam_size`, scored by
  `log p(y | x) / lp(y)` with the length penalty of Wu et al. (2016), eq. 14,
  the one the Transformer paper uses with α = 0.6 (see `length_penalty`).

and `sample` (`zoo.decode.sampling`): each token drawn from the model's
distribution, with a temperature, top-k and top-p, seeded statelessly.

Both decode a batch inside one `tf.function`, in segments of steps
(`zoo.decode.segments`): between two, the sentences that have finished leave the batch
and the caches grow. With `jit_compile` (a Python int `max_length`) XLA compiles each
segment, per shape, and the loop over segments runs in the graph around them. Beam
search computes its first step at one row per sentence (only beam 0 is live then) and
copies it to the K beams. Both work on models from `zoo.get` and on the same models after
`keras.saving.load_model` (layers are found by name). How one step is computed:

- Transformer (`use_cache=True`): the encoder runs once; the cross-attention
  keys and values of its output are projected once; each step embeds one token
  at position t and runs the decoder blocks on it alone, writing its
  self-attention keys and values into per-block buffers
  (`TransformerDecoderBlock.call_with_cache`). The buffers start at 16
  positions and double as the decoding goes, up to `max_length`
  (`zoo.decode.segments`), so a step costs O(t) (at most
  2t positions are attended to and, in beam search, reordered) instead of
  re-running the whole prefix, or paying for `max_length` positions at every step.
- RNNsearch (`use_cache=True`): the encoder runs once and each step is one
  `BahdanauDecoder.step`; the "cache" is the recurrent state (with
  `attention="location"` also the previous alignment `α_{t-1}`), O(S) per step.
- ConvS2S (`use_cache=True`): the encoder runs once; each decoder layer keeps its
  last k-1 inputs (`zoo.convs2s.decoding.IncrementalDecoder`), O(k + S) per step.
- `use_cache=False` (and any other `{"source", "target"}` -> logits model): the
  full model re-runs at every step on a fixed-size target buffer, reading the
  logits at position t (correct because position t only sees positions <= t).

This module holds the public API; the loops are in `zoo.decode.loops` (greedy,
GNMT beam) and `zoo.decode.hf_beam`, over one step protocol, `zoo.decode.steps` (each
family's cached step comes from its family object in the registry, `Family.step`; the
whole-model step and the check that decoding stays within a model's learned target
positions are here),
and the default search settings of runs and exports in `zoo.decode.defaults`.

Conventions: id 0 is padding and is never generated; the source may be padded
with 0 anywhere after its tokens. Models with other special ids (imported
Marian models: `</s>` = 0, padding = decoder start = V - 1) pass `pad_id`,
`start_id` and `end_id`; `force_end=True` makes the last step at the length
limit emit `end_id` (Hugging Face's `forced_eos_token_id`), and
`beam_search(length_penalty="hf")` runs Hugging Face's beam search
(`zoo.decode.hf_beam`), so that such models reproduce their upstream outputs. By default each row may generate up to its own
source length (non-padding tokens) + 50 tokens, the paper's limit, so a row
decodes the same alone as in a padded batch.

A copying model (pointer-generator, `copy=True`) takes its source as a dict
`{"source": ids, "source_extended": extended ids}` and may generate the extended
ids `V + k` (`zoo.decode.copy_steps`).
"""

import weakref

import tensorflow as tf

from keras_attention import backends, checks
from zoo import moved
from zoo.decode import copy_steps, hf_beam, sampling
from zoo.decode import loops as decode_loops
from zoo.decode import steps as decode_steps
from zoo.decode.arguments import EXTRA_LENGTH, check_jit_length, output_size  # noqa: F401 - EXTRA_LENGTH, output_size: API
from zoo.decode.arguments import check_common as _check_common
from zoo.decode.arguments import check_ids as _check_ids
from zoo.decode.defaults import GNMT
from zoo.decode.search_steps import Ids
from zoo.text.special import END_ID, PAD_ID, START_ID  # noqa: F401 - part of this module's API

LENGTH_PENALTIES = ("gnmt", "hf")

length_penalty = decode_loops.length_penalty  # part of this module's API
sample = sampling.sample  # part of this module's API

# The steppers under their earlier names here (tests reach them as `decode._stepper`, ...);
# the families' (`_TransformerStep`, `_RNNSearchStep`) through `zoo.moved`.
_stepper = decode_steps.stepper
_FullModelStep = decode_steps.FullModelStep
__getattr__ = moved.names_getattr(__name__)


# === Public API ===


def greedy_decode(
    model,
    source,
    max_length=None,
    start_id=START_ID,
    end_id=END_ID,
    use_cache=True,
    *,
    jit_compile=False,
    pad_id=PAD_ID,
    force_end=False,
    return_score=False,
):
    """Greedy decoding of a batch: the arg-max token at every step.

    Args:
        model: a zoo seq2seq model (`{"source", "target"}` -> logits `(B, T, V)`),
            built by `zoo.get` or loaded from a `.keras` file.
        source: int ids `(B, S)`, 0 = padding; numpy, a tensor, or a symbolic
            tensor of shape `(None, None)` inside another `tf.function`. For a
            copying model, `{"source": ids, "source_extended": extended ids}`.
        max_length: the most tokens to generate (an int, or a scalar int tensor).
            Defaults to each row's source length + 50; the output then has
            `S + 50` columns. A Python int is needed under XLA.
        start_id, end_id: the `[START]` and `[END]` ids.
        use_cache: Transformer: key/value cache; RNNsearch: step the recurrence.
            False re-runs the whole model at each step (same tokens, slower).
        jit_compile: compile the decoding loop with XLA (`max_length` must then be
            None or a Python int). Much faster for small batches on CPU; compiles
            again for every new source shape.
        pad_id: the padding id: masked in the source, never generated, and
            written after `[END]`.
        force_end: the step that reaches the length limit emits `end_id`.
        return_score: also return each row's `log p(tokens | source)`, added up as
            the loop decodes (no second pass over the tokens).

    Returns:
        int32 `(B, L)`: generated ids without `[START]`; the `[END]` token is kept
        and everything after it is `pad_id`. With `return_score`, `(tokens, scores)`
        with float32 `(B,)` scores: the sum of the chosen tokens' log-probabilities
        up to and including `[END]`, the score `beam_search(beam_size=1, alpha=0)`
        gives the same tokens.
    """
    copy_steps.check_source(model, source)
    source, max_length = _check_common(source, max_length, start_id, end_id, pad_id)
    return _run(
        model, source, max_length, jit_compile, int(start_id), int(end_id), bool(use_cache), 0, 0.0,
        int(pad_id), bool(force_end), "gnmt", bool(return_score),
    )


def beam_search(
    model,
    source,
    beam_size=4,
    alpha=GNMT.alpha,
    max_length=None,
    start_id=START_ID,
    end_id=END_ID,
    *,
    jit_compile=False,
    pad_id=PAD_ID,
    force_end=False,
    length_penalty="gnmt",
):
    """Beam search: the best hypothesis per row under `log p(y | x) / lp(y)`.

    The beam shrinks as hypotheses end, as in RNNsearch's own beam search
    (GroundHog / dl4mt-tutorial `gen_sample`): at each step the `beam_size - d`
    best extensions of the live hypotheses by log-probability are kept, where
    d hypotheses have ended so far; those ending in `[END]` leave the beam.
    With `beam_size=1` this is exactly greedy decoding. A hypothesis still live
    at the maximum length ends there (scored with that length). The result is
    the ended hypothesis with the best length-penalised score
    `log p(y | x) / lp(|y|)`. A row stops early when every hypothesis has ended,
    or when no live one can still beat its best ended one: log-probabilities
    only fall and lp only grows with length, so a live hypothesis with
    log-probability a can reach at most `a / lp(max_length)` (the bound of
    tensor2tensor's beam search). Early stopping never changes the result.

    The encoder runs once per row; its outputs, the source mask and the
    cross-attention keys/values are repeated per beam (rows `b·K + k`), and the
    per-hypothesis caches are reordered by parent beam at every step (caches that
    grow with the output: see the module docstring).

    Args:
        model, source, max_length, start_id, end_id, jit_compile: as in `greedy_decode`.
        beam_size: K >= 1 (4 in the paper).
        alpha: length penalty α >= 0 (0.6 in the paper); 0 ranks by log-probability.
        pad_id, force_end: as in `greedy_decode`.
        length_penalty: `"gnmt"` (above), or `"hf"`: Hugging Face's beam search
            (`zoo.decode.hf_beam`: 2K candidates a step, ended hypotheses scored
            `log p / |y| ** alpha`, its early-stopping heuristic), as
            `generate(num_beams=K, length_penalty=alpha)` runs it.

    Returns:
        `(tokens, scores)`: int32 `(B, L)` in the layout of `greedy_decode`, and
        float32 `(B,)` the score `log p(tokens | source) / lp(length)` of each row's
        best hypothesis (length including `[END]`).
    """
    checks.check_int("beam_size", beam_size, 1, numpy=True)
    checks.check_number("alpha", alpha, 0, numpy=True)
    checks.check_choice("length_penalty", length_penalty, LENGTH_PENALTIES)
    copy_steps.check_source(model, source)
    source, max_length = _check_common(source, max_length, start_id, end_id, pad_id)
    return _run(
        model, source, max_length, jit_compile, int(start_id), int(end_id), True,
        int(beam_size), float(alpha), int(pad_id), bool(force_end), length_penalty,
    )


def strip_special(ids, end_id=END_ID, pad_id=PAD_ID):
    """Cut each row of decoded ids at `end_id` and drop `pad_id`: a list of int lists.

    Pass the ids the model decoded with: the zoo's `[END]` = 3 and `[PAD]` = 0 by
    default, a tokenizer's own from `zoo.text.special.special_ids(tokenizer)`
    (imported Marian models: `</s>` = 0, padding = V - 1).
    """
    _check_ids(end_id=end_id, pad_id=pad_id)
    rows = []
    for row in tf.convert_to_tensor(ids).numpy().tolist():
        out = []
        for token in row:
            if token == end_id:
                break
            if token != pad_id:
                out.append(token)
        rows.append(out)
    return rows


# === The decoding loops ===


def _run(model, source, max_length, jit_compile, *args):
    """Run `_decode` in a `tf.function` of its own per model, or, inside a caller's
    `tf.function`, build the loop right into the caller's graph (an export signature).

    With `jit_compile`, greedy and GNMT beam search run their loop over segments in that
    graph and XLA compiles each segment (`zoo.decode.segments`: the batch sheds finished
    sentences between segments, which one XLA program cannot); Hugging Face's beam search
    runs whole inside one XLA-compiled function."""
    backends.require_tensorflow("zoo's decoding (greedy_decode, beam_search)")
    check_jit_length(max_length, jit_compile)
    segmented = bool(jit_compile) and args[7] != "hf"  # args: `_decode`'s, from start_id
    whole_xla = bool(jit_compile) and not segmented
    if tf.inside_function() and not whole_xla:
        return _decode(model, source, max_length, *args, jit=segmented)
    functions = _FUNCTIONS.setdefault(model, {})
    key = (bool(jit_compile), max_length is None, *args)
    if key not in functions:
        # One function per model and setting, so that each retraces only for new shapes.
        run = _Decoder(model, args, segmented)
        # Plain graph building (no AutoGraph): the loops are explicit tf.while_loops.
        functions[key] = (
            tf.function(run, jit_compile=True, autograph=False)
            if whole_xla
            else tf.function(run, reduce_retracing=True, autograph=False)
        )
    # An int `max_length` stays a trace-time constant (static shapes; a new trace per value).
    return functions[key](source, max_length)


_FUNCTIONS = weakref.WeakKeyDictionary()  # model -> {settings: tf.function}


class _Decoder:
    """`_decode` for one model and setting. A callable object rather than a closure:
    TensorFlow counts retracing per code object, and closures share theirs."""

    def __init__(self, model, settings, jit):
        self.model = weakref.ref(model)  # the cache must not keep the model alive
        self.settings, self.jit = settings, jit

    def __call__(self, source, max_length):
        return _decode(self.model(), source, max_length, *self.settings, jit=self.jit)


def _decode(model, source, max_length, start_id, end_id, use_cache, beam_size, alpha,
            pad_id=PAD_ID, force_end=False, penalty="gnmt", with_score=False, jit=False):
    """Greedy (`beam_size=0`) or beam search; Python arguments are trace-time constants.
    `jit`: XLA compiles each segment of greedy and GNMT beam search."""
    stepper, source, width, limit = decode_steps.start(model, source, max_length, use_cache,
                                                       pad_id)
    ids = Ids(start_id, end_id, pad_id, force_end)
    if beam_size == 0:
        return decode_loops.greedy(stepper, source, width, limit, ids, with_score, jit=jit)
    if penalty == "hf":
        return hf_beam.beam(stepper, source, width, limit, ids, beam_size, alpha)
    return decode_loops.beam(stepper, source, width, limit, ids, beam_size, alpha, jit=jit)
