"""Per-step cost of greedy decoding on an OPUS-MT-shaped Transformer: XLA against tf.function.

Model: the opus-mt-en-de configuration (d 512, 8 heads, d_ff 2048, 6+6 post-norm
layers, swish, sinusoidal positions, tied embeddings of 58,101 tokens, a final
logits bias) built through `zoo.transformer.weights.marian.transformer_fields`, random
weights; `--scale 0.5` halves d_model, d_ff and the vocabulary. Sources are 15
random tokens + `</s>`; every call decodes exactly `--steps` tokens (random
weights rarely emit `</s>`; the script prints the tokens generated per row).

Variants (`zoo.decode.greedy_decode`, in process):

- `tf.function`: the default export's decoding;
- `XLA`: `jit_compile=True`, as the `--jit` export runs it;
- `XLA, without tied-logits fix`: the logits as `y Eᵀ` (`zoo.transformer.decoding.tied_logits`
  switched off): XLA:CPU copies the transposed (V, D) table at every step;
- `XLA, without cache fix`: the key/value buffers written with a `where` over all
  positions (`keras_attention.kv_cache.write_positions`' XLA path switched off);
- `XLA, without bias fix`: biases added as `x + b` (`keras_attention.xla.add_bias`
  switched off): XLA:CPU fuses each add into its one-row product and runs it on one thread;
- `XLA, without kernel fix`: attention kernels reshaped with no barrier
  (`keras_attention.xla.unfused` switched off): XLA:CPU fuses the reshape into the product.

Each variant is traced and compiled first (the first call, reported), then each round
calls every variant once, in an order reversed every other round; the table shows the
median ms per call and per step. With `--hlo DIR` it also writes XLA's optimized HLO
of each XLA variant there (`--xla_dump_to`).

    python benchmarks/bench_jit_step.py                       # batch 1 and 32, 48 steps
    python benchmarks/bench_jit_step.py --scale 0.5 --batches 1 --rounds 5
"""

import argparse
import dataclasses
import os
import platform
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
if "--hlo" in sys.argv:  # XLA reads its flags once, before the first compilation
    os.environ["XLA_FLAGS"] = f"--xla_dump_to={sys.argv[sys.argv.index('--hlo') + 1]}"

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_attention import kv_cache, xla  # noqa: E402
from zoo import decode, transformer  # noqa: E402
from zoo.decode import steps  # noqa: E402
from zoo.transformer.model import TransformerConfig  # noqa: E402
from zoo.transformer.weights.marian import transformer_fields  # noqa: E402

OPUS_MT_EN_DE = dict(vocab=58101, d_model=512, heads=8, layers=6)


def build(scale, seed=0):
    """The opus-mt-en-de-shaped Transformer (sizes times `scale`), random weights."""
    vocab, d = int(OPUS_MT_EN_DE["vocab"] * scale), int(OPUS_MT_EN_DE["d_model"] * scale)
    layers = OPUS_MT_EN_DE["layers"]
    config = dict(
        model_type="marian", vocab_size=vocab, d_model=d, encoder_layers=layers,
        decoder_layers=layers, encoder_attention_heads=OPUS_MT_EN_DE["heads"],
        decoder_attention_heads=OPUS_MT_EN_DE["heads"], encoder_ffn_dim=4 * d,
        decoder_ffn_dim=4 * d, max_position_embeddings=512, pad_token_id=vocab - 1,
        eos_token_id=0, decoder_start_token_id=vocab - 1, activation_function="swish",
        scale_embedding=True, dropout=0.0,
    )
    keras.utils.set_random_seed(seed)
    fields = transformer_fields(config)
    return transformer.build(dataclasses.replace(TransformerConfig(), **fields)), vocab


class Switched:
    """A variant: greedy decoding with some of the XLA fixes switched off while it traces."""

    def __init__(self, name, model, source, steps_, vocab, jit, off=()):
        self.name, self.off, self.times = name, off, []
        ids = dict(start_id=vocab - 1, end_id=0, pad_id=vocab - 1)
        # A function of its own per variant: `zoo.decode` caches one per model and setting.
        self.function = tf.function(
            lambda: decode.greedy_decode(model, source, max_length=steps_, **ids),
            jit_compile=jit, autograph=False,
        )

    def call(self):
        saved = steps.in_xla_context, kv_cache.in_xla_context, xla.add_bias, xla.unfused
        if "tied-logits" in self.off:
            steps.in_xla_context = lambda: False
        if "cache" in self.off:
            kv_cache.in_xla_context = lambda: False
        if "bias" in self.off:
            xla.add_bias = lambda x, bias: x + bias
        if "kernel" in self.off:
            xla.unfused = lambda weight: weight
        try:
            start = time.perf_counter()
            tokens = self.function().numpy()
            return time.perf_counter() - start, tokens
        finally:
            steps.in_xla_context, kv_cache.in_xla_context, xla.add_bias, xla.unfused = saved


def run(args):
    model, vocab = build(args.scale)
    print(f"model: {model.count_params():,} parameters (scale {args.scale}); "
          f"{args.steps} steps; CPU: {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores; TF {tf.__version__}")
    rng = np.random.default_rng(0)
    print("| batch | variant | first call s | ms per call | ms per step |")
    print("|---|---|---|---|---|")
    for batch in args.batches:
        source = rng.integers(1, vocab - 1, (batch, 16)).astype("int32")
        source[:, -1] = 0  # </s>
        source = tf.constant(source)
        variants = [
            Switched("tf.function", model, source, args.steps, vocab, jit=False),
            Switched("XLA", model, source, args.steps, vocab, jit=True),
            Switched("XLA, without tied-logits fix", model, source, args.steps, vocab, True,
                     ("tied-logits",)),
            Switched("XLA, without cache fix", model, source, args.steps, vocab, True, ("cache",)),
            Switched("XLA, without bias fix", model, source, args.steps, vocab, True, ("bias",)),
            Switched("XLA, without kernel fix", model, source, args.steps, vocab, True, ("kernel",)),
        ]
        first, outputs = {}, {}
        for variant in variants:
            first[variant.name], outputs[variant.name] = variant.call()
        generated = {name: int((tokens != vocab - 1).sum(axis=1).min()) for name, tokens in outputs.items()}
        same = all(np.array_equal(tokens, outputs["tf.function"]) for tokens in outputs.values())
        for index in range(args.rounds):
            for variant in variants if index % 2 == 0 else variants[::-1]:
                variant.times.append(variant.call()[0])
        for variant in variants:
            median = statistics.median(variant.times)
            print(f"| {batch} | {variant.name} | {first[variant.name]:.1f} | {1e3 * median:.0f} | "
                  f"{1e3 * median / args.steps:.1f} |")
        print(f"batch {batch}: fewest tokens generated per row {min(generated.values())}; "
              f"identical tokens in every variant: {same}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--steps", type=int, default=48)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--hlo", metavar="DIR", help="dump XLA's HLO there")
    run(parser.parse_args(argv))


if __name__ == "__main__":
    main()
