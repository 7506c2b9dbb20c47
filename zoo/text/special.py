"""The reserved tokens, their ids, and sentences as encoder input.

The one place that says how ids are laid out (`zoo.text` learns vocabularies
that start with the reserved tokens; `zoo.decode` starts and ends on their
ids), which ids a tokenizer uses (`special_ids`: its own, as an imported
Marian model's, or these), and how a sentence becomes source ids: its tokens, cut to
`max_length - 1`, then `[END]` (`zoo.datasets.pipeline` in training, `zoo.export` in
the SavedModel, `zoo.runs` in `translate`).
"""

import tensorflow as tf

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


def encode_sources(tokenizer, text, max_length, end_id=END_ID):
    """Strings `(B,)` -> source ids, ragged int32 `(B, (S))`, `S <= max_length`.

    The tokens of each string, cut to `max_length - 1`, then `[END]` (or the
    tokenizer's own end id, e.g. Marian's `</s>`); `.to_tensor()` (0 =
    `[PAD]`, or the tokenizer's pad id) makes the `(B, S)` encoder input, as
    `zoo.runs.padded_sources` does.
    """
    ids = tf.cast(tokenizer.tokenize(text), tf.int32)[:, : max_length - 1]  # (B, (S - 1))
    end = tf.fill([tf.shape(text)[0], 1], tf.constant(end_id, tf.int32))
    return tf.concat([ids, end], axis=1)  # (B, (S))
