"""Text normalisation and pre-tokenization: steps 1-5 of `zoo.text` (`normalize`, `split_words`).

Shared by the WordPiece learner and the tokenizer, so a vocabulary is learned
on the very words the tokenizer will look up.
"""

import tensorflow as tf
import tensorflow_text as tf_text

from zoo.errors import ZooError

NORMALIZATION_FORMS = ("NFC", "NFKC", "NFD", "NFKD")

# BERT's word delimiters (tensorflow_text/python/ops/bert_tokenizer.py:
# whitespace, ASCII punctuation and symbols, \p{P}, CJK ideographs) plus every
# Unicode symbol (\p{S}: emoji, currency, maths).
_PUNCTUATION_PATTERN = "|".join(
    [
        r"[!-/]",
        r"[:-@]",
        r"[\[-`]",
        r"[{-~]",
        r"[\p{P}]",
        r"[\p{S}]",
        r"[\x{4E00}-\x{9FFF}]",
        r"[\x{3400}-\x{4DBF}]",
        r"[\x{20000}-\x{2A6DF}]",
        r"[\x{2A700}-\x{2B73F}]",
        r"[\x{2B740}-\x{2B81F}]",
        r"[\x{2B820}-\x{2CEAF}]",
        r"[\x{F900}-\x{FAFF}]",
        r"[\x{2F800}-\x{2FA1F}]",
    ]
)
_DELIMITER_PATTERN = r"\s+|" + _PUNCTUATION_PATTERN


def check_options(lower_case, normalization_form):
    """Raise a ValueError naming the option when `lower_case` or `normalization_form` is bad."""
    if not isinstance(lower_case, bool):
        raise ZooError(f"lower_case must be a bool; received lower_case={lower_case!r}")
    if normalization_form is not None and normalization_form not in NORMALIZATION_FORMS:
        raise ZooError(
            f"normalization_form must be one of {NORMALIZATION_FORMS} or None; "
            f"received normalization_form={normalization_form!r}"
        )


def normalize(strings, lower_case=True, normalization_form="NFKC"):
    """Repair, normalise and optionally lower-case UTF-8 strings (steps 1-4).

    Args:
        strings: `tf.string` tensor of any shape.
        lower_case: lower-case with `tf.strings.lower(encoding="utf-8")`.
        normalization_form: "NFKC" (default), "NFC", "NFD", "NFKD" or None.

    Returns:
        `tf.string` tensor of the same shape.
    """
    check_options(lower_case, normalization_form)
    strings = tf.strings.unicode_transcode(
        strings, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD
    )
    if normalization_form is not None:
        strings = tf_text.normalize_utf8(strings, normalization_form)
    # Before lower-casing: tf.strings.lower stops at a NUL byte.
    strings = tf.strings.regex_replace(strings, r"\p{Cc}|\p{Cf}", " ")
    if lower_case:
        strings = tf.strings.lower(strings, encoding="utf-8")
    return strings


def split_words(strings, lower_case=True, normalization_form="NFKC"):
    """Normalise `strings` (B,) and split them into words (B, (W)).

    Whitespace is dropped; every punctuation mark or symbol is a word of its
    own. This is the pre-tokenization both `train_wordpiece_vocabulary` and
    `WordPieceTokenizer.tokenize` use.
    """
    strings = normalize(strings, lower_case, normalization_form)
    return tf_text.regex_split(strings, _DELIMITER_PATTERN, _PUNCTUATION_PATTERN)


