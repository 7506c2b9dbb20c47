"""RNNsearch, the RNN encoder-decoder with Bahdanau attention (Bahdanau et al., 2015): `zoo.get("seq2seq-bahdanau")`.

`config` holds its sizes and registers them, `model` builds it (its output
layer `Maxout` included); `decoder` holds its recurrence, `BahdanauDecoder`, with the alignment
model (additive, location-aware or monotonic attention, optionally with
coverage) inside each step, and the coverage loss. Its cached decoding steps
are `zoo.decode.steps.RNNSearchStep` and
`zoo.decode.copy_steps.CopyRNNSearchStep`, beside the other families' steps.
`zoo.seq2seq_decoder`, the decoder's module in earlier versions, still
imports (`zoo.moved`).

Importing the package loads only `config` (no Keras): the other names load
their module on first use (PEP 562), so that `zoo list` runs without TensorFlow.
"""

from keras_attention import lazy
from zoo.seq2seq.config import ATTENTIONS, MONOTONIC, Seq2SeqConfig

# The other public names and their modules, imported on first use.
_LAZY = {
    "BahdanauDecoder": "zoo.seq2seq.decoder",
    "coverage_loss": "zoo.seq2seq.decoder",
    "Maxout": "zoo.seq2seq.model",
    "attention_weights": "zoo.seq2seq.model",
    "build": "zoo.seq2seq.model",
    "compile_model": "zoo.seq2seq.model",
    "copy_output": "zoo.seq2seq.model",
    "encode": "zoo.seq2seq.model",
    "fixed_vocabulary": "zoo.seq2seq.model",
    "output_logits": "zoo.seq2seq.model",
}


__getattr__ = lazy.module_getattr(__name__, _LAZY)


__all__ = [
    "ATTENTIONS",
    "MONOTONIC",
    "BahdanauDecoder",
    "Maxout",
    "Seq2SeqConfig",
    "attention_weights",
    "build",
    "compile_model",
    "copy_output",
    "coverage_loss",
    "encode",
    "fixed_vocabulary",
    "output_logits",
]
