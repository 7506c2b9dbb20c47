"""Where the time of one beam-search step goes, and how many rows a batch computes (issue #65).

    python benchmarks/profile_beam_step.py RUN_DIR [--sentences 256] [--batch 32] [--beam 4]
        [--max-length 256] [--widths 16 32 256] [--rows 1 2 4 ... 128] [--jit]
        [--ctranslate2 EXPORT_DIR]

RUN_DIR is a trained Transformer run. Three measurements:

1. **One step's parts**, each a `tf.function` of its own (XLA-compiled with `--jit`), timed
   alone at `batch × beam` rows (the median of 50 calls after a warm-up) for each cache
   width in `--widths`: the decoder (`TransformerStep.step`: embedding, blocks against the
   caches, logits), the log-softmax, the top-k over K × V (one `tf.math.top_k`, and the
   search's `blocked_top_k`), the hypotheses' bookkeeping (the search's top-k, the parents'
   buffers gathered, the column written, the best finished one kept, the stop test) and the
   caches' reorder by parent beam (`tf.gather` of every cache tensor). Each part's outputs
   are copied to NumPy once per call, which the decoder's (its caches) and the reorder's
   times include: inside the search these stay where they are.
2. **One decoder step against its rows** (`--rows`): the step, its blocks alone, its
   output layer alone, and the step whose tied logits read the transposed table (the beam
   search's under XLA: `TransformerStep.with_transposed_table`) at each row count, caches of
   32 positions, every logit read (`step_by_rows`). With `--ctranslate2`, beside them, one
   greedy step of that CTranslate2 export of the same run at each row count
   (`ctranslate2_step_by_rows`).
3. **Rows computed**: the run's test split (`--sentences` spread over it) decoded by
   `zoo.decode.beam_search` in batches of `--batch`, with a spy on the decoder step that
   counts the rows of every step; against the rows a batch would compute if every step
   computed all of its `batch × beam` rows until its last sentence ends, as one loop over
   the whole batch does (before `zoo.decode.segments`), and against the live rows, those
   whose hypothesis goes on (what a search that computed nothing else would compute).
"""

import argparse
import json
import os
import pathlib
import statistics
import sys
import time

import numpy as np
import tensorflow as tf

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from bench_inference import cpu_description  # noqa: E402 - after the path

from zoo import decode  # noqa: E402
from zoo.datasets.preparation import load_run_data  # noqa: E402
from zoo.decode import loops, search_steps  # noqa: E402
from zoo.decode import steps as decode_steps  # noqa: E402
from zoo.export import ctranslate2_runtime  # noqa: E402
from zoo.runs.rundir import load_run  # noqa: E402
from zoo.text.ids import encode_sources  # noqa: E402


def median_ms(function, *args, calls=50):
    function(*args)  # trace, compile
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        tf.nest.map_structure(lambda x: x.numpy(), function(*args))
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def step_parts(run, sources, rows_per_sentence, width, jit):
    """ms of each part of one beam step at `width` cache positions (`sources` (B, S))."""
    stepper = decode_steps.stepper(run.model, use_cache=True)
    batch, k = sources.shape[0], rows_per_sentence

    def compile_(function):
        return tf.function(function, jit_compile=jit, autograph=False)

    state = stepper.prepare(sources, k, width)
    tokens = tf.fill([batch * k], 5)
    logits, _ = stepper.step(tokens, tf.constant(width // 2), state)
    vocabulary = logits.shape[-1]
    log_probs = tf.nn.log_softmax(logits)
    alive_log_probs = tf.zeros([batch, k])
    parent = tf.random.uniform([batch * k], 0, k, tf.int32)
    rows = tf.reshape(tf.range(batch)[:, None] * k + tf.reshape(parent, [batch, k]), [-1])
    alive = tf.zeros([batch, k, width], tf.int32)
    ended, best, best_score = tf.zeros([batch], tf.int32), tf.zeros([batch, width], tf.int32), \
        tf.fill([batch], -1e9)

    def bookkeeping(log_probs, alive):
        p, token, top, kept = loops._extend(log_probs, alive_log_probs, ended,
                                            tf.zeros([batch], tf.bool), k)
        hypotheses = loops.write_column(tf.gather(alive, p, batch_dims=1), 3, token)
        return loops._best_ended(hypotheses, top, kept & tf.equal(token, 3), 3, 0.6, best,
                                 best_score)

    def top_k(log_probs, blocked=True):
        candidates = alive_log_probs[:, :, None] + tf.reshape(log_probs, [batch, k, vocabulary])
        candidates = tf.reshape(candidates, [batch, k * vocabulary])
        if blocked:
            return search_steps.blocked_top_k(candidates, k)
        return tf.math.top_k(candidates, k=k)

    return {
        "decoder": median_ms(compile_(lambda x, s: stepper.step(x, tf.constant(width // 2), s)),
                             tokens, state),
        "log-softmax": median_ms(compile_(tf.nn.log_softmax), logits),
        "top-k over K x V (one top_k)": median_ms(compile_(lambda x: top_k(x, False)), log_probs),
        "top-k over K x V (blocked)": median_ms(compile_(top_k), log_probs),
        "bookkeeping": median_ms(compile_(bookkeeping), log_probs, alive),
        "cache reorder": median_ms(compile_(lambda s, r: tf.nest.map_structure(
            lambda x: tf.gather(x, r), s)), state, rows),
    }


# `step_by_rows`'s parts of the decoder step; "step from Eᵀ": the whole step of
# `TransformerStep.with_transposed_table`, the beam search's under XLA.
PARTS = ("step", "blocks", "logits", "step from Eᵀ")


def step_by_rows(run, sources, width, jit, counts, steps=16):
    """`{part: {rows: ms}}`: one decoder step (`TransformerStep.step`, caches of `width`
    positions; "blocks": its embedding and blocks alone, "logits": its output layer alone;
    "step from Eᵀ": the step whose tied logits read the transposed table) at each row count
    in `counts`. Each is a compiled loop of `steps` steps whose every output is read (the
    maximum of each row), as a search reads the logits: XLA would otherwise compute only the
    logits it keeps. The parts are timed in turn, 15 rounds, so that a change of the
    machine's speed falls on all of them. `sources` (B, S), cut to their longest, repeat to
    make the rows."""
    stepper = decode_steps.stepper(run.model, use_cache=True)
    longest = int(tf.reduce_max(tf.reduce_sum(tf.cast(sources != 0, tf.int32), axis=1)))
    sources = sources[:, :longest]
    made = {}
    for count in counts:
        rows = tf.tile(sources, [-(-count // sources.shape[0]), 1])[:count]
        state = stepper.prepare(rows, 1, width)
        transposed = stepper.with_transposed_table()
        for part in PARTS:
            chosen, timed = (transposed, "step") if part == "step from Eᵀ" else (stepper, part)
            function = tf.function(_steps(chosen, count, width, steps, timed),
                                   jit_compile=jit, autograph=False)
            function(state)  # trace, compile
            made[part, count] = (function, state)
    times = {key: [] for key in made}
    for _ in range(15):
        for key, (function, state) in made.items():
            start = time.perf_counter()
            function(state).numpy()
            times[key].append(1000 * (time.perf_counter() - start) / steps)
    return {part: {count: statistics.median(times[part, count]) for count in counts}
            for part in PARTS}


def _steps(stepper, count, width, steps, part):
    """`loop(state)`: `steps` decoder steps (or their `part`) of `count` rows around position
    width / 2, the sum of each row's largest output."""
    tokens = tf.fill([count], 5)
    y = tf.random.stateless_normal([count, 1, stepper.target_embedding.embedding_dim], (1, 2))

    def body(t, total, state):
        if part == "step":
            outputs, state = stepper.step(tokens, t, state)
        elif part == "blocks":
            outputs, state, _, _ = stepper.decode_token(tokens, t, state)
        else:  # the output layer on a vector that changes with t, so XLA keeps it in the loop
            outputs = stepper.logits(y + 1e-3 * tf.cast(t, y.dtype))
        outputs = tf.reshape(outputs, [count, -1])
        return t + 1, total + tf.reduce_sum(tf.reduce_max(outputs, axis=-1)), state

    def loop(state):
        start = (tf.constant(width // 2 - steps // 2), tf.constant(0.0), state)
        return tf.while_loop(lambda t, *_: t < width // 2 + steps // 2, body, start)[1]

    return loop


def rows_computed(run, ids, batch, beam, max_length):
    """`(rows the search computed, rows a whole-batch loop would have, live rows)` over `ids`:
    a live row holds a hypothesis that goes on (its input is neither `[END]` nor padding;
    at the first step, one per sentence), the rows a search that computed nothing else
    would compute."""
    counted = []  # each step's (rows, live rows), appended as the graph runs
    real_step = decode_steps.TransformerStep.step
    ended = (run.config["model_config"]["end_id"], run.config["model_config"]["pad_id"])

    def count(tokens, t):
        live = np.isin(tokens.numpy(), ended, invert=True).sum() if int(t) else None
        counted.append((len(tokens), live))
        return 0

    def spy(self, tokens, t, caches):
        seen = tf.py_function(count, [tokens, t], tf.int32)
        with tf.control_dependencies([seen]):
            return real_step(self, tf.identity(tokens), t, caches)

    decode_steps.TransformerStep.step = spy
    computed = whole = live = 0
    try:
        for i in range(0, len(ids), batch):
            source = ids[i:i + batch]
            counted.clear()
            decode.beam_search(run.model, source, beam, max_length=max_length)
            computed += sum(rows for rows, _ in counted)
            whole += len(counted) * int(source.shape[0]) * beam
            live += sum(int(source.shape[0]) if n is None else int(n) for _, n in counted)
    finally:
        decode_steps.TransformerStep.step = real_step
    return computed, whole, live


def ctranslate2_step_by_rows(path, text, counts, short=8, long=40):
    """`{rows: ms}`: one greedy step of the CTranslate2 export at `path` at each row count,
    `text` repeated to make the rows, every translation forced to `short` and to `long`
    tokens (`min_decoding_length` = `max_decoding_length`): the difference of the two
    times (medians of 9) over `long - short` steps, without the encoder and the set-up."""
    exported = ctranslate2_runtime.load(path, intra_threads=os.cpu_count(), inter_threads=1)
    pieces = exported.source_pieces([text])[0]

    def seconds(rows, length):
        times = []
        for _ in range(9):
            start = time.perf_counter()
            exported.translator.translate_batch(
                [pieces] * rows, beam_size=1, max_batch_size=rows,
                min_decoding_length=length, max_decoding_length=length)
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    times = {}
    for rows in counts:
        seconds(rows, short)  # warm-up
        times[rows] = 1000 * (seconds(rows, long) - seconds(rows, short)) / (long - short)
    return times


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("run_dir")
    p.add_argument("--sentences", type=int, default=256)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--max-length", type=int, default=256)
    p.add_argument("--widths", type=int, nargs="+", default=[16, 32, 256])
    p.add_argument("--rows", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64, 128])
    p.add_argument("--jit", action="store_true")
    p.add_argument("--ctranslate2", metavar="DIR",
                   help="also time a greedy step of this CTranslate2 export at each row count")
    args = p.parse_args(argv)
    run = load_run(args.run_dir)
    _, data = load_run_data(run.config, quiet=True)
    texts = [source for source, _ in data.test_pairs]
    texts = [texts[i] for i in np.linspace(0, len(texts) - 1, args.sentences).round().astype(int)]
    ids = encode_sources(run.source_tokenizer, tf.constant(texts), args.max_length).to_tensor()
    print(f"CPU: {cpu_description()}")
    parts = {width: step_parts(run, ids[: args.batch], args.beam, width, args.jit)
             for width in args.widths}
    print(f"one beam step at {args.batch} x {args.beam} rows, ms ({'XLA' if args.jit else 'graph'}):")
    print("| part | " + " | ".join(f"width {w}" for w in args.widths) + " |")
    print("|---|" + "---:|" * len(args.widths))
    for part in parts[args.widths[0]]:
        print(f"| {part} | " + " | ".join(f"{parts[w][part]:.2f}" for w in args.widths) + " |")
    by_rows = step_by_rows(run, ids[: args.batch], 32, args.jit, args.rows)
    if args.ctranslate2:
        by_rows["CTranslate2 step"] = ctranslate2_step_by_rows(args.ctranslate2, texts[0],
                                                               args.rows)
    print("one decoder step against its rows (caches of 32 positions), ms:")
    print("| rows | " + " | ".join(str(count) for count in args.rows) + " |")
    print("|---|" + "---:|" * len(args.rows))
    for part, times in by_rows.items():
        print(f"| {part} | " + " | ".join(f"{ms:.2f}" for ms in times.values()) + " |")
    computed, whole, live = rows_computed(run, ids, args.batch, args.beam, args.max_length)
    print(f"rows computed over {len(texts)} sentences: {computed:,} (a whole-batch loop: "
          f"{whole:,}, {whole / computed:.2f}x; live rows: {live:,}, {computed / live:.2f}x)")
    print(json.dumps({"parts": parts, "step_by_rows": by_rows, "rows": computed,
                      "whole_batch_rows": whole, "live_rows": live}))


if __name__ == "__main__":
    main()
