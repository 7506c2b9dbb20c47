"""Import Marian (OPUS-MT) checkpoints in Hugging Face's folder layout into the zoo's Transformer.

An OPUS-MT folder holds `config.json` (`"model_type": "marian"`),
`model.safetensors` or `pytorch_model.bin` (weights), `source.spm` and `target.spm` (SentencePiece
models) and `vocab.json` (piece -> Marian id; `target_vocab.json` too when the
vocabularies are separate). A Marian model is the paper's post-norm
Transformer with a few choices the `TransformerConfig` expresses as fields:
swish feed-forward activations, sinusoidal positions in [sin | cos] halves,
√D-scaled embeddings, a `final_logits_bias`, padding id = decoder start id,
`</s>` = id 0, LayerNorm epsilon 1e-5.

    model, source_tokenizer, target_tokenizer = zoo.transformer.weights.marian.import_folder(folder)
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

`config.json` becomes the `TransformerConfig` in `zoo.transformer.weights.marian_config`
(a config the family cannot express is refused with one line naming the field);
this module reads the weights and the tokenizers, and imports and exports the folder.
"""

import pathlib
import warnings

import numpy as np

import zoo
from zoo import checkpoints, text, transformer
from zoo.errors import ZooError
from zoo.transformer.weights.marian_config import (
    ACTIVATIONS,
    CONFIG_FILENAME,
    GENERATE_MAX_LENGTH,
    GENERATION_CONFIG_FILENAME,
    FolderError,
    generate_limit,
    read_config,
    transformer_config,
    transformer_fields,
)

# The config half (`zoo.transformer.weights.marian_config`) is importable from here too, as
# it was before it had a module of its own.
__all__ = [
    "ACTIVATIONS",
    "CONFIG_FILENAME",
    "GENERATE_MAX_LENGTH",
    "GENERATION_CONFIG_FILENAME",
    "TORCH_WEIGHTS_FILENAME",
    "WEIGHTS_FILENAME",
    "FolderError",
    "build_model",
    "export_folder",
    "generate_limit",
    "import_folder",
    "load_tokenizers",
    "load_weights",
    "read_config",
    "read_weights",
    "transformer_config",
    "transformer_fields",
]

WEIGHTS_FILENAME = "model.safetensors"
TORCH_WEIGHTS_FILENAME = "pytorch_model.bin"


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
    bias = tensors.get("final_logits_bias")
    if bias is None:  # transformers' MarianMTModel loads such a file with its buffer's zeros too
        warnings.warn(f"{source}: no final_logits_bias; the logits get no bias (zeros), as "
                      "transformers' MarianMTModel gives them", stacklevel=2)
        bias = np.zeros((1, config.target_vocab), "float32")
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


def export_folder(folder, path, version=None, **export_options):
    """Import a Marian folder and write it as a TF Serving SavedModel (`zoo export`'s one call).

    Args:
        folder: the Hugging Face Marian folder.
        path: e.g. `"saved_models/opus-mt-en-de"`; the version goes to `<path>/<version>/`.
        version, **export_options: as `zoo.export` (`beam_size`, `alpha`,
            `max_length`, `length_penalty`, `force_end`; `format="ctranslate2"`: a
            CTranslate2 model directory instead of a SavedModel). Without `max_length`,
            sources take the whole position table and at most `generate_limit(folder)`
            tokens are generated, as `generate` does.

    Returns:
        `pathlib.Path` of the version directory.
    """
    model, source_tokenizer, target_tokenizer = import_folder(folder)
    if export_options.get("max_length") is None and export_options.get("max_new_tokens") is None:
        export_options["max_new_tokens"] = generate_limit(folder)
    # `zoo.export`, loaded on its first use by the package `zoo` (its `_LAZY`): the export
    # brings tensorflow-text's ops, which `import zoo` (that registers this module's weights
    # hooks) should not, and sits above the model families.
    return zoo.export(model, path, version, tokenizer=source_tokenizer,
                         target_tokenizer=target_tokenizer, **export_options)


def load_tokenizers(folder):
    """`(source, target)` tokenizers of a Hugging Face Marian folder (its config.json gives the ids).

    Two `zoo.text.marian.MarianTokenizer`s (`source.spm` and `target.spm`,
    ids from `vocab.json`, or `target_vocab.json` for the target when the
    vocabularies are separate), each checked to fit config.json's vocabulary.
    """
    # `text.marian` (tensorflow-text's SentencePiece op) is loaded here, on first use, by the
    # package `zoo.text` (its `__getattr__`): `import zoo`, which registers this module's
    # weights hooks, works without TensorFlow (a JAX process) and should not load it.
    folder = pathlib.Path(folder)
    config = read_config(folder)
    fields = transformer_fields(config)
    separate = not config.get("share_encoder_decoder_embeddings", True)
    ids = {name: fields[name] for name in ("pad_id", "end_id", "start_id")}  # the model's
    sides = (("source", "source.spm", text.marian.VOCAB_FILENAME,
              fields["source_vocabulary_size"] or fields["vocabulary_size"]),
             ("target", "target.spm", "target_vocab.json" if separate else text.marian.VOCAB_FILENAME,
              fields["target_vocabulary_size"] or fields["vocabulary_size"]))
    vocabularies = {}
    tokenizers = []
    for side, model_file, vocab_file, size in sides:
        if vocab_file not in vocabularies:
            vocabularies[vocab_file] = text.marian.read_vocab(folder / vocab_file)
        tokenizer = text.marian.MarianTokenizer(
            folder / model_file, vocabularies[vocab_file], **ids, name=f"{side}_tokenizer")
        tokenizer.vocab_file = str(folder / vocab_file)
        if tokenizer.vocab_size > size:
            raise FolderError(f"{tokenizer.vocab_file}: {tokenizer.vocab_size} ids, but "
                              f"config.json's {side} vocabulary has {size}")
        tokenizers.append(tokenizer)
    return tuple(tokenizers)

