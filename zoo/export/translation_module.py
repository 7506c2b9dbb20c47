"""The exported translation module: `TranslationModule`, its signatures and XLA's source buckets.

`TranslationModule` holds the model and its tokenizers and defines the
signatures `serving_default` (beam search), `greedy` and `sample`, strings in and
strings out (see `zoo.export` for their outputs). Each signature is a plain
`tf.function`: tokenize (string ops), decode the int ids, detokenize.

With `jit_compile=True` XLA compiles the decoding of the int ids, and the string ops stay
outside (they do not compile). A batch of one (and `sample`, and Hugging Face's beam
search) compiles its whole loop as an inner `tf.function(jit_compile=True)`. Larger batches
of greedy and GNMT beam search (`greedy`, `serving_default`) compile each segment of their
loop (`zoo.decode.segments`: between segments, outside XLA, the finished sentences leave
the batch, whose slots are a power of two). XLA compiles once per input shape, so the source is padded
to a bucket width, the next power of two from `MIN_BUCKET` up, at most `max_length`
(padding is masked: the output does not change): a server compiles once per shape it sees.

`zoo.export.copying` subclasses it for copying models; `zoo.export.translation`
checks the arguments and picks the class.
"""

import tensorflow as tf

from zoo import decode
from zoo.decode import sampling
from zoo.text.ids import encode_sources
from zoo.text.special import special_ids

# XLA exports: the narrowest source bucket (tokens + [END]).
MIN_BUCKET = 8


# The `sample` signature's inputs: the text and scalars (`zoo.decode.sampling`; top_k 0 and
# top_p >= 1 switch those filters off).
SAMPLE_SIGNATURE = [
    tf.TensorSpec([None], tf.string, name="text"),
    tf.TensorSpec([], tf.int64, name="seed"),
    tf.TensorSpec([], tf.float32, name="temperature"),
    tf.TensorSpec([], tf.int32, name="top_k"),
    tf.TensorSpec([], tf.float32, name="top_p"),
]


def bucket_widths(max_length):
    """The source widths of an XLA export, a Python list: MIN_BUCKET, 2·MIN_BUCKET,
    4·MIN_BUCKET, … below max_length, then max_length (one compiled program each per
    batch size; powers of two keep them to about log2(max_length / MIN_BUCKET) + 1)."""
    widths = [min(MIN_BUCKET, max_length)]
    while widths[-1] < max_length:
        widths.append(min(2 * widths[-1], max_length))
    return widths


def bucket_width(length, max_length):
    """The padded source width for `length` tokens (int32 scalar tensor): the smallest of
    `bucket_widths(max_length)` that holds it; never more than max_length."""
    widths = tf.constant(bucket_widths(max_length), tf.int32)
    index = tf.searchsorted(widths, tf.reshape(tf.cast(length, tf.int32), [1]), side="left")[0]
    return widths[tf.minimum(index, tf.size(widths) - 1)]


class TranslationModule(tf.Module):
    """What a translation export holds: the model, its tokenizers and the signatures.

    Args:
        model: a zoo Transformer or RNNsearch (`{"source", "target"}` -> logits).
        source_tokenizer, target_tokenizer: tokenizers with `tokenize`/`detokenize`
            (may be the same object); tracked as attributes, so their tables and
            vocabularies are saved with the model.
        max_length: the longest source (tokens + [END]) and, unless `max_new_tokens`
            says otherwise, the most tokens generated.
        beam_size, alpha, length_penalty, force_end: beam search settings (`zoo.decode`).
        jit_compile: decode the int ids in an XLA-compiled inner function, the
            source padded to a bucket width (B, W), W = `bucket_width(S)`.
        max_new_tokens: the most tokens generated ([END] included), L; default `max_length`.
    """

    def __init__(self, model, source_tokenizer, target_tokenizer, max_length, beam_size, alpha,
                 length_penalty="gnmt", force_end=False, jit_compile=False, max_new_tokens=None):
        super().__init__(name="translation")
        self.model = model
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer
        self.max_length = max_length
        self.max_new_tokens = max_length if max_new_tokens is None else max_new_tokens
        self.beam_size = beam_size
        self.alpha = alpha
        self.length_penalty = length_penalty
        self.force_end = force_end
        self.jit_compile = jit_compile
        self.ids = special_ids(target_tokenizer)

    def _decode_args(self):
        return dict(max_length=self.max_new_tokens, start_id=self.ids["start"],
                    end_id=self.ids["end"], pad_id=self.ids["pad"], force_end=self.force_end)

    def source_ids(self, text):
        """Strings (B,) -> source ids int32 (B, S): tokens cut to max_length - 1, + [END],
        padded (to a bucket width W >= S under `jit_compile`)."""
        ids = encode_sources(self.source_tokenizer, text, self.max_length,
                             end_id=self.ids["end"])  # (B, (S))
        ids = ids.to_tensor(default_value=self.ids["pad"])  # (B, S)
        if not self.jit_compile:
            return ids
        extra = bucket_width(tf.shape(ids)[1], self.max_length) - tf.shape(ids)[1]
        return tf.pad(ids, [[0, 0], [0, extra]], constant_values=self.ids["pad"])  # (B, W)

    def _outputs(self, text, run, search):
        source = self.source_ids(text)  # (B, S)
        run = self._compiled(run, search)

        def empty():
            return tf.zeros([0, self.max_new_tokens], tf.int32), tf.zeros([0], tf.float32)

        # An empty batch never reaches the model (shape corner cases in the
        # decoding loops); it gets empty outputs of the right ranks.
        tokens, score = tf.cond(tf.shape(source)[0] > 0, lambda: run(source), empty)
        tokens = tf.ensure_shape(tf.cast(tokens, tf.int32), [None, None])
        return {
            "translation": self.target_tokenizer.detokenize(tokens),  # (B,)
            "tokens": tokens,  # (B, L)
            "score": tf.ensure_shape(tf.cast(score, tf.float32), [None]),  # (B,)
        }

    def _segmented(self, search):
        """Whether XLA compiles `search`'s segments (`zoo.decode.segments`), not its whole
        loop: greedy and GNMT beam search."""
        return self.jit_compile and (search == "greedy" or
                                     (search == "beam" and self.length_penalty != "hf"))

    def _compiled(self, run, search):
        """`run` (source ids -> tokens, score) as the export runs it: as it is, or with
        `jit_compile` the int-only part compiled by XLA (no string ops inside). A batch of
        one, the warm-up requests' size, runs as one XLA program per source bucket, which
        the warm-up compiles whole; where `_segmented`, larger batches run XLA-compiled
        segments, between which their finished sentences leave the batch."""
        if not self.jit_compile:
            return run
        whole = tf.function(run, jit_compile=True, autograph=False)
        if not self._segmented(search):
            return whole
        return lambda source: tf.cond(tf.shape(tf.nest.flatten(source)[0])[0] > 1,
                                      lambda: run(source), lambda: whole(source))

    def _beam_ids(self, source):  # int32 (B, S) -> tokens (B, L), score (B,)
        return decode.beam_search(
            self.model, source, beam_size=self.beam_size, alpha=self.alpha,
            length_penalty=self.length_penalty, jit_compile=self._segmented("beam"),
            **self._decode_args(),
        )

    def _greedy_ids(self, source):  # int32 (B, S) -> tokens (B, L), score (B,)
        # The score (the sum of the chosen tokens' log-probabilities) is added up in the
        # decoding loop: no second, teacher-forced pass over the tokens.
        return decode.greedy_decode(self.model, source, return_score=True,
                                    jit_compile=self._segmented("greedy"), **self._decode_args())

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")], autograph=False)
    def beam(self, text):
        return self._outputs(text, self._beam_ids, "beam")

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")], autograph=False)
    def greedy(self, text):
        return self._outputs(text, self._greedy_ids, "greedy")

    @tf.function(input_signature=SAMPLE_SIGNATURE, autograph=False)
    def sample(self, text, seed, temperature, top_k, top_p):
        temperature, top_k, top_p = sampling.checked_knobs(temperature, top_k, top_p)

        def sample_ids(source):  # int32 (B, S) -> tokens (B, L), score (B,)
            return sampling.sample(self.model, source, temperature, top_k, top_p, seed,
                                   return_score=True, **self._decode_args())

        return self._outputs(text, sample_ids, "sample")
