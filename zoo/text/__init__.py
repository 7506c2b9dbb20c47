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

from zoo.text.ids import (
    ID_SPECS,
    clean_ids,
    lookup_ids,
)
from zoo.text.normalization import (
    NORMALIZATION_FORMS,
    normalize,
    split_words,
)
from zoo.text.special import (
    END_ID,
    END_TOKEN,
    PAD_ID,
    PAD_TOKEN,
    RESERVED_TOKENS,
    START_ID,
    START_TOKEN,
    UNK_ID,
    UNK_TOKEN,
)
from zoo.text.vocabulary import (
    count_words,
    train_wordpiece_vocabulary,
)
from zoo.text.wordpiece import (
    CONFIG_FILENAME,
    VOCAB_FILENAME,
    WordPieceTokenizer,
)
from zoo.text.wordpiece_bpe import (
    SUFFIX_INDICATOR,
)

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
