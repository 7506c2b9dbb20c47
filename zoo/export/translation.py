"""The translation export: a Transformer or RNNsearch as a TF Serving SavedModel.

`TranslationModule` holds the model and its tokenizers and defines the
signatures `serving_default` (beam search), `greedy` and `sample`, strings in and
strings out (see `zoo.export` for their outputs). Each signature is a plain
`tf.function`: tokenize (string ops), decode the int ids, detokenize.

With `jit_compile=True` the decoding of the int ids (the search loop; for
`greedy`, greedy decoding summing the chosen tokens' log-probabilities as it
goes) is an inner
`tf.function(jit_compile=True)`: XLA compiles it, and the string ops stay
outside the XLA cluster (they do not compile). XLA compiles once per input
shape, so the source is padded to a bucket width, the next power of two from
`MIN_BUCKET` up, at most `max_length` (padding is masked: the output does not
change): a server compiles once per (batch size, bucket) it sees.
"""

import os

import tensorflow as tf
import tensorflow_text

from keras_attention.checks import check, check_choice, check_int, check_number
from zoo import decode
from zoo.decode import copy_steps, sampling
from zoo.decode.defaults import RNN_MAX_LENGTH, decoding_settings
from zoo.errors import ZooError
from zoo.export import warmup
from zoo.text import tokenizers
from zoo.text.special import encode_sources, special_ids

# The RNNsearch has no position table: without `max_length` it decodes up to
# this many tokens (`zoo.decode.defaults`; the name is part of `zoo.export`'s API).
DEFAULT_RNN_MAX_LENGTH = RNN_MAX_LENGTH
PREFIX = "export: "  # of every error message
# XLA exports: the narrowest source bucket (tokens + [END]).
MIN_BUCKET = 8

# tensorflow-text ops that TensorFlow Serving's model server registers (it
# links tensorflow-text's op libraries: normalisation, regex split, WordPiece,
# fast WordPiece, SentencePiece, whitespace). An export may use these and
# core TensorFlow ops, nothing else; tests check the exported graphs.
TF_SERVING_TEXT_OPS = frozenset(
    {
        # _normalize_ops
        "CaseFoldUTF8",
        "NormalizeUTF8",
        "NormalizeUTF8WithOffsetsMap",
        "FindSourceOffsets",
        # _regex_split_ops
        "RegexSplitWithOffsets",
        # _wordpiece_tokenizer, _fast_wordpiece_tokenizer
        "WordpieceTokenizeWithOffsets",
        "FastWordpieceTokenizeWithOffsets",
        "TFText>FastWordpieceDetokenize",
        # _sentencepiece_tokenizer, _fast_sentencepiece_tokenizer
        "SentencepieceOp",
        "SentencepieceTokenizeOp",
        "SentencepieceTokenizeWithOffsetsOp",
        "SentencepieceDetokenizeOp",
        "SentencepieceIdToStringOp",
        "SentencepieceStringToIdOp",
        "SentencepieceVocabSizeOp",
        "TFText>FastSentencepieceTokenize",
        "TFText>FastSentencepieceDetokenize",
        # _whitespace_tokenizer, _whitespace_tokenizer_v2
        "WhitespaceTokenizeWithOffsets",
        "TFText>WhitespaceTokenizeWithOffsetsV2",
    }
)

# The tensorflow-text op libraries holding TF_SERVING_TEXT_OPS (file names in
# tensorflow_text/python/ops/): what a TF Serving-like process loads.
TF_SERVING_TEXT_OP_LIBRARIES = (
    "_normalize_ops.so",
    "_regex_split_ops.so",
    "_wordpiece_tokenizer.so",
    "_fast_wordpiece_tokenizer.so",
    "_sentencepiece_tokenizer.so",
    "_fast_sentencepiece_tokenizer.so",
    "_whitespace_tokenizer.so",
    "_whitespace_tokenizer_v2.so",
)


# === Model inspection and argument checks ===


def _layers(model):
    return {layer.name: layer for layer in model.layers}


def _source_vocabulary_size(model, family):
    layers = _layers(model)
    if family in ("transformer", "convs2s"):  # ka.TokenAndPositionEmbedding
        layer = layers.get("shared_embedding") or layers["source_embedding"]
        return layer.vocabulary_size
    return layers["source_embedding"].input_dim


def _target_vocabulary_size(model):
    if copy_steps.is_copying(model):  # its output is the extended vocabulary, V + S
        return int(model.get_layer("logits").output.shape[-1])
    return int(model.outputs[0].shape[-1])


def _position_limit(model):
    """The Transformer's position table size: the longest source or target it takes."""
    layers = _layers(model)
    names = ("shared_embedding", "source_embedding", "target_embedding")
    return min(layers[name].sequence_length for name in names if name in layers)


def _load_tokenizer(name, tokenizer):
    """A tokenizer object, or a directory written by a tokenizer's `save`."""
    if isinstance(tokenizer, (str, os.PathLike)):
        return tokenizers.load(tokenizer)
    if not isinstance(tokenizer, tf.Module) or not all(
        callable(getattr(tokenizer, method, None)) for method in ("tokenize", "detokenize")
    ):
        raise ZooError(
            f"export: `{name}` must be a zoo.text.WordPieceTokenizer (a tf.Module with "
            f"tokenize/detokenize) or the directory it was saved to; received {tokenizer!r}."
        )
    return tokenizer


def _check_vocabulary(name, tokenizer, model_size, side):
    size = getattr(tokenizer, "vocab_size", None)
    if size is not None and size > model_size:
        raise ZooError(
            f"export: `{name}` has {size} tokens but the model's {side} vocabulary has "
            f"{model_size}: its ids would not fit the model; pass the tokenizer the model "
            "was trained with."
        )


# === Exported module ===

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

    def _outputs(self, text, run):
        source = self.source_ids(text)  # (B, S)
        if self.jit_compile:  # the int-only part, compiled by XLA (no string ops inside)
            run = tf.function(run, jit_compile=True, autograph=False)

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

    def _beam_ids(self, source):  # int32 (B, S) -> tokens (B, L), score (B,)
        return decode.beam_search(
            self.model, source, beam_size=self.beam_size, alpha=self.alpha,
            length_penalty=self.length_penalty, **self._decode_args(),
        )

    def _greedy_ids(self, source):  # int32 (B, S) -> tokens (B, L), score (B,)
        # The score (the sum of the chosen tokens' log-probabilities) is added up in the
        # decoding loop: no second, teacher-forced pass over the tokens.
        return decode.greedy_decode(self.model, source, return_score=True, **self._decode_args())

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")], autograph=False)
    def beam(self, text):
        return self._outputs(text, self._beam_ids)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")], autograph=False)
    def greedy(self, text):
        return self._outputs(text, self._greedy_ids)

    @tf.function(input_signature=SAMPLE_SIGNATURE, autograph=False)
    def sample(self, text, seed, temperature, top_k, top_p):
        temperature, top_k, top_p = sampling.checked_knobs(temperature, top_k, top_p)

        def sample_ids(source):  # int32 (B, S) -> tokens (B, L), score (B,)
            return sampling.sample(self.model, source, temperature, top_k, top_p, seed,
                                   return_score=True, **self._decode_args())

        return self._outputs(text, sample_ids)


def translation_export(model, family, tokenizer, target_tokenizer, beam_size, alpha,
                       max_length, length_penalty=None, force_end=None, jit_compile=False,
                       max_new_tokens=None):
    """Check the arguments; return (module, signatures, metadata) of a translation export."""
    if tokenizer is None:
        raise ZooError(
            f"export: a {family} model needs `tokenizer` (and `target_tokenizer` when the "
            "target vocabulary differs) to serve text."
        )
    source_tokenizer = _load_tokenizer("tokenizer", tokenizer)
    target_tokenizer = (
        source_tokenizer
        if target_tokenizer is None
        else _load_tokenizer("target_tokenizer", target_tokenizer)
    )
    _check_vocabulary("tokenizer", source_tokenizer, _source_vocabulary_size(model, family), "source")
    _check_vocabulary(
        "target_tokenizer" if target_tokenizer is not source_tokenizer else "tokenizer",
        target_tokenizer,
        _target_vocabulary_size(model),
        "target",
    )
    check_int("beam_size", beam_size, 1, prefix=PREFIX)
    length_penalty, force_end, alpha = _search_settings(
        target_tokenizer, length_penalty, force_end, alpha
    )
    limit = _position_limit(model) if family in ("transformer", "convs2s") else None
    if max_length is None:
        max_length = limit if limit is not None else RNN_MAX_LENGTH
    check_int("max_length", max_length, 2, limit, prefix=PREFIX)
    if max_new_tokens is None:
        max_new_tokens = max_length
    check_int("max_new_tokens", max_new_tokens, 1, limit, prefix=PREFIX)
    check("jit_compile", jit_compile, "a bool", isinstance(jit_compile, bool), PREFIX)

    module_class = TranslationModule
    if copy_steps.is_copying(model):
        # zoo.export.copying subclasses TranslationModule: it imports this module.
        from zoo.export.copying import CopyTranslationModule as module_class  # noqa: PLC0415
    module = module_class(
        model, source_tokenizer, target_tokenizer, max_length, beam_size, alpha,
        length_penalty, force_end, jit_compile, max_new_tokens,
    )
    signatures = {"serving_default": module.beam, "greedy": module.greedy, "sample": module.sample}
    warmup.attach(module, signatures, source_tokenizer, max_length, module.ids["end"],
                  bucket_widths(max_length))
    metadata = {
        "tensorflow_text_version": tensorflow_text.__version__,
        "signatures": {
            "serving_default": "beam search: text -> translation, tokens, score",
            "greedy": "greedy decoding: text -> translation, tokens, score",
            "sample": "sampling: text, seed, temperature, top_k (0: off), top_p (1: off) -> "
                      "translation, tokens, score",
        },
        "max_length": max_length,
        "max_new_tokens": max_new_tokens,
        "beam_size": beam_size,
        "alpha": alpha,
        "length_penalty": length_penalty,
        "force_end": force_end,
        "special_ids": module.ids,
        "jit_compile": jit_compile,
        "source_buckets": bucket_widths(max_length) if jit_compile else None,
        "warmup_requests": len(module.warmup_requests),
    }
    return module, signatures, metadata


def _search_settings(target_tokenizer, length_penalty, force_end, alpha):
    """(length_penalty, force_end, alpha), defaulted (`zoo.decode.defaults`: Hugging Face's
    for a tokenizer with its own special ids, imported Marian models; else GNMT's) and checked."""
    settings = decoding_settings(target_tokenizer, length_penalty, alpha, force_end)
    check_choice("length_penalty", settings.length_penalty, decode.LENGTH_PENALTIES, PREFIX)
    check_number("alpha", settings.alpha, 0, prefix=PREFIX)
    return settings.length_penalty, settings.force_end, float(settings.alpha)
