"""The translation export: a Transformer, RNNsearch or ConvS2S as a TF Serving SavedModel.

`translation_export` checks the arguments against the model and its
tokenizers, fills in the decoding defaults (`zoo.decode.defaults`) and builds
the module that is saved: `zoo.export.translation_module.TranslationModule`
(the signatures `serving_default`, `greedy` and `sample`, strings in and
strings out; with `jit_compile=True` the int ids decoded by XLA, the source
padded to a bucket width), or for a copying model its subclass
`zoo.export.copying.CopyTranslationModule`.
"""

import os

import tensorflow as tf
import tensorflow_text

from keras_attention.checks import check, check_choice, check_int, check_number
from zoo import decode
from zoo.decode import copy_steps
from zoo.decode.defaults import RNN_MAX_LENGTH, decoding_settings
from zoo.errors import ZooError
from zoo.export import warmup
from zoo.export.copying import CopyTranslationModule
from zoo.export.translation_module import (  # noqa: F401 - bucket_width: importable here too
    TranslationModule,
    bucket_width,
    bucket_widths,
)
from zoo.text import tokenizers

# The RNNsearch has no position table: without `max_length` it decodes up to
# this many tokens (`zoo.decode.defaults`; the name is part of `zoo.export`'s API).
DEFAULT_RNN_MAX_LENGTH = RNN_MAX_LENGTH
PREFIX = "export: "  # of every error message

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


# What each signature does, for the export's metadata.
SIGNATURE_DESCRIPTIONS = {
    "serving_default": "beam search: text -> translation, tokens, score",
    "greedy": "greedy decoding: text -> translation, tokens, score",
    "sample": "sampling: text, seed, temperature, top_k (0: off), top_p (1: off) -> "
              "translation, tokens, score",
}


def translation_export(model, family, tokenizer, target_tokenizer, beam_size, alpha,
                       max_length, length_penalty=None, force_end=None, jit_compile=False,
                       max_new_tokens=None):
    """Check the arguments; return (module, signatures, metadata) of a translation export."""
    source_tokenizer, target_tokenizer = _tokenizers(model, family, tokenizer, target_tokenizer)
    check_int("beam_size", beam_size, 1, prefix=PREFIX)
    length_penalty, force_end, alpha = _search_settings(
        target_tokenizer, length_penalty, force_end, alpha
    )
    max_length, max_new_tokens = _lengths(model, family, max_length, max_new_tokens)
    check("jit_compile", jit_compile, "a bool", isinstance(jit_compile, bool), PREFIX)

    module_class = CopyTranslationModule if copy_steps.is_copying(model) else TranslationModule
    module = module_class(
        model, source_tokenizer, target_tokenizer, max_length, beam_size, alpha,
        length_penalty, force_end, jit_compile, max_new_tokens,
    )
    signatures = {"serving_default": module.beam, "greedy": module.greedy, "sample": module.sample}
    warmup.attach(module, signatures, source_tokenizer, max_length, module.ids["end"],
                  bucket_widths(max_length))
    return module, signatures, _metadata(module)


def _tokenizers(model, family, tokenizer, target_tokenizer):
    """`(source, target)` tokenizer objects (the target is the source's when None), loaded
    from their directories where given as paths, each checked to fit the model's vocabulary."""
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
    return source_tokenizer, target_tokenizer


def _lengths(model, family, max_length, max_new_tokens):
    """`(max_length, max_new_tokens)`, defaulted and checked: the Transformer's and ConvS2S's
    position table bounds both and is the default; the RNNsearch's default is
    `RNN_MAX_LENGTH`; `max_new_tokens` defaults to `max_length`."""
    limit = _position_limit(model) if family in ("transformer", "convs2s") else None
    if max_length is None:
        max_length = limit if limit is not None else RNN_MAX_LENGTH
    check_int("max_length", max_length, 2, limit, prefix=PREFIX)
    if max_new_tokens is None:
        max_new_tokens = max_length
    check_int("max_new_tokens", max_new_tokens, 1, limit, prefix=PREFIX)
    return max_length, max_new_tokens


def _metadata(module):
    """What `zoo_export.json` records of a translation export: its signatures and the
    settings its `module` decodes with."""
    return {
        "tensorflow_text_version": tensorflow_text.__version__,
        "signatures": dict(SIGNATURE_DESCRIPTIONS),
        "max_length": module.max_length,
        "max_new_tokens": module.max_new_tokens,
        "beam_size": module.beam_size,
        "alpha": module.alpha,
        "length_penalty": module.length_penalty,
        "force_end": module.force_end,
        "special_ids": module.ids,
        "jit_compile": module.jit_compile,
        "source_buckets": bucket_widths(module.max_length) if module.jit_compile else None,
        "warmup_requests": len(module.warmup_requests),
    }


def _search_settings(target_tokenizer, length_penalty, force_end, alpha):
    """(length_penalty, force_end, alpha), defaulted (`zoo.decode.defaults`: Hugging Face's
    for a tokenizer with its own special ids, imported Marian models; else GNMT's) and checked."""
    settings = decoding_settings(target_tokenizer, length_penalty, alpha, force_end)
    check_choice("length_penalty", settings.length_penalty, decode.LENGTH_PENALTIES, PREFIX)
    check_number("alpha", settings.alpha, 0, prefix=PREFIX)
    return settings.length_penalty, settings.force_end, float(settings.alpha)
