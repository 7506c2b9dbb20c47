"""What a Marian (OPUS-MT) folder's `config.json` says, as the zoo's `TransformerConfig`.

`read_config` checks that the family can express the file (a config it cannot
is refused with one line naming the field), `transformer_fields` maps its
fields to `TransformerConfig`'s (`d_model`, `encoder_layers`, ... ->
`d_model`, `num_encoder_layers`, ...; Marian's fixed choices: post-norm,
[sin | cos] sinusoidal positions, LayerNorm epsilon 1e-5, a final logits bias),
`transformer_config` builds the config, and `generate_limit` reads how many
tokens transformers' `generate` would return (`generation_config.json`).
`zoo.transformer.weights.marian` imports the whole folder with them.
"""

import dataclasses
import json
import pathlib

from zoo.errors import ZooError
from zoo.transformer.config import TransformerConfig

CONFIG_FILENAME = "config.json"
GENERATION_CONFIG_FILENAME = "generation_config.json"
# transformers' `GenerationConfig.max_length` when neither file sets one.
GENERATE_MAX_LENGTH = 20
ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "swish": "swish", "silu": "swish"}
# Fields of older Marian/BART configs and the only values the family can express.
_FIXED_FIELDS = {
    "normalize_before": False,
    "normalize_embedding": False,
    "add_final_layer_norm": False,
    "static_position_embeddings": True,
    "add_bias_logits": False,
    "is_decoder": False,
}
_ZERO_FIELDS = ("activation_dropout", "encoder_layerdrop", "decoder_layerdrop")
# Encoder and decoder fields the family has one value for.
_EQUAL_FIELDS = (("encoder_attention_heads", "decoder_attention_heads"),
                 ("encoder_ffn_dim", "decoder_ffn_dim"))
_SIZE_FIELDS = ("vocab_size", "d_model", "encoder_layers", "decoder_layers",
                "encoder_attention_heads", "encoder_ffn_dim", "max_position_embeddings",
                "pad_token_id", "eos_token_id")


class FolderError(ZooError):
    """A folder that is not an importable Marian checkpoint (the message names the file/field)."""


def _load_json(path):
    if not path.is_file():
        raise FolderError(f"{path}: not found (a Hugging Face Marian folder has config.json)")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise FolderError(f"{path}: not valid JSON ({error})") from None
    if not isinstance(config, dict):
        raise FolderError(f"{path}: not a JSON object")
    return config


# What the family cannot express, one rule a concern: each gives the message of the
# first field it refuses (after the file's path), or None.


def _model_type(config):
    model_type = config.get("model_type")
    if model_type != "marian":
        return f"model_type={model_type!r} is not supported; only 'marian' is"
    return None


def _fixed_fields(config):
    for name, value in _FIXED_FIELDS.items():
        if name in config and config[name] != value:
            return (f"{name}={config[name]!r} cannot be expressed by the zoo's Transformer "
                    f"(it supports {name}={value!r} only)")
    for name in _ZERO_FIELDS:
        if config.get(name, 0.0) not in (0, 0.0):
            return f"{name}={config[name]!r} is not supported (only 0)"
    return None


def _equal_sides(config):
    for encoder, decoder in _EQUAL_FIELDS:
        if config.get(encoder) != config.get(decoder):
            return (f"{encoder}={config.get(encoder)!r} differs from "
                    f"{decoder}={config.get(decoder)!r}; the zoo's Transformer needs them equal")
    return None


def _activation(config):
    activation = config.get("activation_function", "gelu")
    if activation not in ACTIVATIONS:
        return (f"activation_function={activation!r} is not supported "
                f"(one of {', '.join(ACTIVATIONS)})")
    return None


def _sizes(config):
    for name in _SIZE_FIELDS:
        value = config.get(name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            return f"{name}={value!r} must be a non-negative integer"
    return None


_RULES = (_model_type, _fixed_fields, _equal_sides, _activation, _sizes)


def read_config(folder):
    """`config.json` of a Marian folder as a dict, after checking that the family can express it."""
    path = pathlib.Path(folder) / CONFIG_FILENAME
    config = _load_json(path)
    for rule in _RULES:
        message = rule(config)
        if message is not None:
            raise FolderError(f"{path}: {message}")
    return config


def transformer_fields(config):
    """The `TransformerConfig` fields that a Marian `config.json` (a dict) fixes."""
    shared = config.get("share_encoder_decoder_embeddings", True)
    vocabulary = config["vocab_size"]
    target_vocabulary = config.get("decoder_vocab_size") or vocabulary
    if shared and target_vocabulary != vocabulary:
        raise FolderError(
            f"config.json: decoder_vocab_size={target_vocabulary} differs from "
            f"vocab_size={vocabulary} with share_encoder_decoder_embeddings=true"
        )
    fields = dict(
        vocabulary_size=vocabulary,
        source_vocabulary_size=None if shared else vocabulary,
        target_vocabulary_size=None if shared else target_vocabulary,
        tie_embeddings=bool(config.get("tie_word_embeddings", True)),
        num_encoder_layers=config["encoder_layers"],
        num_decoder_layers=config["decoder_layers"],
        d_model=config["d_model"],
        num_heads=config["encoder_attention_heads"],
        intermediate_dim=config["encoder_ffn_dim"],
        dropout=float(config.get("dropout", 0.1)),
        attention_dropout=float(config.get("attention_dropout", 0.0)),
        max_length=config["max_position_embeddings"],
        norm_first=False,
        positional="sinusoidal",
        layer_norm_epsilon=1e-5,  # torch.nn.LayerNorm's default
        activation=ACTIVATIONS[config.get("activation_function", "gelu")],
        positional_layout="halves",
        scale_embeddings=bool(config.get("scale_embedding", False)),
        final_logits_bias=True,
        pad_id=config["pad_token_id"],
        start_id=config.get("decoder_start_token_id", config["pad_token_id"]),
        end_id=config["eos_token_id"],
    )
    return fields


def transformer_config(folder, base=None, **overrides):
    """The `TransformerConfig` of a Marian folder.

    Args:
        folder: the Hugging Face folder.
        base: a `TransformerConfig` whose other fields (the training recipe:
            label smoothing, warm-up...) are kept; default the class defaults.
        **overrides: further fields; one that `config.json` fixes must agree with it.
    """
    fields = transformer_fields(read_config(folder))
    for name, value in overrides.items():
        if name in fields and value != fields[name] and name not in ("dropout", "attention_dropout"):
            raise FolderError(
                f"{name}={value!r} differs from {pathlib.Path(folder) / CONFIG_FILENAME}'s "
                f"{name}={fields[name]!r}; an imported model takes its sizes from the folder"
            )
    fields.update(overrides)
    base = base if base is not None else TransformerConfig()
    try:
        return dataclasses.replace(base, **fields)
    except ZooError as error:
        raise FolderError(f"{pathlib.Path(folder) / CONFIG_FILENAME}: {error}") from None


def generate_limit(folder):
    """The most tokens `generate` returns for a folder by default, `</s>` included.

    transformers' `generate` stops at `max_length` tokens counting the decoder start
    token (its docs: "the length of the input prompt + max_new_tokens"; an
    encoder-decoder's prompt is the start token), so it generates at most
    `max_length - 1`, and with `forced_eos_token_id` the last of them is `</s>`.
    `max_length` is `generation_config.json`'s, else `config.json`'s, else
    transformers' default 20 (`GENERATE_MAX_LENGTH`); the result is at most the
    position table (`max_position_embeddings`).
    """
    folder = pathlib.Path(folder)
    config = read_config(folder)
    generation = folder / GENERATION_CONFIG_FILENAME
    settings = _load_json(generation) if generation.is_file() else {}
    max_length = settings.get("max_length", config.get("max_length", GENERATE_MAX_LENGTH))
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 2:
        raise FolderError(f"{generation if 'max_length' in settings else folder / CONFIG_FILENAME}: "
                          f"max_length={max_length!r} must be an integer >= 2")
    return min(max_length - 1, config["max_position_embeddings"])
