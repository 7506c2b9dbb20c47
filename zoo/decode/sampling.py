"""Sampling for `zoo.decode`: each token drawn from the model's distribution, reshaped.

At step t the logits `z` (the padding id and, with `force_end` at the length
limit, every token but `[END]` removed first) become the distribution

    p(v) ∝ exp((z_v - max z) / T)   over the kept tokens v, 0 elsewhere,

where the kept tokens are, in this order,

- top-k (Fan, Lewis & Dauphin 2018): the k tokens of highest logit (ties: the
  lower id first);
- top-p, the nucleus (Holtzman et al. 2020): of those, the smallest set of most
  likely tokens whose mass under the temperature-scaled, top-k renormalised
  distribution reaches p: a token is kept when the mass of the tokens ranked
  before it is below p, so the most likely token is always kept.

T → 0 tends to greedy decoding (the distribution tends to the arg-max; the
logits are shifted by their maximum before scaling, so a tiny T never
overflows). Each filter is off at its default (`top_k=None`, `top_p=None`).
These are keras-hub's sampler settings (`temperature`, `TopKSampler(k)`,
`TopPSampler(p, k)`, `seed`) and Hugging Face's warpers (top-k before top-p).

The draw is the Gumbel-max trick (Gumbel 1954): `argmax_v log p(v) + g_v`
with `g_v = -log(-log u_v)` and `u_v` uniform, which picks v with probability
p(v). The uniforms come from stateless Philox bits (`tf.random.stateless_uniform`
with `alg="philox"`, seeded by `(seed, t)`), turned into floats here, because
those bits are the same with and without XLA while TensorFlow's own float
uniforms and `tf.random.stateless_categorical` differ between XLA and the
default kernels (the XLA categorical is a Gumbel-max over XLA's uniforms; the
CPU kernel inverts the CDF). So one integer seed gives the same tokens in
eager mode, in a `tf.function`, under XLA and in a SavedModel loaded in another
process, up to float differences between XLA's and the default kernels' logits
at near-ties. The noise of step t has shape `(B, V)`: a row's tokens depend on
the seed, on its position in the batch and on the batch size.

`sample` runs greedy decoding's loop (`zoo.decode.loops.greedy`) over the
families' cached steps (`zoo.decode.steps.stepper`), with the draw in place of the
arg-max, and with greedy decoding's conventions (`pad_id`,
`start_id`, `end_id`, `force_end`, `max_length`).
"""

import dataclasses
import secrets
import weakref

import numpy as np
import tensorflow as tf

from keras_attention import checks
from zoo.decode import copy_steps, loops
from zoo.decode import steps as decode_steps
from zoo.decode.arguments import check_common, check_jit_length
from zoo.decode.search_steps import Ids
from zoo.text.special import END_ID, PAD_ID, START_ID

_INT64 = (-(2**63), 2**63 - 1)
_BITS = 23  # uniform floats from the top 23 bits of a Philox word: exact in float32


@dataclasses.dataclass(frozen=True)
class Sampling:
    """How `sample` draws (Python values, checked): the settings `zoo predict --sample` passes.

    Attributes:
        temperature: T > 0; 1 samples the model's distribution.
        top_k: None (off) or k >= 1: only the k most likely tokens.
        top_p: None (off) or p in (0, 1]: only the nucleus of mass p.
        seed: None (a fresh random seed per call) or an integer (int64 range).
    """

    temperature: float = 1.0
    top_k: int = None
    top_p: float = None
    seed: int = None

    def __post_init__(self):
        checks.check_number("temperature", self.temperature, 0, open_minimum=True, numpy=True)
        checks.check_int("top_k", self.top_k, 1, allow_none=True, numpy=True)
        if self.top_p is not None:
            checks.check_number("top_p", self.top_p, 0, 1, open_minimum=True, numpy=True)
        checks.check_int("seed", self.seed, *_INT64, allow_none=True, numpy=True)


# === The filters and the draw ===


def filter_logits(logits, temperature=1.0, top_k=0, top_p=1.0):
    """The log-weights of the sampling distribution (see the module docstring).

    Args:
        logits: float `(N, V)`; `-inf` marks tokens already removed (at least one
            finite per row).
        temperature: T > 0, a float or a float scalar tensor.
        top_k: k (int or int scalar tensor); 0 keeps every token.
        top_p: p in (0, 1] (float or float scalar tensor); >= 1 keeps every token.

    Returns:
        float32 `(N, V)`: `(z - max z) / T` for the kept tokens, `-inf` for the others;
        its softmax is the distribution `sample` draws from.
    """
    logits = tf.cast(logits, tf.float32)
    # At least the smallest normal float: TensorFlow flushes denormals to 0 (0 / 0 = NaN).
    temperature = tf.maximum(tf.cast(temperature, tf.float32), np.finfo(np.float32).tiny)
    top_k, top_p = tf.cast(top_k, tf.int32), tf.cast(top_p, tf.float32)
    vocabulary = tf.shape(logits)[-1]
    scaled = (logits - tf.reduce_max(logits, axis=-1, keepdims=True)) / temperature
    order = tf.argsort(scaled, axis=-1, direction="DESCENDING", stable=True)  # (N, V) ids by rank
    ranked = tf.gather(scaled, order, batch_dims=1)
    k = tf.where(top_k > 0, tf.minimum(top_k, vocabulary), vocabulary)
    in_top_k = tf.range(vocabulary)[None, :] < k  # (1, V)
    ranked = tf.where(in_top_k, ranked, float("-inf"))
    mass_before = tf.cumsum(tf.nn.softmax(ranked, axis=-1), axis=-1, exclusive=True)
    keep = in_top_k & ((mass_before < top_p) | (top_p >= 1.0))  # (N, V) by rank
    keep = tf.gather(keep, tf.argsort(order, axis=-1, stable=True), batch_dims=1)  # by id
    return tf.where(keep, scaled, float("-inf"))


def uniform(shape, seed):
    """Floats in (0, 1), `(k + 1/2) / 2^23` for k uniform in [0, 2^23), from Philox bits
    seeded by `seed` (int64 `(2,)`): the same numbers with and without XLA."""
    bits = tf.random.stateless_uniform(shape, seed=seed, minval=None, maxval=None,
                                       dtype=tf.uint32, alg="philox")
    top = tf.bitwise.right_shift(bits, tf.constant(32 - _BITS, tf.uint32))
    return (tf.cast(top, tf.float32) + 0.5) * (2.0**-_BITS)


def draw(log_weights, seed):
    """One id per row of float `(N, V)` log-weights, with probability their softmax
    (Gumbel-max; `-inf` never drawn); `seed` int64 `(2,)`. int32 `(N,)`."""
    gumbel = -tf.math.log(-tf.math.log(uniform(tf.shape(log_weights), seed)))
    return tf.argmax(log_weights + gumbel, axis=-1, output_type=tf.int32)


def step_seed(seed, t):
    """The seed pair of step t: `(seed, t)` as int64 `(2,)` (Philox hashes the pair)."""
    return tf.stack([tf.cast(seed, tf.int64), tf.cast(t, tf.int64)])


# === The loop ===


def sample_loop(stepper, source, width, limit, ids, knobs, with_score=False):
    """Sampled tokens: int32 `(B, width)`, `ids.pad` after `[END]` (and float32 `(B,)`
    `log p(tokens | source)` under the model's own distribution with `with_score`).

    Args:
        stepper: the model's step (`zoo.decode.steps.stepper`).
        source: int32 `(B, S)`; width, limit: from `zoo.decode.arguments.output_size`.
        ids: `zoo.decode.search_steps.Ids`.
        knobs: scalar tensors `(seed int64, temperature float32, top_k int32, top_p float32)`.
    """
    seed, temperature, top_k, top_p = knobs

    def choose(masked, t):  # masked ids are NEG: weight 0 after the softmax
        filtered = filter_logits(tf.cast(masked, tf.float32), temperature, top_k, top_p)
        return draw(filtered, step_seed(seed, t))

    return loops.greedy(stepper, source, width, limit, ids, with_score, choose=choose)


# === Public API ===


def sample(
    model,
    source,
    temperature=1.0,
    top_k=None,
    top_p=None,
    seed=None,
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
    """Sample a batch of outputs, a token at a time (see the module docstring).

    Args:
        model, source, max_length, start_id, end_id, use_cache, jit_compile, pad_id,
            force_end: as in `zoo.decode.greedy_decode` (the same cached steps).
        temperature: T > 0 (default 1: the model's distribution).
        top_k: None, or k >= 1: sample among the k most likely tokens.
        top_p: None, or p in (0, 1]: sample within the nucleus of mass p.
        seed: an integer (int64 range): the same seed gives the same tokens; None
            draws a fresh seed per call.
        The four may also be scalar tensors (an export's signature inputs: top_k 0
        and top_p >= 1 are off there); tensors are not checked.
        return_score: also return each row's `log p(tokens | source)` under the
            model's own distribution (temperature 1, unfiltered), up to `[END]`.

    Returns:
        int32 `(B, L)` in `greedy_decode`'s layout; with `return_score`,
        `(tokens, scores)` with float32 `(B,)` scores.
    """
    copy_steps.check_source(model, source)
    source, max_length = check_common(source, max_length, start_id, end_id, pad_id)
    knobs = _knobs(temperature, top_k, top_p, seed)
    settings = (int(start_id), int(end_id), bool(use_cache), int(pad_id), bool(force_end),
                bool(return_score))
    check_jit_length(max_length, jit_compile)
    if tf.inside_function() and not jit_compile:
        return _sample(model, source, max_length, knobs, *settings)
    functions = _FUNCTIONS.setdefault(model, {})
    key = (bool(jit_compile), max_length is None, *settings)
    if key not in functions:
        # One function per model and setting; the knobs are inputs, so a new seed or
        # temperature does not trace again.
        run = _Sampler(model, settings)
        functions[key] = (tf.function(run, jit_compile=True, autograph=False) if jit_compile
                          else tf.function(run, reduce_retracing=True, autograph=False))
    return functions[key](source, max_length, knobs)


_FUNCTIONS = weakref.WeakKeyDictionary()  # model -> {settings: tf.function}


class _Sampler:
    """`_sample` for one model and setting (an object, so that each has its own code
    object for TensorFlow's retracing counts, as `zoo.decode`'s `_Decoder`)."""

    def __init__(self, model, settings):
        self.model = weakref.ref(model)  # the cache must not keep the model alive
        self.settings = settings

    def __call__(self, source, max_length, knobs):
        return _sample(self.model(), source, max_length, knobs, *self.settings)


def _sample(model, source, max_length, knobs, start_id, end_id, use_cache, pad_id, force_end,
            with_score):
    stepper, source, width, limit = decode_steps.start(model, source, max_length, use_cache,
                                                       pad_id)
    return sample_loop(stepper, source, width, limit, Ids(start_id, end_id, pad_id, force_end),
                       knobs, with_score)


def _knobs(temperature, top_k, top_p, seed):
    """The scalar tensors `(seed, temperature, top_k, top_p)` of `sample_loop`: Python
    values checked (`Sampling`) with their defaults filled in, tensors cast."""
    given = {"temperature": temperature, "top_k": top_k, "top_p": top_p, "seed": seed}
    python = {name: value for name, value in given.items() if not _is_tensor(value)}
    settings = Sampling(**python)  # checks the Python values
    values = {
        "seed": secrets.randbits(63) if settings.seed is None else int(settings.seed),
        "temperature": float(settings.temperature),
        "top_k": 0 if settings.top_k is None else int(settings.top_k),
        "top_p": 1.0 if settings.top_p is None else float(settings.top_p),
    }
    dtypes = {"seed": tf.int64, "temperature": tf.float32, "top_k": tf.int32, "top_p": tf.float32}
    knobs = []
    for name in ("seed", "temperature", "top_k", "top_p"):
        if _is_tensor(given[name]):
            value = tf.convert_to_tensor(given[name])
            if value.shape.rank != 0:
                raise ValueError(f"`{name}` must be a scalar; received shape {value.shape}.")
            knobs.append(tf.cast(value, dtypes[name]))
        else:
            knobs.append(tf.constant(values[name], dtypes[name]))
    return tuple(knobs)


def _is_tensor(value):
    return isinstance(value, (tf.Tensor, tf.Variable))


def checked_knobs(temperature, top_k, top_p):
    """`(temperature, top_k, top_p)` scalar tensors (a signature's inputs), checked when
    the graph runs: `InvalidArgumentError` naming the input unless T > 0, k >= 0
    (0: off) and p > 0 (>= 1: off)."""
    asserts = [
        tf.debugging.assert_positive(temperature, message="sample: `temperature` must be > 0"),
        tf.debugging.assert_non_negative(top_k, message="sample: `top_k` must be >= 0 (0: off)"),
        tf.debugging.assert_positive(top_p, message="sample: `top_p` must be > 0 (>= 1: off)"),
    ]
    with tf.control_dependencies(asserts):
        return tuple(tf.identity(value) for value in (temperature, top_k, top_p))
