"""Auto-regressive decoding for the zoo's seq2seq models (MATH.md, "Transformer", inference).

Two searches over `p(y | x) = Π_t p(y_t | y_<t, x)`:

- `greedy_decode`: the most likely next token at every step.
- `beam_search`: the best hypothesis of a beam of `beam_size`, scored by
  `log p(y | x) / lp(y)` with the length penalty of Wu et al. (2016), eq. 14,
  the one the Transformer paper uses with α = 0.6 (see `length_penalty`).

Both decode a batch inside one `tf.function` (`tf.while_loop` over fixed-size
buffers, so they also compile under XLA when `max_length` is a Python int),
and both work on models from `zoo.get` and on the same models after
`keras.saving.load_model` (layers are found by name). How one step is computed:

- Transformer (`use_cache=True`): the encoder runs once; the cross-attention
  keys and values of its output are projected once; each step embeds one token
  at position t and runs the decoder blocks on it alone, writing its
  self-attention keys and values into per-block buffers of `max_length`
  positions (`TransformerDecoderBlock.call_with_cache`). A step costs
  O(max_length) instead of re-running the whole prefix.
- RNNsearch (`use_cache=True`): the encoder runs once and each step is one
  `BahdanauDecoder.step`; the "cache" is the recurrent state, O(S) per step.
- ConvS2S (`use_cache=True`): the encoder runs once; each decoder layer keeps its
  last k-1 inputs (`zoo.convs2s.IncrementalDecoder`), O(k + S) per step.
- `use_cache=False` (and any other `{"source", "target"}` -> logits model): the
  full model re-runs at every step on a fixed-size target buffer, reading the
  logits at position t (correct because position t only sees positions <= t).

Conventions: id 0 is padding and is never generated; the source may be padded
with 0 anywhere after its tokens. Models with other special ids (imported
Marian models: `</s>` = 0, padding = decoder start = V - 1) pass `pad_id`,
`start_id` and `end_id`; `force_end=True` makes the last step at the length
limit emit `end_id` (Hugging Face's `forced_eos_token_id`), and
`beam_search(length_penalty="hf")` runs Hugging Face's beam search
(`zoo.hf_beam`), so that such models reproduce their upstream outputs. By default each row may generate up to its own
source length (non-padding tokens) + 50 tokens, the paper's limit, so a row
decodes the same alone as in a padded batch.
"""

import numbers
import weakref

import tensorflow as tf

from zoo import convs2s, families, hf_beam, seq2seq
from zoo.search_steps import Ids, forced_end, keep_shapes, pad_column, write_column
from zoo.tokens import END_ID, PAD_ID, START_ID  # noqa: F401 - part of this module's API

LENGTH_PENALTIES = ("gnmt", "hf")
EXTRA_LENGTH = 50  # default maximum output length = source length + 50
_NEG = -1e9  # log-probability of impossible hypotheses (finite: no inf - inf or 0 * inf)


def length_penalty(length, alpha):
    """GNMT's length penalty `lp(Y) = ((5 + |Y|) / (5 + 1))^α` (Wu et al., 2016, eq. 14).

    `|Y|` counts the generated tokens including `[END]` (as in tensor2tensor's
    beam search); α = 0 gives lp = 1, i.e. plain log-probabilities. MATH.md
    names the penalty and α = 0.6; this is the formula of the paper it cites.

    Args:
        length: int or int tensor, any shape.
        alpha: float >= 0.

    Returns:
        float32, shaped like `length`.
    """
    return tf.pow((5.0 + tf.cast(length, tf.float32)) / 6.0, alpha)


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
):
    """Greedy decoding of a batch: the arg-max token at every step.

    Args:
        model: a zoo seq2seq model (`{"source", "target"}` -> logits `(B, T, V)`),
            built by `zoo.get` or loaded from a `.keras` file.
        source: int ids `(B, S)`, 0 = padding; numpy, a tensor, or a symbolic
            tensor of shape `(None, None)` inside another `tf.function`.
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

    Returns:
        int32 `(B, L)`: generated ids without `[START]`; the `[END]` token is kept
        and everything after it is `pad_id`.
    """
    source, max_length = _check_common(source, max_length, start_id, end_id, pad_id)
    return _run(
        model, source, max_length, jit_compile, int(start_id), int(end_id), bool(use_cache), 0, 0.0,
        int(pad_id), bool(force_end), "gnmt",
    )


def beam_search(
    model,
    source,
    beam_size=4,
    alpha=0.6,
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
    per-hypothesis caches are reordered by parent beam at every step.

    Args:
        model, source, max_length, start_id, end_id, jit_compile: as in `greedy_decode`.
        beam_size: K >= 1 (4 in the paper).
        alpha: length penalty α >= 0 (0.6 in the paper); 0 ranks by log-probability.
        pad_id, force_end: as in `greedy_decode`.
        length_penalty: `"gnmt"` (above), or `"hf"`: Hugging Face's beam search
            (`zoo.hf_beam`: 2K candidates a step, ended hypotheses scored
            `log p / |y| ** alpha`, its early-stopping heuristic), as
            `generate(num_beams=K, length_penalty=alpha)` runs it.

    Returns:
        `(tokens, scores)`: int32 `(B, L)` in the layout of `greedy_decode`, and
        float32 `(B,)` the score `log p(tokens | source) / lp(length)` of each row's
        best hypothesis (length including `[END]`).
    """
    if isinstance(beam_size, bool) or not isinstance(beam_size, numbers.Integral) or beam_size < 1:
        raise ValueError(f"`beam_size` must be an integer >= 1; received beam_size={beam_size!r}.")
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not alpha >= 0:
        raise ValueError(f"`alpha` must be a number >= 0; received alpha={alpha!r}.")
    if length_penalty not in LENGTH_PENALTIES:
        raise ValueError(
            f"`length_penalty` must be one of {LENGTH_PENALTIES}; received {length_penalty!r}."
        )
    source, max_length = _check_common(source, max_length, start_id, end_id, pad_id)
    return _run(
        model, source, max_length, jit_compile, int(start_id), int(end_id), True,
        int(beam_size), float(alpha), int(pad_id), bool(force_end), length_penalty,
    )


def strip_special(ids, end_id=END_ID):
    """Cut each row of decoded ids at `[END]` and drop padding: a list of int lists."""
    rows = []
    for row in tf.convert_to_tensor(ids).numpy().tolist():
        out = []
        for token in row:
            if token == end_id:
                break
            if token != 0:
                out.append(token)
        rows.append(out)
    return rows


def _check_common(source, max_length, start_id, end_id, pad_id=PAD_ID):
    source = tf.convert_to_tensor(source)
    if source.shape.rank != 2:
        raise ValueError(f"`source` must have shape (B, S); received source.shape={source.shape}.")
    if not source.dtype.is_integer:
        raise ValueError(f"`source` must hold integer ids; received dtype {source.dtype.name}.")
    source = tf.cast(source, tf.int32)
    for name, value in (("start_id", start_id), ("end_id", end_id), ("pad_id", pad_id)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
            raise ValueError(f"`{name}` must be an integer id >= 0; received {name}={value!r}.")
    if end_id == pad_id:
        raise ValueError(f"`end_id` must differ from `pad_id`; both are {pad_id}.")
    if max_length is None:
        return source, None
    if isinstance(max_length, numbers.Integral) and not isinstance(max_length, bool):
        if max_length < 1:
            raise ValueError(f"`max_length` must be >= 1; received max_length={max_length!r}.")
        return source, int(max_length)
    if isinstance(max_length, (tf.Tensor, tf.Variable)) or hasattr(max_length, "dtype"):
        max_length = tf.convert_to_tensor(max_length)
        if max_length.shape.rank != 0 or not max_length.dtype.is_integer:
            raise ValueError(
                "`max_length` must be an int or a scalar int tensor; received "
                f"shape {max_length.shape}, dtype {max_length.dtype.name}."
            )
        return source, tf.cast(max_length, tf.int32)
    raise ValueError(f"`max_length` must be None, an int or a scalar int tensor; received {max_length!r}.")


# === The decoding loops ===


def _run(model, source, max_length, jit_compile, *args):
    """Run `_decode` in a `tf.function` of its own per model (XLA-compiled with
    `jit_compile`), or, inside a caller's `tf.function` without `jit_compile`, build
    the loop right into the caller's graph (an export signature, an XLA function)."""
    if jit_compile and not (max_length is None or isinstance(max_length, int)):
        raise ValueError(
            "`jit_compile=True` needs a static output length: `max_length` must be None "
            f"or a Python int; received {max_length!r}."
        )
    if tf.inside_function() and not jit_compile:
        return _decode(model, source, max_length, *args)
    functions = _FUNCTIONS.setdefault(model, {})
    key = (bool(jit_compile), max_length is None, *args)
    if key not in functions:
        # One function per model and setting, so that each retraces only for new shapes.
        run = _Decoder(model, args)
        # Plain graph building (no AutoGraph): the loops are explicit tf.while_loops.
        functions[key] = (
            tf.function(run, jit_compile=True, autograph=False)
            if jit_compile
            else tf.function(run, reduce_retracing=True, autograph=False)
        )
    # An int `max_length` stays a trace-time constant (static shapes; a new trace per value).
    return functions[key](source, max_length)


_FUNCTIONS = weakref.WeakKeyDictionary()  # model -> {settings: tf.function}


class _Decoder:
    """`_decode` for one model and setting. A callable object rather than a closure:
    TensorFlow counts retracing per code object, and closures share theirs."""

    def __init__(self, model, settings):
        self.model = weakref.ref(model)  # the cache must not keep the model alive
        self.settings = settings

    def __call__(self, source, max_length):
        return _decode(self.model(), source, max_length, *self.settings)


def _decode(model, source, max_length, start_id, end_id, use_cache, beam_size, alpha,
            pad_id=PAD_ID, force_end=False, penalty="gnmt"):
    """Greedy (`beam_size=0`) or beam search; Python arguments are trace-time constants."""
    stepper = _stepper(model, use_cache, pad_id)
    lengths = tf.reduce_sum(tf.cast(tf.not_equal(source, pad_id), tf.int32), axis=1)  # (B,)
    if max_length is None:
        static = source.shape[1]
        width = static + EXTRA_LENGTH if static is not None else tf.shape(source)[1] + EXTRA_LENGTH
        limit = lengths + EXTRA_LENGTH
    else:
        width = max_length
        limit = tf.fill(tf.shape(lengths), max_length)
    ids = Ids(start_id, end_id, pad_id, force_end)
    if beam_size == 0:
        return _greedy(stepper, source, width, limit, ids)
    if penalty == "hf":
        return hf_beam.beam(stepper, source, width, limit, ids, beam_size, alpha)
    return _beam(stepper, source, width, limit, ids, beam_size, alpha)


def _greedy(stepper, source, width, limit, ids):
    batch = tf.shape(source)[0]
    state = stepper.prepare(source, 1, width)
    tokens = tf.fill([batch], ids.start)  # the decoder input at step t
    output = tf.fill([batch, width], ids.pad)
    done = tf.less_equal(limit, 0)

    def keep_going(t, tokens, output, done, state):
        return tf.logical_and(t < width, tf.logical_not(tf.reduce_all(done)))

    def step(t, tokens, output, done, state):
        logits, state = stepper.step(tokens, t, state)  # (B, V)
        logits = tf.where(pad_column(logits, ids.pad), tf.constant(_NEG, logits.dtype), logits)
        logits = forced_end(logits, ids, t + 1 >= limit, _NEG)
        token = tf.argmax(logits, axis=-1, output_type=tf.int32)  # (B,)
        token = tf.where(done, tf.fill(tf.shape(token), ids.pad), token)
        output = write_column(output, t, token)
        done = done | tf.equal(token, ids.end) | (t + 1 >= limit)
        return t + 1, token, output, done, state

    _, _, output, _, _ = tf.while_loop(
        keep_going, keep_shapes(step), (tf.constant(0), tokens, output, done, state)
    )
    return output


def _beam(stepper, source, width, limit, ids, beam_size, alpha):
    batch, k = tf.shape(source)[0], beam_size
    state = stepper.prepare(source, k, width)  # every tensor has B·K rows: b·K + k
    last = tf.fill([batch * k], ids.start)  # (B·K,) the decoder input at step t
    alive = tf.fill([batch, k, width], ids.pad)  # live hypotheses
    # Only beam 0 is live at first, so the first step does not pick K copies of one token.
    alive_log_probs = tf.tile(
        tf.concat([[0.0], tf.fill([k - 1], _NEG)], axis=0)[None, :], [batch, 1]
    )  # (B, K)
    ended = tf.zeros([batch], tf.int32)  # d: hypotheses that ended so far
    best = tf.fill([batch, width], ids.pad)
    best_score = tf.fill([batch], _NEG)
    done = tf.less_equal(limit, 0)
    max_penalty = length_penalty(limit, alpha)  # (B,)
    ranks = tf.range(k)[None, :]  # (1, K)

    def keep_going(t, last, alive, alive_log_probs, ended, best, best_score, done, state):
        return tf.logical_and(t < width, tf.logical_not(tf.reduce_all(done)))

    def step(t, last, alive, alive_log_probs, ended, best, best_score, done, state):
        logits, state = stepper.step(last, t, state)  # (B·K, V)
        log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
        log_probs = tf.where(pad_column(log_probs, ids.pad), _NEG, log_probs)
        log_probs = forced_end(log_probs, ids, tf.repeat(t + 1 >= limit, k), _NEG)
        vocabulary = tf.shape(log_probs)[-1]
        candidates = alive_log_probs[:, :, None] + tf.reshape(log_probs, [batch, k, vocabulary])
        top_log_probs, top = tf.math.top_k(tf.reshape(candidates, [batch, -1]), k=k)  # (B, K)
        parent, token = top // vocabulary, top % vocabulary
        # Keep the K - d best extensions; ignore impossible ones and finished rows.
        kept = (
            (ranks < (k - ended)[:, None])
            & (top_log_probs > _NEG / 2)
            & tf.logical_not(done)[:, None]
        )
        token = tf.where(kept, token, ids.pad)
        hypotheses = tf.gather(alive, parent, batch_dims=1)  # (B, K, L)
        hypotheses = write_column(hypotheses, t, token)
        has_ended = kept & tf.equal(token, ids.end)
        finishing = has_ended | (kept & (t + 1 >= limit)[:, None])  # [END] or the length limit
        scores = tf.where(finishing, top_log_probs / length_penalty(t + 1, alpha), _NEG)
        candidate_score = tf.reduce_max(scores, axis=1)  # (B,)
        candidate = tf.gather(
            hypotheses, tf.argmax(scores, axis=1, output_type=tf.int32), batch_dims=1
        )  # (B, L)
        better = candidate_score > best_score  # ties keep the earlier (shorter) hypothesis
        best = tf.where(better[:, None], candidate, best)
        best_score = tf.where(better, candidate_score, best_score)
        ended += tf.reduce_sum(tf.cast(has_ended, tf.int32), axis=1)

        alive_log_probs = tf.where(kept & tf.logical_not(finishing), top_log_probs, _NEG)
        best_alive = tf.reduce_max(alive_log_probs, axis=1)  # (B,)
        done = (
            done
            | (ended >= k)
            | (t + 1 >= limit)
            | (best_alive <= _NEG / 2)
            | (best_alive / max_penalty < best_score)  # no live hypothesis can win any more
        )
        alive_log_probs = tf.where(done[:, None], _NEG, alive_log_probs)
        rows = tf.reshape(tf.range(batch)[:, None] * k + parent, [-1])  # (B·K,)
        state = tf.nest.map_structure(lambda x: tf.gather(x, rows), state)
        return t + 1, tf.reshape(token, [-1]), hypotheses, alive_log_probs, ended, best, best_score, done, state

    loop = tf.while_loop(
        keep_going,
        keep_shapes(step),
        (tf.constant(0), last, alive, alive_log_probs, ended, best, best_score, done, state),
    )
    return loop[5], loop[6]


# === One decoding step per model family ===


def _stepper(model, use_cache, pad_id=PAD_ID):
    layers = {layer.name: layer for layer in model.layers}
    family = families.model_family(model) if use_cache else None
    if family == "transformer" and ("shared_embedding" in layers or "target_embedding" in layers):
        return _TransformerStep(layers, pad_id)
    if family == "seq2seq" and isinstance(layers.get("decoder"), seq2seq.BahdanauDecoder):
        return _RNNSearchStep(layers)
    if family == "convs2s":  # each decoder layer's last k-1 inputs
        return convs2s.IncrementalDecoder(layers)
    try:
        input_names = {tensor.name for tensor in model.inputs or []}
    except AttributeError:  # a subclassed model: try it
        input_names = set()
    if input_names and not {"source", "target"} <= input_names:
        raise ValueError(
            f"Decoding needs a seq2seq model with inputs 'source' and 'target'; "
            f"{model.name!r} has inputs {sorted(input_names)}."
        )
    return _FullModelStep(model)


def _repeat(tensor, copies):
    return tensor if copies == 1 else tf.repeat(tensor, copies, axis=0)


class _TransformerStep:
    """Encoder once, then one token at a time through the cached decoder blocks."""

    def __init__(self, layers, pad_id=PAD_ID):
        self.pad_id = pad_id
        self.final_logits_bias = layers.get("final_logits_bias")
        shared = "shared_embedding" in layers
        self.source_embedding = layers["shared_embedding" if shared else "source_embedding"]
        self.target_embedding = layers["shared_embedding" if shared else "target_embedding"]
        self.encoder_blocks = _numbered(layers, "encoder_block_")
        self.decoder_blocks = _numbered(layers, "decoder_block_")
        self.encoder_norm = layers.get("encoder_norm")
        self.decoder_norm = layers.get("decoder_norm")
        self.output_projection = layers.get("output_projection")

    def prepare(self, source, copies, width):
        """Encode `(B, S)`; keep per-beam copies of the cross-attention keys/values;
        return empty self-attention caches of `width` positions for B·copies rows."""
        if self.target_embedding.positional == "learned":  # a table of `positions` rows
            positions = self.target_embedding.sequence_length
            if isinstance(width, int) and width > positions:
                raise ValueError(
                    f"The model has {positions} learned target positions; cannot generate "
                    f"{width} tokens. Pass a smaller `max_length` (the default is the source "
                    "length + 50)."
                )
            if not isinstance(width, int):  # checked when it runs
                with tf.control_dependencies([tf.debugging.assert_less_equal(
                    width, positions,
                    message=f"max_length exceeds the model's {positions} learned target positions",
                )]):
                    source = tf.identity(source)
        source_mask = tf.not_equal(source, self.pad_id)  # (B, S)
        x = self.source_embedding(source, training=False)  # (B, S, D)
        for block in self.encoder_blocks:
            x = block(x, padding_mask=source_mask, training=False)
        if self.encoder_norm is not None:
            x = self.encoder_norm(x)
        self.source_mask = _repeat(source_mask, copies)
        self.cross_caches = [
            tuple(_repeat(c, copies) for c in block.compute_cross_attention_cache(x))
            for block in self.decoder_blocks
        ]  # each (B·copies, N, H, S) and (B·copies, N, S, H)
        rows = tf.shape(source)[0] * copies
        return tuple(block.empty_self_attention_cache(rows, width) for block in self.decoder_blocks)

    def step(self, tokens, t, caches):
        """tokens `(B,)` at position t -> logits `(B, V)` for position t, new caches."""
        y = self.target_embedding(tokens[:, None], start_index=t, training=False)  # (B, 1, D)
        new_caches = []
        for block, cache, cross in zip(self.decoder_blocks, caches, self.cross_caches):
            y, cache = block.call_with_cache(
                y, cache, t, cross_attention_cache=cross,
                encoder_padding_mask=self.source_mask, training=False,
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
        return tf.cast(logits[:, 0, :], tf.float32), tuple(new_caches)


class _RNNSearchStep:
    """Encoder once, then `BahdanauDecoder.step`: the state is the recurrent state."""

    def __init__(self, layers):
        self.layers = layers
        self.decoder = layers["decoder"]

    def prepare(self, source, copies, width):
        annotations, states, source_mask = seq2seq.encode(self.layers, source, training=False)
        self.annotations = _repeat(annotations, copies)  # (B·copies, S, A)
        self.source_mask = _repeat(source_mask, copies)
        self.projected_key = self.decoder.attention.project_key(self.annotations)  # U_a h
        return tuple(_repeat(s, copies) for s in states)

    def step(self, tokens, t, states):
        embedded = self.layers["target_embedding"](tokens)  # E y_{t-1} (B, E)
        new_states, previous, context, _ = self.decoder.step(
            embedded, list(states), self.annotations, self.projected_key, self.source_mask,
            training=False,
        )
        logits = seq2seq.output_logits(
            self.layers, previous[:, None], embedded[:, None], context[:, None], training=False
        )  # (B, 1, V)
        return tf.cast(logits[:, 0, :], tf.float32), tuple(new_states)


class _FullModelStep:
    """No cache: the whole model on a fixed-size target buffer at every step."""

    def __init__(self, model):
        self.model = model

    def prepare(self, source, copies, width):
        self.source = _repeat(source, copies)
        self.width = width
        return (tf.zeros([tf.shape(self.source)[0], width], tf.int32),)

    def step(self, tokens, t, state):
        (buffer,) = state  # decoder inputs [START] y_0 … y_{t-1}, then zeros
        buffer += tokens[:, None] * tf.one_hot(t, self.width, dtype=tf.int32)[None, :]
        logits = self.model({"source": self.source, "target": buffer}, training=False)
        return tf.cast(logits[:, t, :], tf.float32), (buffer,)


def _numbered(layers, prefix):
    blocks = []
    while f"{prefix}{len(blocks)}" in layers:
        blocks.append(layers[f"{prefix}{len(blocks)}"])
    return blocks
