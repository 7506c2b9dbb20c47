"""The reserved tokens, their ids, and sentences as encoder input.

The one place that says how ids are laid out (`zoo.text` learns vocabularies
that start with the reserved tokens; `zoo.decode` starts and ends on their
ids), which ids a tokenizer uses (`special_ids`: its own, as an imported
Marian model's, or these), and how a sentence becomes source ids: its tokens, cut to
`max_length - 1`, then `[END]` (`zoo.datasets.pipeline` in training, `zoo.export` in
the SavedModel, `zoo.runs` in `translate`).
"""

PAD_TOKEN = "[PAD]"
UNK_TOKEN = "[UNK]"
START_TOKEN = "[START]"
END_TOKEN = "[END]"
RESERVED_TOKENS = (PAD_TOKEN, UNK_TOKEN, START_TOKEN, END_TOKEN)
PAD_ID, UNK_ID, START_ID, END_ID = 0, 1, 2, 3


def has_own_ids(tokenizer):
    """Whether `tokenizer` brings its own special ids (a `special_ids` dict, as
    `zoo.text.marian.MarianTokenizer`: `</s>` = 0, padding = decoder start = V - 1)."""
    return getattr(tokenizer, "special_ids", None) is not None


def special_ids(tokenizer):
    """`{"pad", "start", "end"}` ids of a tokenizer: its own `special_ids`, each missing
    one (and every one, for the zoo's tokenizers) the zoo's 0, 2, 3.

    What training (`zoo.datasets.pipeline`), decoding a run (`zoo.runs`) and the
    export (`zoo.export`) all read, so that the three agree.
    """
    own = getattr(tokenizer, "special_ids", None) or {}
    return {"pad": own.get("pad", PAD_ID), "start": own.get("start", START_ID),
            "end": own.get("end", END_ID)}
