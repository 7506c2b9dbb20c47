"""What `zoo.export(..., format="ctranslate2")` writes: the CTranslate2 model, the tokenizers
beside it and the metadata.

    <path>/<version>/
        model.bin, config.json            the CTranslate2 model (`zoo.export.ctranslate2`)
        shared_vocabulary.json            or source_vocabulary.json and target_vocabulary.json
        tokenizer/                        the run's tokenizer, as `save` writes it
                                          (tokenizer/source/, tokenizer/target/ when separate):
                                          sentencepiece.model, Marian's marian.spm and
                                          vocab.json, or WordPiece's vocab.txt
        assets.extra/zoo_export.json      format, tokenizer, special ids and tokens, search
                                          settings, `translate_options`

Written into a temporary directory beside the root and renamed when complete, as every export
(`zoo.export`). `translate_options` are the keyword arguments of
`ctranslate2.Translator.translate_batch` that decode as the zoo's export does:
`beam_size` and the length penalty `alpha`, `return_end_token=True` (so that the penalty's
length counts the end token, as the zoo's does; the caller drops it), `min_decoding_length=0`
(an empty translation is allowed), `max_input_length` = `max_length` (CTranslate2 keeps at most
`max_length - 1` tokens, then appends the end token: the zoo's source) and `max_decoding_length`
(the export's `max_new_tokens`; one less with `force_end`, whose last token is the forced end).

`quantize="int8"`: the weights are saved as int8 in model.bin (`spec.optimize(quantization=
"int8")`: one scale per output row of each linear layer and per embedding row), so
CTranslate2 computes in int8 with `compute_type="default"`; a float32 export loaded with
`compute_type="int8"` holds the same int8 weights (CTranslate2 quantizes them when it loads).
"""

import keras

from keras_attention.checks import check_int
from zoo.export import ctranslate2 as specs
from zoo.export.formats import CTRANSLATE2
from zoo.export.translation import PREFIX, _lengths, _search_settings, _tokenizers
from zoo.text import tokenizers
from zoo.text.special import UNK_ID, special_ids

TOKENIZER_DIRECTORY = "tokenizer"
MODEL_FILES = ("model.bin", "config.json")
# The SentencePiece model inside a saved tokenizer folder, by `zoo.text.tokenizers.kind`.
SENTENCEPIECE_FILES = {"sentencepiece": "sentencepiece.model", "marian": "marian.spm"}
QUANTIZATION_SCHEME = (
    "CTranslate2 int8, saved in model.bin (spec.optimize(quantization='int8')): int8 weights "
    "with one float scale per output row of each linear layer and per embedding row; "
    "compute_type 'default' computes with them in int8"
)


def prepare(model, family, tokenizer, target_tokenizer, beam_size, alpha, max_length,
                       length_penalty, force_end, max_new_tokens, quantize):
    """Check the arguments and build the spec; return `(write(directory), metadata)`."""
    specs.check_model(model, family)
    source_tokenizer, target_tokenizer = _tokenizers(model, family, tokenizer, target_tokenizer)
    check_int("beam_size", beam_size, 1, prefix=PREFIX)
    length_penalty, force_end, alpha = _search_settings(target_tokenizer, length_penalty,
                                                        force_end, alpha)
    max_length, max_new_tokens = _lengths(model, family, max_length, max_new_tokens)
    ids = special_ids(target_tokenizer)
    structure, values = specs.variables(model, ids["pad"])
    source_tokens = specs.vocabulary(source_tokenizer, len(values["encoder/embeddings_0/weight"]))
    target_tokens = specs.vocabulary(target_tokenizer, len(values["decoder/embeddings/weight"]))
    unk_id = getattr(target_tokenizer, "unk_id", UNK_ID)
    model_config = specs.config(source_tokens, target_tokens, ids, unk_id,
                                structure["layer_norm_epsilon"])
    spec = specs.build_spec(structure, values, source_tokens, target_tokens, model_config)
    spec.optimize(quantization="int8" if quantize else None)
    shared_tokenizer = target_tokenizer is source_tokenizer
    tokenizer_dirs = ({"source": TOKENIZER_DIRECTORY, "target": TOKENIZER_DIRECTORY}
                      if shared_tokenizer else
                      {side: f"{TOKENIZER_DIRECTORY}/{side}" for side in ("source", "target")})

    def write(directory):
        spec.save(str(directory))
        source_tokenizer.save(directory / tokenizer_dirs["source"])
        if not shared_tokenizer:
            target_tokenizer.save(directory / tokenizer_dirs["target"])

    vocabularies = (["shared_vocabulary.json"] if source_tokens == target_tokens
                    else ["source_vocabulary.json", "target_vocabulary.json"])
    options = translate_options(beam_size, alpha, max_length, max_new_tokens, force_end)
    metadata = {
        "format": CTRANSLATE2,
        "files": [*MODEL_FILES, *vocabularies],
        "tokenizer": _tokenizer_metadata(tokenizers.kind(source_tokenizer), tokenizer_dirs),
        "special_ids": ids,
        "special_tokens": {"pad": target_tokens[ids["pad"]], "start": model_config["bos_token"],
                           "end": model_config["eos_token"], "unk": model_config["unk_token"]},
        "max_length": max_length,
        "max_new_tokens": max_new_tokens,
        "beam_size": beam_size,
        "alpha": alpha,
        "length_penalty": length_penalty,
        "force_end": force_end,
        "translate_options": options,
        "model": structure,
        "pad_logit_bias": specs.PAD_LOGIT_BIAS,
        "quantization_scheme": QUANTIZATION_SCHEME if quantize else None,
        "runtime": "ctranslate2",
        "converter": {"keras": keras.__version__, "ctranslate2": specs.version()},
    }
    return write, metadata


def _tokenizer_metadata(kind, tokenizer_dirs):
    """`zoo_export.json`'s `tokenizer`: its kind, its directories and SentencePiece models."""
    return {
        "kind": kind,
        "directories": tokenizer_dirs,
        "sentencepiece_models": ({side: f"{path}/{SENTENCEPIECE_FILES[kind]}"
                                  for side, path in tokenizer_dirs.items()}
                                 if kind in SENTENCEPIECE_FILES else None),
        "source": "the tokenizer's pieces; CTranslate2 keeps max_input_length - 1 of them "
                  "and appends the end token (add_source_eos), as the zoo's source",
    }


def translate_options(beam_size, alpha, max_length, max_new_tokens, force_end):
    """`ctranslate2.Translator.translate_batch`'s keyword arguments for the zoo's search (see
    the module docstring)."""
    return {
        "beam_size": beam_size,
        "length_penalty": alpha,
        "max_input_length": max_length,  # the end token included
        "max_decoding_length": max(1, max_new_tokens - 1) if force_end else max_new_tokens,
        "min_decoding_length": 0,
        "return_end_token": True,
    }
