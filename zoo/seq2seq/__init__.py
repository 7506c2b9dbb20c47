"""RNNsearch, the RNN encoder-decoder with Bahdanau attention (Bahdanau et al., 2015): `zoo.get("seq2seq-bahdanau")`.

The family's shape: `config` holds its sizes and registers them, `model` builds it (its
output layer `Maxout` included), `recipe` compiles it for training, `decoding` holds its
cached steps for `zoo.decode`'s searches (`RNNSearchStep`, `CopyRNNSearchStep`), `copying`
its pointer-generator output; `decoder`
holds its recurrence, `BahdanauDecoder`, with the alignment model (additive,
location-aware or monotonic attention, optionally with coverage) inside each step, and the
coverage loss. `FAMILY` is the family object the registry holds. `zoo.seq2seq_decoder`,
the decoder's module in earlier versions, still imports (`zoo.moved`).

Importing the package loads only `config` (no Keras): the other names load
their module on first use (PEP 562), so that `zoo list` runs without TensorFlow.
"""

from keras_attention import lazy
from zoo import registry
from zoo.seq2seq.config import ATTENTIONS, MONOTONIC, Seq2SeqConfig

FAMILY = registry.package_family(__name__, "seq2seq", Seq2SeqConfig, "translation")

# The other public names, by the module that defines them, imported on first use.
_LAZY = lazy.by_module({
    "zoo.seq2seq.copying": ("copy_output", "fixed_vocabulary"),
    "zoo.seq2seq.decoder": ("BahdanauDecoder", "coverage_loss"),
    "zoo.seq2seq.model": ("Maxout", "attention_weights", "build", "encode", "output_logits"),
    "zoo.seq2seq.recipe": ("compile_model",),
})


__getattr__ = lazy.module_getattr(__name__, _LAZY)


__all__ = [
    "ATTENTIONS", "BahdanauDecoder", "FAMILY", "MONOTONIC", "Maxout", "Seq2SeqConfig",
    "attention_weights", "build", "compile_model", "copy_output", "coverage_loss", "encode",
    "fixed_vocabulary", "output_logits",
]
