"""The keras-attention model zoo.

    import zoo
    zoo.list("vit-*")
    model = zoo.get("transformer-tiny", vocabulary_size=1000)
    model.fit(dataset)
    print(zoo.describe("transformer-base"))
    vit = zoo.get("vit-b16", weights="ViT-B_16.npz", num_classes=10)  # pretrained (zoo.vit.weights)
    zoo.export(model, "saved_models/numbers", tokenizer=tokenizer)  # TF Serving SavedModel
    layouts = zoo.layout_map("transformer-base", mesh)  # keras.distribution.ModelParallel (JAX)

`zoo.export` is the package `zoo/export/`, callable: `zoo.export(...)` and
`from zoo.export import export` are the same function.

`import zoo` is light (no Keras, no TensorFlow): the registry and the families'
configs load at once, so that `zoo.list`, `zoo.config` and `zoo.describe` (and
`zoo list`, `zoo describe`) need neither; `zoo.get` and the other names below
load their modules on first use (PEP 562), Keras with them.
"""

import importlib

from keras_attention import after_import, lazy
from zoo import convs2s, moved, registry, seq2seq, transformer, vit  # noqa: F401 - the families register
from zoo.description import Description, describe
from zoo.errors import ZooError
from zoo.registry import (
    UnknownModelError,
    config,
    entry,
    list,  # noqa: A004 - the zoo's public name
    register,
    search_space,
    unregister,
)

moved.install()

# The modules that register the families' Keras objects (layers, `gelu_tanh`): imported as soon
# as Keras is (`keras_attention.after_import`), so that `keras.saving.load_model` finds them in a
# `.keras` file after `import zoo`, as when `import zoo` imported them itself.
KERAS_MODULES = ("zoo.transformer.model", "zoo.seq2seq.model", "zoo.convs2s.model", "zoo.vit.model")


def _register_keras_objects():
    for module in KERAS_MODULES:
        importlib.import_module(module)


after_import.when_keras_loaded(_register_keras_objects)

# Loaded on first use (PEP 562): `get`, `layout_map` and the pretrained-weights modules bring
# Keras (and TensorFlow), `export` tensorflow-text, `tuning` and `hypermodel` keras-tuner,
# `plot` matplotlib.
_LAZY = {
    "decode": "zoo.decode",
    "export": "zoo.export",
    "marian": "zoo.transformer.weights.marian",
    "plot": "zoo.plot",
    "runs": "zoo.runs",
    "tuning": "zoo.tuning",
    "vit_checkpoints": "zoo.vit.weights.checkpoint",
    "vit_pretrained": "zoo.vit.weights.pretrained",
}
# Functions, by the module that defines them.
_LAZY_FUNCTIONS = {
    "get": "zoo.registry.building",
    "hypermodel": "zoo.tuning",
    "layout_map": "zoo.layouts",
}


def __getattr__(name):
    try:
        if name in _LAZY_FUNCTIONS:
            return getattr(importlib.import_module(_LAZY_FUNCTIONS[name]), name)
        if name in _LAZY:
            return importlib.import_module(_LAZY[name])
    except ModuleNotFoundError as error:
        # `decode`, `export`, `runs` and `tuning` are TensorFlow code (tf.data, tokenizers,
        # decoding loops, SavedModel): where it is not installed, one line says so.
        if error.name not in ("tensorflow", "tensorflow_text"):
            raise
        backends = importlib.import_module("keras_attention.backends")
        raise backends.BackendError(
            f"zoo.{name} needs TensorFlow, which is not installed: pip install "
            "tensorflow==2.21.* tensorflow-text==2.21.* (the layers, zoo.get and model.fit "
            "need neither)."
        ) from None
    return lazy.submodule(__name__, name)


def attention_weights(model, inputs):
    """Every attention map of a zoo model for one batch, as numpy arrays.

    Works on models from `zoo.get` and on models loaded from `.keras` files.

    Args:
        model: a Transformer, RNNsearch, ConvS2S or ViT model of the zoo.
        inputs: what the model takes: `{"source", "target"}` id batches, or images.

    Returns:
        dict from `"<layer>/<kind>"` to weights:
        Transformer: `encoder_block_{i}/self_attention` `(B, N, S, S)`,
        `decoder_block_{i}/self_attention` `(B, N, T, T)`,
        `decoder_block_{i}/cross_attention` `(B, N, T, S)`;
        RNNsearch: `decoder/alignment` `(B, T, S)`;
        ConvS2S: `convolutional_decoder_block_{i}/attention` `(B, T, S)`;
        ViT: `encoder_block_{i}/self_attention` `(B, N, P + 1, P + 1)`.
    """
    family = registry.family_of_model(model)
    if family is not None and family.attention_weights is not None:
        return family.attention_weights(model, inputs)
    raise ValueError(
        f"attention_weights: {model.name!r} is not a zoo model (Transformer, RNNsearch, ConvS2S or ViT)."
    )


__all__ = [
    "Description",
    "UnknownModelError",
    "ZooError",
    "attention_weights",
    "config",
    "convs2s",
    "describe",
    "entry",
    "export",
    "get",
    "hypermodel",
    "layout_map",
    "list",
    "marian",
    "register",
    "registry",
    "search_space",
    "seq2seq",
    "transformer",
    "tuning",
    "unregister",
    "vit",
    "vit_checkpoints",
    "vit_pretrained",
]
