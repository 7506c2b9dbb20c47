"""RNNsearch, the RNN encoder-decoder with Bahdanau attention (Bahdanau et al., 2015): `zoo.get("seq2seq-bahdanau")`.

`model` builds it (its output layer `Maxout` included) and registers its
sizes; `decoder` holds its recurrence, `BahdanauDecoder`, with the alignment
model (additive, location-aware or monotonic attention, optionally with
coverage) inside each step, and the coverage loss. Its cached decoding steps
are `zoo.decode.steps.RNNSearchStep` and
`zoo.decode.copy_steps.CopyRNNSearchStep`, beside the other families' steps.
`zoo.seq2seq_decoder`, the decoder's module in earlier versions, still
imports (`zoo.moved`).
"""

from zoo.seq2seq.decoder import ATTENTIONS, MONOTONIC, BahdanauDecoder, coverage_loss
from zoo.seq2seq.model import (
    Maxout,
    Seq2SeqConfig,
    attention_weights,
    build,
    compile_model,
    copy_output,
    encode,
    fixed_vocabulary,
    output_logits,
)

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
