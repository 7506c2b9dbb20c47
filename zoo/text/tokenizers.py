"""The zoo's two tokenizers, chosen by name: learn one, or load whichever a folder holds.

* `"sentencepiece"` (`zoo.text.sentencepiece`): cased, reversible
  subwords; the default for new translation runs.
* `"wordpiece"` (`zoo.text`): NFKC, lower-cased WordPiece, as earlier runs
  used.

Both run inside the TensorFlow graph, share the reserved ids `[PAD]`=0,
`[UNK]`=1, `[START]`=2, `[END]`=3 and the methods `tokenize`, `detokenize`,
`lookup`, `vocab_size`, `save` and `load`, so the pipeline, the decoders and
the exports take either. A third kind is only loaded, never learned:
`"marian"` (`zoo.text.marian`), the tokenizers of an imported OPUS-MT
model, with its own special ids. A saved folder says which it holds in
`tokenizer.json` (`"type"`); one without a type is a WordPiece folder.
"""

import json
import pathlib

from zoo import text
from zoo.errors import ZooError
from zoo.text.marian import MarianTokenizer
from zoo.text.sentencepiece import SentencePieceTokenizer

TOKENIZERS = ("sentencepiece", "wordpiece")
DEFAULT = "sentencepiece"
IMPORTED = "marian"  # loaded with an imported model's folder, never learned


def check_name(name, imported=False):
    """`name` if it is a tokenizer kind that can be learned (or, with `imported`, `"marian"`)."""
    known = TOKENIZERS + ((IMPORTED,) if imported else ())
    if name not in known:
        raise ZooError(f"tokenizer must be one of {', '.join(known)}; received {name!r}")
    return name


def learn(name, sentences, vocab_size, progress=False):
    """A tokenizer of kind `name` learned on `sentences`, with at most `vocab_size` tokens."""
    if check_name(name) == "sentencepiece":
        return SentencePieceTokenizer.from_corpus(sentences, vocab_size)
    return text.WordPieceTokenizer.from_corpus(sentences, vocab_size, progress=progress)


def kind(tokenizer):
    """`"sentencepiece"`, `"wordpiece"` or `"marian"` for a tokenizer object."""
    if isinstance(tokenizer, MarianTokenizer):
        return IMPORTED
    return "sentencepiece" if isinstance(tokenizer, SentencePieceTokenizer) else "wordpiece"


def load(directory):
    """The tokenizer saved in `directory` (`tokenizer.json` says which kind)."""
    config_path = pathlib.Path(directory) / text.CONFIG_FILENAME
    if not config_path.is_file():
        raise FileNotFoundError(f"tokenizer config not found: {config_path}")
    try:
        saved_type = json.loads(config_path.read_text(encoding="utf-8")).get("type", "wordpiece")
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
        raise ZooError(f"{config_path} is corrupt: not a JSON object") from None
    if saved_type == IMPORTED:  # imported with a Marian model (zoo.transformer.weights.marian)
        return MarianTokenizer.load(directory)
    if check_name(saved_type) == "sentencepiece":
        return SentencePieceTokenizer.load(directory)
    return text.WordPieceTokenizer.load(directory)
