"""Import Marian (OPUS-MT) checkpoints in Hugging Face's folder layout into the zoo's Transformer.

An OPUS-MT folder holds `config.json` (`"model_type": "marian"`),
`model.safetensors` or `pytorch_model.bin` (weights), `source.spm` and `target.spm` (SentencePiece
models) and `vocab.json` (piece -> Marian id; `target_vocab.json` too when the
vocabularies are separate). A Marian model is the paper's post-norm
Transformer with a few choices the `TransformerConfig` expresses as fields:
swish feed-forward activations, sinusoidal positions in [sin | cos] halves,
√D-scaled embeddings, a `final_logits_bias`, padding id = decoder start id,
`</s>` = id 0, LayerNorm epsilon 1e-5.

    model, source_tokenizer, target_tokenizer = zoo.transformer.marian.import_folder(folder)
    model = zoo.get("transformer-base", weights=folder)  # the same model, compiled
    # Fine-tuning on a TSV with the folder's own tokenizers (`zoo.runs.imported`):
    #   zoo train transformer-base --weights FOLDER --data tsv:PAIRS.tsv

Weight layout (Hugging Face -> zoo; torch `Linear` weights are `(out, in)`):

    model.shared.weight (V, D)                 shared_embedding/token_embedding
    model.{en,de}coder.layers.{i}.self_attn.{q,k,v}_proj.weight (D, D) -> kernel (D, N, H)
    ....self_attn.out_proj.weight (D, D)       -> output_kernel (N, H, D)
    ....encoder_attn.*                         decoder_block_{i}/cross_attention
    ....fc1 (F, D), fc2 (D, F)                 feed_forward inner_dense (D, F), output_dense (F, D)
    ....self_attn_layer_norm, encoder_attn_layer_norm, final_layer_norm
                                               self_attention_norm, cross_attention_norm,
                                               feed_forward_norm
    final_logits_bias (1, V)                   final_logits_bias/bias (V,)
    lm_head.weight (V, D), untied only         output_projection kernel (D, V)

A config the family cannot express is refused with one line naming the field.
"""

import dataclasses
import json
import pathlib

import numpy as np

from zoo import checkpoints, registry, transformer
from zoo.errors import ZooError
from zoo.transformer import TransformerConfig

CONFIG_FILENAME = "config.json"
GENERATION_CONFIG_FILENAME = "generation_config.json"
# transformers' `GenerationConfig.max_length` when neither file sets one.
GENERATE_MAX_LENGTH = 20
WEIGHTS_FILENAME = "model.safetensors"
TORCH_WEIGHTS_FILENAME = "pytorch_model.bin"
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


def read_weights(folder):
    """The folder's tensors as `{name: float32 numpy array}`.

    From `model.safetensors`, else from `pytorch_model.bin` (both read by
    `zoo.checkpoints`, without torch; a pickle holding anything but tensors
    is refused).
    """
    folder = pathlib.Path(folder)
    path = folder / WEIGHTS_FILENAME
    if not path.is_file():
        path = folder / TORCH_WEIGHTS_FILENAME
        if not path.is_file():
            raise FolderError(f"{folder / WEIGHTS_FILENAME}: not found (nor {TORCH_WEIGHTS_FILENAME})")
    try:
        tensors = checkpoints.read(path)
    except ZooError as error:
        raise FolderError(str(error)) from None
    return {name: np.asarray(value, dtype="float32") for name, value in tensors.items()}


def load_weights(model, config, tensors, source="model.safetensors"):
    """Assign Hugging Face Marian tensors to a model built by `zoo.transformer.build(config)`."""
    layers = {layer.name: layer for layer in model.layers}
    d, n = config.d_model, config.num_heads
    h = d // n

    def take(name, shape):
        if name not in tensors:
            raise FolderError(f"{source}: tensor {name} is missing")
        value = tensors[name]
        if value.shape != tuple(shape):
            raise FolderError(
                f"{source}: {name} has shape {value.shape}, config.json implies {tuple(shape)} "
                f"(d_model={d}, num_heads={n}, ffn_dim={config.intermediate_dim})"
            )
        return value

    def attention(layer, prefix):
        for ours, theirs in (("query", "q_proj"), ("key", "k_proj"), ("value", "v_proj")):
            getattr(layer, f"{ours}_kernel").assign(take(f"{prefix}.{theirs}.weight", (d, d)).T.reshape(d, n, h))
            getattr(layer, f"{ours}_bias").assign(take(f"{prefix}.{theirs}.bias", (d,)).reshape(n, h))
        layer.output_kernel.assign(take(f"{prefix}.out_proj.weight", (d, d)).T.reshape(n, h, d))
        layer.output_bias.assign(take(f"{prefix}.out_proj.bias", (d,)))

    def norm(layer, prefix):
        layer.gamma.assign(take(f"{prefix}.weight", (d,)))
        layer.beta.assign(take(f"{prefix}.bias", (d,)))

    def feed_forward(layer, prefix):
        f = config.intermediate_dim
        layer.inner_dense.kernel.assign(take(f"{prefix}.fc1.weight", (f, d)).T)
        layer.inner_dense.bias.assign(take(f"{prefix}.fc1.bias", (f,)))
        layer.output_dense.kernel.assign(take(f"{prefix}.fc2.weight", (d, f)).T)
        layer.output_dense.bias.assign(take(f"{prefix}.fc2.bias", (d,)))

    _load_embeddings(layers, config, take)
    for i in range(config.num_encoder_layers):
        block, prefix = layers[f"encoder_block_{i}"], f"model.encoder.layers.{i}"
        attention(block.self_attention, f"{prefix}.self_attn")
        norm(block.self_attention_norm, f"{prefix}.self_attn_layer_norm")
        feed_forward(block.feed_forward, prefix)
        norm(block.feed_forward_norm, f"{prefix}.final_layer_norm")
    for i in range(config.num_decoder_layers):
        block, prefix = layers[f"decoder_block_{i}"], f"model.decoder.layers.{i}"
        attention(block.self_attention, f"{prefix}.self_attn")
        norm(block.self_attention_norm, f"{prefix}.self_attn_layer_norm")
        attention(block.cross_attention, f"{prefix}.encoder_attn")
        norm(block.cross_attention_norm, f"{prefix}.encoder_attn_layer_norm")
        feed_forward(block.feed_forward, prefix)
        norm(block.feed_forward_norm, f"{prefix}.final_layer_norm")
    bias = tensors.get("final_logits_bias", np.zeros((1, config.target_vocab), "float32"))
    if bias.shape != (1, config.target_vocab):
        raise FolderError(f"{source}: final_logits_bias has shape {bias.shape}, "
                          f"config.json implies {(1, config.target_vocab)}")
    layers["final_logits_bias"].bias.assign(bias[0])
    return model


def _load_embeddings(layers, config, take):
    d = config.d_model
    if config.shared_vocabulary:
        layers["shared_embedding"].embeddings.assign(take("model.shared.weight", (config.vocabulary_size, d)))
    else:
        layers["source_embedding"].embeddings.assign(
            take("model.encoder.embed_tokens.weight", (config.source_vocab, d)))
        layers["target_embedding"].embeddings.assign(
            take("model.decoder.embed_tokens.weight", (config.target_vocab, d)))
    if not config.tie_embeddings:
        layers["output_projection"].kernel.assign(take("lm_head.weight", (config.target_vocab, d)).T)


def build_model(folder, base=None, **overrides):
    """The zoo Transformer with the folder's sizes and weights (uncompiled), and its config."""
    config = transformer_config(folder, base, **overrides)
    tensors = read_weights(folder)  # read before building: a bad file fails fast
    model = transformer.build(config)
    folder = pathlib.Path(folder)
    name = WEIGHTS_FILENAME if (folder / WEIGHTS_FILENAME).is_file() else TORCH_WEIGHTS_FILENAME
    load_weights(model, config, tensors, str(folder / name))
    return model, config


def import_folder(folder, **overrides):
    """Model and tokenizers of a Hugging Face Marian (OPUS-MT) folder.

    Args:
        folder: holds `config.json`, `model.safetensors`, `source.spm`,
            `target.spm` and `vocab.json`.
        **overrides: `TransformerConfig` fields (recipe fields, or ones equal
            to what `config.json` says).

    Returns:
        `(model, source_tokenizer, target_tokenizer)`: an uncompiled
        `keras.Model` (`{"source", "target"}` -> logits `(B, T, V)`) and two
        `zoo.text.marian.MarianTokenizer`s carrying Marian's special ids.

    Raises:
        FolderError (a ZooError) or FileNotFoundError, one line naming the file or field.
    """
    source_tokenizer, target_tokenizer = load_tokenizers(folder)
    model, _ = build_model(folder, **overrides)
    return model, source_tokenizer, target_tokenizer


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


def export_folder(folder, path, version=None, **export_options):
    """Import a Marian folder and write it as a TF Serving SavedModel (`zoo export`'s one call).

    Args:
        folder: the Hugging Face Marian folder.
        path: e.g. `"saved_models/opus-mt-en-de"`; the version goes to `<path>/<version>/`.
        version, **export_options: as `zoo.export` (`beam_size`, `alpha`,
            `max_length`, `length_penalty`, `force_end`). Without `max_length`,
            sources take the whole position table and at most `generate_limit(folder)`
            tokens are generated, as `generate` does.

    Returns:
        `pathlib.Path` of the version directory.
    """
    # The export brings tensorflow-text's ops; `import zoo` (which registers this
    # module's weights hooks) should not.
    from zoo import export  # noqa: PLC0415

    model, source_tokenizer, target_tokenizer = import_folder(folder)
    if export_options.get("max_length") is None and export_options.get("max_new_tokens") is None:
        export_options["max_new_tokens"] = generate_limit(folder)
    return export.export(model, path, version, tokenizer=source_tokenizer,
                         target_tokenizer=target_tokenizer, **export_options)


def load_tokenizers(folder):
    """`(source, target)` tokenizers of a Hugging Face Marian folder (its config.json gives the ids).

    Two `zoo.text.marian.MarianTokenizer`s (`source.spm` and `target.spm`,
    ids from `vocab.json`, or `target_vocab.json` for the target when the
    vocabularies are separate), each checked to fit config.json's vocabulary.
    """
    # The tokenizer runs tensorflow-text's SentencePiece op: loaded when a folder's
    # tokenizers are, not by `import zoo`.
    from zoo.text import marian as marian_tokenizer  # noqa: PLC0415

    folder = pathlib.Path(folder)
    config = read_config(folder)
    fields = transformer_fields(config)
    separate = not config.get("share_encoder_decoder_embeddings", True)
    ids = {name: fields[name] for name in ("pad_id", "end_id", "start_id")}  # the model's
    sides = (("source", "source.spm", marian_tokenizer.VOCAB_FILENAME,
              fields["source_vocabulary_size"] or fields["vocabulary_size"]),
             ("target", "target.spm", "target_vocab.json" if separate else marian_tokenizer.VOCAB_FILENAME,
              fields["target_vocabulary_size"] or fields["vocabulary_size"]))
    vocabularies = {}
    tokenizers = []
    for side, model_file, vocab_file, size in sides:
        if vocab_file not in vocabularies:
            vocabularies[vocab_file] = marian_tokenizer.read_vocab(folder / vocab_file)
        tokenizer = marian_tokenizer.MarianTokenizer(
            folder / model_file, vocabularies[vocab_file], **ids, name=f"{side}_tokenizer")
        tokenizer.vocab_file = str(folder / vocab_file)
        if tokenizer.vocab_size > size:
            raise FolderError(f"{tokenizer.vocab_file}: {tokenizer.vocab_size} ids, but "
                              f"config.json's {side} vocabulary has {size}")
        tokenizers.append(tokenizer)
    return tuple(tokenizers)


# `zoo.get("transformer-base", weights=FOLDER)` builds the model from the folder; `zoo train
# transformer-base --weights FOLDER` fine-tunes it with the folder's tokenizers.
registry.register_weights(TransformerConfig, import_weights=build_model,
                          import_config=transformer_config, import_tokenizers=load_tokenizers)
