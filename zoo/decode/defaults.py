"""The decoding policy: which search settings a model gets unless the caller says otherwise.

- The zoo's own models: GNMT's length penalty with α = 0.6 (Wu et al., 2016,
  eq. 14; the value the Transformer paper uses), no forced `[END]`.
- Models whose tokenizer brings its own special ids (imported Marian /
  OPUS-MT models): what Hugging Face's `generate` runs for them, so that they
  reproduce their upstream outputs: its length penalty `log p / |y| ** α` with
  α = 1.0 (`length_penalty=1.0`) and `</s>` forced at the length limit
  (`forced_eos_token_id`).
- A model with no position table (RNNsearch), with no `max_length` from the
  caller or its run, decodes up to `RNN_MAX_LENGTH` tokens (the default
  `max_length` of `zoo.datasets.pipeline.make_translation_dataset`).

`zoo.export` (the SavedModel's signatures) and `zoo.runs` (`translate`,
`evaluate`) both take their settings from here.
"""

import dataclasses

from zoo.text.special import has_own_ids

RNN_MAX_LENGTH = 128


@dataclasses.dataclass(frozen=True)
class DecodingDefaults:
    """Search settings: `length_penalty` (`"gnmt"` or `"hf"`, `zoo.decode.beam_search`),
    its `alpha`, and `force_end` (emit `[END]` at the length limit)."""

    length_penalty: str
    alpha: float
    force_end: bool


GNMT = DecodingDefaults(length_penalty="gnmt", alpha=0.6, force_end=False)
HUGGING_FACE = DecodingDefaults(length_penalty="hf", alpha=1.0, force_end=True)
_ALPHAS = {defaults.length_penalty: defaults.alpha for defaults in (GNMT, HUGGING_FACE)}


def decoding_defaults(target_tokenizer):
    """`HUGGING_FACE` for a target tokenizer with its own special ids, else `GNMT`."""
    return HUGGING_FACE if has_own_ids(target_tokenizer) else GNMT


def decoding_settings(target_tokenizer, length_penalty=None, alpha=None, force_end=None):
    """The settings given, the others defaulted: `length_penalty` and `force_end` from
    `decoding_defaults(target_tokenizer)`, `alpha` the penalty's own (0.6 for `"gnmt"`,
    1.0 for `"hf"`). Values are not checked here (the searches and the export check them).

    Returns:
        a `DecodingDefaults`.
    """
    defaults = decoding_defaults(target_tokenizer)
    if length_penalty is None:
        length_penalty = defaults.length_penalty
    if alpha is None:
        alpha = _ALPHAS.get(length_penalty, defaults.alpha)
    return DecodingDefaults(
        length_penalty=length_penalty,
        alpha=alpha,
        force_end=defaults.force_end if force_end is None else bool(force_end),
    )
