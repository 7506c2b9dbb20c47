r"""WordPiece tokenization on tensorflow-text, exportable as a SavedModel.

A `WordPieceTokenizer` turns a batch of strings into ragged integer ids and
back, entirely with TensorFlow ops, so it can run inside a `tf.data` pipeline
and be exported next to a model (Schuster & Nakajima 2012, "Japanese and
Korean voice search"; Wu et al. 2016, "Google's Neural Machine Translation
System", section 4.1).

Text goes through these steps (`normalize` and `split_words`):

1. invalid UTF-8 bytes are replaced by U+FFFD (`tf.strings.unicode_transcode`
   with `errors="replace"`), so broken input never crashes;
2. Unicode normalisation, NFKC by default (`tensorflow_text.normalize_utf8`);
3. control and format characters (`\p{Cc}`, `\p{Cf}`, NUL included) become
   spaces;
4. optional lower-casing (`tf.strings.lower(..., encoding="utf-8")`, which
   keeps accents and "ß": German number words stay readable);
5. splitting on whitespace, keeping punctuation and symbols (BERT's
   delimiters plus `\p{S}`, so emoji and currency signs are words of their
   own) as separate words (`tensorflow_text.regex_split`);
6. WordPiece, greedy longest-match-first (`tensorflow_text.WordpieceTokenizer`):
   a word is split into a first piece and `##`-prefixed continuation pieces.
   A character the vocabulary does not know becomes `[UNK]`, the rest of its
   word is still split into pieces.

Only ops that TF Serving's bundled tensorflow-text registers are used
(`NormalizeUTF8`, `RegexSplitWithOffsets`, `WordpieceTokenizeWithOffsets`,
plus core TensorFlow ops), so a SavedModel of the tokenizer loads with
`import tensorflow_text; tf.saved_model.load(path)` and nothing from this
package.

Reserved tokens, ids fixed: `[PAD]`=0, `[UNK]`=1, `[START]`=2, `[END]`=3.
`tokenize` never emits `[PAD]`, `[START]` or `[END]` (the text "[START]" is
split like any other text); adding them is `zoo.datasets.pipeline`'s job.

Detokenization joins pieces: `##` pieces are glued to the previous piece,
words are separated by one space, then punctuation spacing is restored by
fixed rules: no space before `, . ! ? ; : % ) ] }`, none after `( [ {`, none
around `- / '`, and none around `.` or `,` between two digits. Text written
that way (e.g. "one thousand, two hundred and thirty-four", "5. märz 2024",
"2024-03-05") comes back exactly, after normalisation.

Shape legend: B batch (number of strings), W words, T tokens (ragged).

The modules, one concern each: `normalization` (steps 1-5), `wordpiece_bpe`
(the merge learner), `vocabulary` (`count_words`, `train_wordpiece_vocabulary`),
`ids` (`clean_ids`, `lookup_ids`), `wordpiece` (`WordPieceTokenizer`). Their
public names, and the reserved tokens of `zoo.text.special`, are importable from
`zoo.text`.
"""

import importlib

# The names are loaded on first use (PEP 562): `zoo.text.special` is imported by the model
# families, and importing it must not import tensorflow-text with the tokenizers.
_MODULES = {
    "CONFIG_FILENAME": "zoo.text.wordpiece",
    "END_ID": "zoo.text.special",
    "END_TOKEN": "zoo.text.special",
    "ID_SPECS": "zoo.text.ids",
    "NORMALIZATION_FORMS": "zoo.text.normalization",
    "PAD_ID": "zoo.text.special",
    "PAD_TOKEN": "zoo.text.special",
    "RESERVED_TOKENS": "zoo.text.special",
    "START_ID": "zoo.text.special",
    "START_TOKEN": "zoo.text.special",
    "SUFFIX_INDICATOR": "zoo.text.wordpiece_bpe",
    "UNK_ID": "zoo.text.special",
    "UNK_TOKEN": "zoo.text.special",
    "VOCAB_FILENAME": "zoo.text.wordpiece",
    "WordPieceTokenizer": "zoo.text.wordpiece",
    "clean_ids": "zoo.text.ids",
    "count_words": "zoo.text.vocabulary",
    "lookup_ids": "zoo.text.ids",
    "normalize": "zoo.text.normalization",
    "split_words": "zoo.text.normalization",
    "train_wordpiece_vocabulary": "zoo.text.vocabulary",
}

__all__ = [
    "CONFIG_FILENAME",
    "END_ID",
    "END_TOKEN",
    "ID_SPECS",
    "NORMALIZATION_FORMS",
    "PAD_ID",
    "PAD_TOKEN",
    "RESERVED_TOKENS",
    "START_ID",
    "START_TOKEN",
    "SUFFIX_INDICATOR",
    "UNK_ID",
    "UNK_TOKEN",
    "VOCAB_FILENAME",
    "WordPieceTokenizer",
    "clean_ids",
    "count_words",
    "lookup_ids",
    "normalize",
    "split_words",
    "train_wordpiece_vocabulary",
]


def __getattr__(name):
    """A public name of the modules above, or one of the package's modules (`zoo.text.marian`
    after `import zoo.text`, as when this file imported them all)."""
    if name in _MODULES:
        return getattr(importlib.import_module(_MODULES[name]), name)
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as error:
        if error.name != f"{__name__}.{name}":
            raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
