"""A zoo Transformer as a CTranslate2 model directory: `zoo.export(model, path, tokenizer=...,
format="ctranslate2")`, `zoo export RUN --format ctranslate2`, `zoo import FOLDER --format
ctranslate2` (issue #51).

The model is rebuilt from the zoo's Keras weights with `ctranslate2.specs` (a `TransformerSpec`
of a `TransformerEncoderSpec` and a `TransformerDecoderSpec`), no other converter involved.
`variables(model, pad_id)` reads the weights into CTranslate2's layout, by the spec's variable names
(`encoder/layer_0/self_attention/linear_0/weight`, ...), with numpy alone; `build_spec` fills
a spec with them. What the zoo's config chooses, the spec says:

    norm_first                 pre_norm (and the encoder's and decoder's final layer norm)
    activation                 RELU, GELU (erf, Keras' default) or SWISH
    layer_norm_epsilon         config.json's layer_norm_epsilon
    scale_embeddings           scale_embeddings: sqrt(d_model), or 1.0 (none)
    positions                  position_encodings/encodings: the zoo's own table, learned or
                               sinusoidal (interleaved or halves, position 0 first; CTranslate2's
                               generated table would start at 1, in halves)
    shared vocabulary          one matrix for encoder and decoder embeddings (CTranslate2 aliases
                               equal variables when it saves them)
    tie_embeddings             decoder/projection/weight = the target embedding, else the
                               output projection's kernel, transposed
    final_logits_bias          decoder/projection/bias (zeros without)

Attention: the query, key and value kernels `(D, N, H)` become torch-layout `(N·H, D)`
matrices, fused as CTranslate2 wants them (self-attention: q, k, v in `linear_0`; cross:
q in `linear_0`, k and v in `linear_1`), the output kernel `(N, H, D)` a `(D, N·H)` one.

Decoding as `zoo.decode` does it: the decoder starts from the start id's embedding
(`decoder_start_token`; an imported Marian model's is its padding id), CTranslate2 appends the
end token to each source (`add_source_eos`) after cutting it to `max_length - 1` tokens
(`max_input_length=max_length` counts the end token), and the padding id is never generated:
its output bias is lowered by `PAD_LOGIT_BIAS` (the zoo masks it after the softmax, so the
zoo's log-probabilities keep its probability in the normalizer and CTranslate2's do not: at
most 6e-5 apart on benchmarks/README.md's trained run). The vocabularies are the tokenizers' pieces in id order (ids the
tokenizer lacks get placeholder tokens). Refused in one line: RNNsearch, ConvS2S and ViT
models, copying (pointer-generator) Transformers, linear attention, Keras int8 weights. The
directory and its tokenizer files are written by `zoo.export.ctranslate2_export`.
"""

import functools

import keras
import numpy as np

from keras_attention.layers.positional import sinusoidal_table
from zoo.errors import ZooError
from zoo.export.formats import CTRANSLATE2, require
from zoo.families import numbered_layers

# Added to the padding id's output bias: its probability is 0 in float32 (exp(-1e4)), and it
# stays finite in float16 and int8 (no inf - inf). The zoo never generates the padding id.
PAD_LOGIT_BIAS = -1e4
ACTIVATIONS = {"relu": "RELU", "gelu": "GELU", "silu": "SWISH", "swish": "SWISH"}
FEED_FORWARD = (("inner_dense", "linear_0"), ("output_dense", "linear_1"))


def _array(value):
    return np.asarray(keras.ops.convert_to_numpy(value), dtype=np.float32)


def _refuse(message):
    raise ZooError(f"export: format={CTRANSLATE2!r} {message}; export it as a SavedModel "
                   "(format='savedmodel').")


def check_model(model, family):
    """Refuse in one line what a CTranslate2 `TransformerSpec` cannot hold; return the layers."""
    if family != "transformer":
        kind = {"seq2seq": "an RNNsearch", "convs2s": "a ConvS2S", "vit": "a ViT"}.get(family, family)
        _refuse(f"is for Transformer translation models; this is {kind} model, which "
                "CTranslate2's Transformer cannot express")
    layers = {layer.name: layer for layer in model.layers}
    if "pointer_generator" in layers:
        _refuse("cannot hold a copying (pointer-generator) Transformer: CTranslate2 has no "
                "copy mechanism")
    blocks = [layer for name, layer in layers.items() if name.startswith(("encoder_block_",
                                                                           "decoder_block_"))]
    for block in blocks:
        if block.attention != "softmax" or block.scoring != "scaled_dot":
            _refuse(f"needs softmax attention with scaled dot products; {block.name} has "
                    f"attention={block.attention!r}, scoring={block.scoring!r}")
        activation = keras.activations.serialize(block.activation)
        if activation not in ACTIVATIONS:
            _refuse(f"supports the activations {', '.join(ACTIVATIONS)}; {block.name} has "
                    f"{activation!r}")
        d_model = block.self_attention.output_kernel.shape[-1]
        if block.key_dim is not None and block.key_dim * block.num_heads != d_model:
            _refuse(f"needs heads of d_model / num_heads; {block.name} has key_dim={block.key_dim}")
    if any("int" in str(weight.dtype) for weight in model.weights):
        _refuse("needs float weights; this model has Keras int8 weights (export the float "
                "model with quantize='int8' for CTranslate2's own int8)")
    return layers


# === Weights in CTranslate2's layout ===


def _norm(prefix, norm):
    return {f"{prefix}/gamma": _array(norm.gamma), f"{prefix}/beta": _array(norm.beta)}


def _projections(attention, names):
    """`(weight (Σ N·H, D), bias)` of the named projections (`"query"`, ...), stacked."""
    weights, biases = [], []
    for name in names:
        kernel = _array(getattr(attention, f"{name}_kernel"))  # (D, N, H)
        weights.append(kernel.reshape(kernel.shape[0], -1).T)
        bias = getattr(attention, f"{name}_bias", None)
        biases.append(np.zeros(weights[-1].shape[0], np.float32) if bias is None
                      else _array(bias).reshape(-1))
    return np.concatenate(weights, 0), np.concatenate(biases, 0)


def _attention(prefix, attention, fused):
    """`fused`: the input projections' groups, one `linear_i` each, then the output."""
    out = {}
    for index, names in enumerate(fused):
        out[f"{prefix}/linear_{index}/weight"], out[f"{prefix}/linear_{index}/bias"] = \
            _projections(attention, names)
    kernel = _array(attention.output_kernel)  # (N, H, D)
    last = f"{prefix}/linear_{len(fused)}"
    out[f"{last}/weight"] = kernel.reshape(-1, kernel.shape[-1]).T  # (D, N·H)
    bias = getattr(attention, "output_bias", None)
    out[f"{last}/bias"] = (np.zeros(kernel.shape[-1], np.float32) if bias is None
                           else _array(bias))
    return out


def _feed_forward(prefix, block):
    out = _norm(f"{prefix}/ffn/layer_norm", block.feed_forward_norm)
    for ours, theirs in FEED_FORWARD:
        dense = getattr(block.feed_forward, ours)
        out[f"{prefix}/ffn/{theirs}/weight"] = _array(dense.kernel).T  # (out, in)
        out[f"{prefix}/ffn/{theirs}/bias"] = _array(dense.bias)
    return out


def position_table(embedding):
    """The `(max_length, D)` positions a `TokenAndPositionEmbedding` adds, row t at position t."""
    layer = embedding.position_embedding
    if embedding.positional == "learned":
        return _array(layer.position_embeddings)
    positions = np.arange(embedding.sequence_length, dtype=np.float32)
    return _array(sinusoidal_table(positions, embedding.embedding_dim, layer.max_wavelength,
                                   "float32", layer.layout))


def _embedding(prefix, embedding, name):
    return {
        f"{prefix}/{name}/weight": _array(embedding.embeddings),
        f"{prefix}/position_encodings/encodings": position_table(embedding),
        f"{prefix}/scale_embeddings": (float(np.sqrt(embedding.embedding_dim))
                                       if embedding.scale_embeddings else 1.0),
    }


def variables(model, pad_id):
    """`(structure, {variable name: value})` of a zoo Transformer (checked by `check_model`) in
    CTranslate2's layout: numpy float32 arrays (torch's `(out, in)` for the linear layers) and
    the float embedding scales, by the names `ctranslate2.specs.TransformerSpec` gives them.
    `pad_id`: the output bias of this id gets `PAD_LOGIT_BIAS` (never generated)."""
    layers = {layer.name: layer for layer in model.layers}
    shared = "shared_embedding" in layers
    source = layers["shared_embedding" if shared else "source_embedding"]
    target = layers["shared_embedding" if shared else "target_embedding"]
    encoders = numbered_layers(layers, "encoder_block_")
    decoders = numbered_layers(layers, "decoder_block_")
    first = encoders[0]
    structure = {
        "num_encoder_layers": len(encoders), "num_decoder_layers": len(decoders),
        "num_heads": first.num_heads, "pre_norm": bool(first.norm_first),
        "activation": ACTIVATIONS[keras.activations.serialize(first.activation)],
        "layer_norm_epsilon": float(first.layer_norm_epsilon),
        "shared_vocabulary": shared, "tied_embeddings": "output_projection" not in layers,
        "positions": source.positional, "positional_layout": getattr(
            source.position_embedding, "layout", None),
        "embedding_scale": float(np.sqrt(source.embedding_dim)) if source.scale_embeddings else 1.0,
        "final_logits_bias": "final_logits_bias" in layers,
        "max_length": min(source.sequence_length, target.sequence_length),
    }
    values = {**_embedding("encoder", source, "embeddings_0"),
              **_embedding("decoder", target, "embeddings")}
    for i, block in enumerate(encoders):
        prefix = f"encoder/layer_{i}"
        values.update(_attention(f"{prefix}/self_attention", block.self_attention,
                                 [("query", "key", "value")]))
        values.update(_norm(f"{prefix}/self_attention/layer_norm", block.self_attention_norm))
        values.update(_feed_forward(prefix, block))
    for i, block in enumerate(decoders):
        prefix = f"decoder/layer_{i}"
        values.update(_attention(f"{prefix}/self_attention", block.self_attention,
                                 [("query", "key", "value")]))
        values.update(_norm(f"{prefix}/self_attention/layer_norm", block.self_attention_norm))
        values.update(_attention(f"{prefix}/attention", block.cross_attention,
                                 [("query",), ("key", "value")]))
        values.update(_norm(f"{prefix}/attention/layer_norm", block.cross_attention_norm))
        values.update(_feed_forward(prefix, block))
    if structure["pre_norm"]:
        values.update(_norm("encoder/layer_norm", layers["encoder_norm"]))
        values.update(_norm("decoder/layer_norm", layers["decoder_norm"]))
    values.update(_projection(layers, values["decoder/embeddings/weight"], pad_id))
    return structure, values


def _projection(layers, target_embeddings, pad_id):
    """The output layer: the target embedding (tied) or the projection's kernel, transposed,
    and the final logits bias (zeros without), the padding id's lowered."""
    weight = (target_embeddings if "output_projection" not in layers
              else _array(layers["output_projection"].kernel).T)  # (V, D)
    bias = (_array(layers["final_logits_bias"].bias).copy() if "final_logits_bias" in layers
            else np.zeros(weight.shape[0], np.float32))
    bias[pad_id] += PAD_LOGIT_BIAS
    return {"decoder/projection/weight": weight, "decoder/projection/bias": bias}


# === The vocabularies and the spec ===


def vocabulary(tokenizer, size):
    """`size` unique token strings, id = position: the tokenizer's pieces, then a placeholder
    for every id it lacks (a model's vocabulary may be larger) or repeats."""
    tokens, seen = [], set()
    for index, token in enumerate(list(tokenizer.get_vocabulary())[:size]):
        token = token.decode("utf-8") if isinstance(token, bytes) else str(token)
        if not token or token in seen:
            token = f"<zoo_unused_{index}>"
        tokens.append(token)
        seen.add(token)
    tokens += [f"<zoo_unused_{index}>" for index in range(len(tokens), size)]
    return tokens


def config(source_tokens, target_tokens, ids, unk_id, epsilon):
    """The CTranslate2 model config: special tokens as the zoo uses them, the source's end token
    appended by CTranslate2, LayerNorm's epsilon."""
    end = target_tokens[ids["end"]]
    if source_tokens[ids["end"]] != end:
        raise ZooError(f"export: the source vocabulary has {source_tokens[ids['end']]!r} at the "
                       f"end id {ids['end']}, the target {end!r}: CTranslate2 appends one end "
                       "token to both sides' vocabularies")
    return {"unk_token": target_tokens[unk_id], "bos_token": target_tokens[ids["start"]],
            "eos_token": end, "decoder_start_token": target_tokens[ids["start"]],
            "add_source_bos": False, "add_source_eos": True, "layer_norm_epsilon": epsilon}


@functools.cache
def _ctranslate2():
    return require("ctranslate2", "ctranslate2", f"export format={CTRANSLATE2!r}")


def build_spec(structure, values, source_tokens, target_tokens, model_config):
    """A validated `ctranslate2.specs.TransformerSpec` holding `values` (from `variables`)."""
    specs = _ctranslate2().specs
    activation = getattr(specs.Activation, structure["activation"])
    encoder = specs.TransformerEncoderSpec(structure["num_encoder_layers"],
                                           structure["num_heads"],
                                           pre_norm=structure["pre_norm"], activation=activation)
    decoder = specs.TransformerDecoderSpec(structure["num_decoder_layers"],
                                           structure["num_heads"],
                                           pre_norm=structure["pre_norm"], activation=activation)
    spec = specs.TransformerSpec(encoder, decoder)
    for name, value in values.items():
        scope, attribute = name.rsplit("/", 1)
        setattr(specs.model_spec.index_spec(spec, scope), attribute, value)
    spec.register_source_vocabulary(source_tokens)
    spec.register_target_vocabulary(target_tokens)
    for key, value in model_config.items():
        setattr(spec.config, key, value)
    spec.validate()
    return spec


def version():
    return _ctranslate2().__version__
