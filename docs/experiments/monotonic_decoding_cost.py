"""Decoding cost of RNNsearch against the source length: additive, monotonic and MoChA attention
(docs/experiments/monotonic_attention.md).

A seq2seq-bahdanau-small-sized model (GRU 128, attention 128, embeddings 64, maxout 64) with a
vocabulary of 512 and random weights decodes a batch of random sources of S tokens for exactly
T steps (an `end_id` it never emits). The time per decoder step is `(t(T) − t(1)) / (T − 1)`, so
that the encoder's O(S) pass drops out; each t is the fastest of `--repeats` decodes. Variants:

- `additive`: softmax attention, every energy of every step: O(S) per step;
- `monotonic`: the hard head at inference, computed online (energies from the previous position
  up to the stop only);
- `monotonic-hard`: the same alignments with every energy computed (`mode="hard"`), O(S) per step;
- `mocha`: MoChA, chunks of 3, online.

The monotonic models' energies are widened (r = 0, g = 3) so that the random head moves on
rather than leaving the source at the first step; the script reports how far it got.

With `--runs RUN_DIR...` it times trained runs instead: greedy decoding (cached, batch 1) of
the run's held-out sources, grouped by their length in tokens, ms per sentence (median of the
sentences of a group).

    python docs/experiments/monotonic_decoding_cost.py [--lengths 16 64 256 1024] [--batch 1 32]
    python docs/experiments/monotonic_decoding_cost.py --runs RUN_DIR... [--limit 300]
"""

import argparse
import statistics
import time

import keras
import numpy as np
import tensorflow as tf

import zoo
from zoo import decode

VOCABULARY = 512
SIZES = dict(vocabulary_size=VOCABULARY, embedding_dim=64, encoder_units=128, decoder_units=128,
             attention_units=128, maxout_units=64)
VARIANTS = {"additive": "additive", "monotonic": "monotonic", "monotonic-hard": "monotonic",
            "mocha": "mocha"}


def make_model(variant):
    keras.utils.set_random_seed(0)
    model = zoo.get("seq2seq-bahdanau-small", compile=False, attention=VARIANTS[variant], **SIZES)
    attention = model.get_layer("decoder").attention
    if variant != "additive":
        attention.score_bias.assign(0.0)
        attention.score_scale.assign(3.0)
    if variant == "monotonic-hard":
        # Measurement only: the layer's inference mode for one query is "online"; this instance
        # computes every energy instead ("hard", the same alignments).
        choose = attention._mode
        attention._mode = lambda mode, training, single: choose(mode or (
            None if training else "hard"), training, single)
    return model


def step_milliseconds(model, source, steps, repeats):
    """`(t(steps) − t(1)) / (steps − 1)` and `t(1)`, in ms, for greedy decodes of exactly that
    many steps. The two lengths alternate, and each time is the fastest of `repeats`: on a
    machine shared with other jobs the minimum is the least disturbed estimate."""
    never = VOCABULARY + 1  # an end id the model cannot emit: every row runs `steps` steps
    times = {1: [], steps: []}
    for length in times:  # trace both once
        decode.greedy_decode(model, source, max_length=length, end_id=never).numpy()
    for _ in range(repeats):
        for length in times:
            start = time.perf_counter()
            decode.greedy_decode(model, source, max_length=length, end_id=never).numpy()
            times[length].append(time.perf_counter() - start)
    first, total = min(times[1]), min(times[steps])
    return (total - first) / (steps - 1) * 1e3, first * 1e3


def head_positions(model, source, steps):
    """Where the monotonic head is after `steps` greedy steps (S: it has left), per row."""
    stepper = decode._stepper(model, use_cache=True)
    state = stepper.prepare(tf.constant(source), 1, steps)
    tokens = tf.fill([source.shape[0]], decode.START_ID)
    for t in range(steps):
        logits, state = stepper.step(tokens, tf.constant(t), state)
        tokens = tf.cast(tf.argmax(logits[:, 1:], axis=-1) + 1, tf.int32)
    alignment = np.asarray(state[-1])
    return np.where(alignment.sum(-1) > 0, alignment.argmax(-1), source.shape[1])


def trained_runs(run_dirs, limit):
    """ms per sentence of greedy decoding, per run and source-length group (tokens)."""
    from zoo.datasets import pipeline, preparation  # noqa: PLC0415 - only this mode loads runs
    from zoo.runs import rundir  # noqa: PLC0415 - as above

    print("| run | source tokens | sentences | ms / sentence (median) |")
    print("|---|---|---|---|")
    for run_dir in run_dirs:
        run = rundir.load_run(run_dir)
        config = run.config
        _, data = preparation.load_data(
            run.name, config["data"]["spec"], dict(config["data"]["options"]),
            config["model_config"], config["training"]["seed"], quiet=True)
        dataset = pipeline.make_translation_dataset(
            data.test_pairs[:limit], run.source_tokenizer, run.target_tokenizer, limit,
            max_length=run.max_length, shuffle=False)
        sources = next(iter(dataset))[0]["source"].numpy()
        lengths = (sources != 0).sum(-1)
        for width in (lengths.min(), lengths.max()):  # two shapes: the trace becomes general
            decode.greedy_decode(run.model, sources[:1, :width])
        times = {}
        for row, length in zip(sources, lengths):
            source = row[None, :length]
            start = time.perf_counter()
            decode.greedy_decode(run.model, source).numpy()
            times.setdefault(int(length), []).append(time.perf_counter() - start)
        for length in sorted(times):
            print(f"| {run_dir} | {length} | {len(times[length])} | "
                  f"{statistics.median(times[length]) * 1e3:.1f} |", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[16, 64, 256, 1024])
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--runs", nargs="+", help="time these trained runs instead")
    parser.add_argument("--limit", type=int, default=300, help="--runs: held-out sentences")
    args = parser.parse_args()
    if args.runs:
        trained_runs(args.runs, args.limit)
        return
    sources = {(batch, length): np.random.default_rng(length).integers(
        4, VOCABULARY, (batch, length)).astype("int32")
        for batch in args.batch for length in args.lengths}  # the same for every variant
    print("| variant | B | S | ms / decoder step | encoder + 1 step, ms | head after "
          f"{args.steps} steps (mean; S = left) |")
    print("|---|---|---|---|---|---|")
    for variant in args.variants:
        model = make_model(variant)
        for batch in args.batch:
            for length in args.lengths:
                source = sources[batch, length]
                per_step, first = step_milliseconds(model, source, args.steps, args.repeats)
                head = "—"
                if variant != "additive":
                    positions = head_positions(model, source, args.steps)
                    head = f"{positions.mean():.1f} ({np.mean(positions == length):.0%} left)"
                print(f"| {variant} | {batch} | {length} | {per_step:.3f} | {first:.1f} | "
                      f"{head} |", flush=True)


if __name__ == "__main__":
    main()
