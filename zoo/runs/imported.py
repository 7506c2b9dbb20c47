"""Fine-tuning an imported model: a run that starts from a folder its family imports.

    zoo train transformer-base --weights opus-mt-en-de --data tsv:pairs.tsv

A Hugging Face Marian / OPUS-MT folder (`zoo.transformer.weights.marian`) fixes the model's
sizes and special ids (`config.json`: `</s>` = 0, padding = decoder start =
V - 1) and brings its own tokenizers (`source.spm`, `target.spm`,
`vocab.json`). Such a run

* builds its config from the folder (`registry.weights_overrides`): a
  `--set` field that contradicts the folder is refused with one line naming
  it; dropout rates and the training recipe may change;
* keeps the folder's two tokenizers, one per side, in `tokenizer/source/`
  and `tokenizer/target/` of the run directory (`separate_vocabularies` is
  True, `tokenizer` is `"marian"` in `config.json`), so that `zoo evaluate`,
  `zoo predict`, `zoo export` and resuming read them back like a learned
  run's;
* encodes its data with them (`zoo.datasets.pipeline`: source `x + </s>`, decoder
  input `<pad> + y`, labels `y + </s>`, padded with `<pad>`, which the loss
  ignores), and decodes with their special ids, Hugging Face's length
  penalty (alpha 1.0) and a forced `</s>` at the length limit
  (`decoding_options`; the policy is `zoo.decode.defaults`).

`training.weights` in `config.json` records the folder.
"""

from zoo import registry
from zoo.decode.defaults import decoding_settings
from zoo.errors import ZooError
from zoo.text import tokenizers
from zoo.text.special import special_ids


def is_imported(name, weights):
    """Whether a new run of `name` from `weights` fine-tunes a model its family imports."""
    family = registry.family(name)
    return weights is not None and family is not None and family.import_weights is not None


def check_options(options, fine_tuning):
    """Refuse, in one line, the options a new run's tokenizers rule out: a learned kind
    for an imported model (`fine_tuning`), the imported kind for any other."""
    if not fine_tuning:
        if options.tokenizer == tokenizers.IMPORTED:
            raise ZooError(
                f"tokenizer={options.tokenizer!r} comes with a Marian folder as weights (its own "
                f"tokenizers); to learn one, choose {' or '.join(tokenizers.TOKENIZERS)}"
            )
        return
    if options.tokenizer not in (None, tokenizers.IMPORTED):
        raise ZooError(
            f"tokenizer={options.tokenizer!r} cannot be used with weights={options.weights!r}: "
            "a model imported from a folder is fine-tuned with the folder's own tokenizers; "
            "leave --tokenizer out"
        )
    if options.separate_vocabularies is False:
        raise ZooError(
            f"separate_vocabularies=False cannot be used with weights={options.weights!r}: "
            "the folder's source and target tokenizers are kept, one per side; leave it out"
        )


def training_section(section):
    """`config.json`'s "training" of an imported run: its two tokenizers, one per side."""
    return {**section, "separate_vocabularies": True, "tokenizer": tokenizers.IMPORTED}


def folder_tokenizers(name, weights):
    """`(source, target)`: the tokenizers of the folder, as `zoo.transformer.weights.marian.load_tokenizers` reads them."""
    return registry.family(name).import_tokenizers(weights)


def decoding_options(target_tokenizer, alpha=None):
    """Keyword arguments of `zoo.decode`'s `greedy_decode` / `beam_search` for a run.

    The target tokenizer's special ids (`zoo.text.special.special_ids`) and the
    search settings of `zoo.decode.defaults.decoding_settings`: a tokenizer with
    its own ids (an imported Marian model's) also gets what reproduces Hugging
    Face's `generate`: `force_end=True` and `length_penalty="hf"` with alpha 1.0
    by default; the zoo's own runs GNMT's penalty, alpha 0.6.
    """
    ids = special_ids(target_tokenizer)
    settings = decoding_settings(target_tokenizer, alpha=alpha)
    return {
        "start_id": ids["start"], "end_id": ids["end"], "pad_id": ids["pad"],
        "force_end": settings.force_end,
        "length_penalty": settings.length_penalty,
        "alpha": settings.alpha,
    }
