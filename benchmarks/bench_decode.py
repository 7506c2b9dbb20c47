"""Greedy decoding speed: the key/value cache against re-running the model, and the SavedModel.

Model: the `transformer-tiny` sizes (2+2 layers, d 128, 4 heads, d_ff 512, post-norm,
shared tied embeddings) with a WordPiece vocabulary of about 1000 tokens learned from
a synthetic corpus, untrained (random weights). Every row is 31 random whole-word
tokens + [END] (source length 32) and every variant generates exactly 64 tokens per
row: the [END] embedding row is set to a constant vector, so its logit
`y · e_END = c · Σ_j y_j` is 0 after the final LayerNorm (zero-mean output), below
the arg-max of the other ~1000 tokens; the script checks the count.

Variants, at batch 1 and 32 (`zoo.decode`):

- uncached: `greedy_decode(use_cache=False)`, the whole model (encoder included) on
  a 64-position target buffer at every step, `tf.function`, and with XLA;
- cached: `greedy_decode()`, encoder once, one position per step through the
  decoder blocks with self-attention key/value buffers, `tf.function`, and with XLA
  (`jit_compile=True`);
- beam 4 (cached): `beam_search(beam_size=4)`, tokens of the returned hypothesis;
- SavedModel: `zoo.export.export(...)` twice, without and with `jit_compile=True`
  (XLA decoding inside the SavedModel), then the loaded SavedModels' `greedy`
  signature (text in: tokenization, greedy decoding that sums the chosen tokens'
  log-probabilities for the score as it goes, detokenization) and `serving_default`
  (beam 4), the same 32-token sources as text;
- cached, XLA, + score: the `greedy` signature's work on ids, in process.

The second table sets each SavedModel signature against the in-process cached XLA
path of the same search (`greedy_decode` / `beam_search(beam_size=4)` with
`jit_compile=True`): the median of the per-round ratios SavedModel / in-process
(target: at most 1.3).

Tokens/s = batch × 64 / wall time of one call. Every variant is warmed up (traced,
compiled) first; then each round times every variant once, back to back, the order
reversed every other round; the table shows medians over rounds, and the speed-up
over uncached `tf.function` is the median of the per-round ratios.

    python benchmarks/bench_decode.py                  # 5 rounds, about 5 minutes
    python benchmarks/bench_decode.py --rounds 9 --saved-model /tmp/decode_export
    python benchmarks/bench_decode.py --quick          # tiny sizes, batch 4, 1 round (smoke test)
"""

import argparse
import datetime
import os
import platform
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402, F401 - registers the tokenizer ops for loading

import zoo  # noqa: E402
from zoo import decode, text  # noqa: E402
from zoo import export as zoo_export  # noqa: E402

FULL = dict(
    vocabulary=1000, sentences=4000, d_model=128, num_heads=4, intermediate_dim=512, layers=2,
    source_length=32, output_tokens=64, batches=(1, 32), rounds=5,
)
# The smoke test: every code path once, at one batch size (each batch size traces every
# variant again), XLA only for cached greedy, to keep it short.
QUICK = dict(
    vocabulary=120, sentences=400, d_model=16, num_heads=2, intermediate_dim=32, layers=1,
    source_length=8, output_tokens=8, batches=(4,), rounds=1,
)
SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]


def synthetic_corpus(rng, sentences):
    """Sentences of 6-14 words of 1-3 syllables: enough variety for a WordPiece vocabulary."""
    return [
        " ".join(
            "".join(rng.choice(SYLLABLES, size=rng.integers(1, 4)))
            for _ in range(rng.integers(6, 15))
        )
        for _ in range(sentences)
    ]


def build(sizes, seed):
    rng = np.random.default_rng(seed)
    tokenizer = text.WordPieceTokenizer.from_corpus(
        synthetic_corpus(rng, sizes["sentences"]), sizes["vocabulary"]
    )
    model = zoo.get(
        "transformer-tiny",
        compile=False,
        vocabulary_size=tokenizer.vocab_size,
        num_encoder_layers=sizes["layers"],
        num_decoder_layers=sizes["layers"],
        d_model=sizes["d_model"],
        num_heads=sizes["num_heads"],
        intermediate_dim=sizes["intermediate_dim"],
        max_length=max(128, sizes["output_tokens"]),
    )
    # [END]'s logit becomes y · c1 = c Σ_j y_j = 0 (post-norm output, β = 0): never the
    # arg-max, so every row decodes the full number of tokens.
    embeddings = model.get_layer("shared_embedding").embeddings
    table = keras.ops.convert_to_numpy(embeddings)
    table[decode.END_ID] = table.std()
    embeddings.assign(table)
    return tokenizer, model


def sources(tokenizer, rng, batch, length):
    """(ids (B, length): whole-word tokens + [END], the same rows as text (B,))."""
    vocabulary = tokenizer.get_vocabulary()
    words = [
        i for i, token in enumerate(vocabulary)
        if i >= 4 and token.isalpha() and not token.startswith("##")
    ]
    ids = rng.choice(words, size=(batch, length - 1))
    strings = [" ".join(vocabulary[i] for i in row) for row in ids]
    tokenized = tokenizer.tokenize(tf.constant(strings)).to_tensor().numpy()
    np.testing.assert_array_equal(tokenized, ids)  # the text is exactly these tokens
    ids = np.concatenate([ids, np.full((batch, 1), decode.END_ID)], axis=1).astype("int32")
    return tf.constant(ids), tf.constant(strings)


def generated(tokens):
    """Tokens generated per row ([END] included)."""
    tokens = np.asarray(tokens)
    counts = []
    for row in tokens:
        ends = np.flatnonzero(row == decode.END_ID)
        counts.append(int(ends[0]) + 1 if len(ends) else int(np.count_nonzero(row)))
    return counts


class Variant:
    def __init__(self, name, batch, run, tokens_of):
        self.name, self.batch, self.run, self.tokens_of = name, batch, run, tokens_of
        self.times = []

    def call(self):
        start = time.perf_counter()
        out = self.run()
        counts = generated(self.tokens_of(out))  # also waits for the result
        return time.perf_counter() - start, counts


def export_saved_model(model, tokenizer, path, output_tokens, jit_compile):
    """Export (`jit_compile` or not) and load; returns (signatures, version path, seconds)."""
    started = time.perf_counter()
    version = zoo_export.export(
        model, path, tokenizer=tokenizer, max_length=output_tokens, beam_size=4,
        jit_compile=jit_compile,
    )
    exported = time.perf_counter() - started
    return tf.saved_model.load(str(version)).signatures, version, exported


GOAL = 1.3  # SavedModel / in-process cached XLA, at most


def scoring_module(model, tokenizer, steps):
    """The export's module, for its `_greedy_ids` (greedy decoding with the score)."""
    return zoo_export.TranslationModule(model, tokenizer, tokenizer, steps, 4, 0.6)


def saved_model_ratios(variants, batches, saved):
    """Print each SavedModel signature against the in-process cached XLA search."""
    reference = {"greedy": "cached, XLA", "serving_default": "beam 4, cached, XLA"}
    scored = "cached, XLA, + score"  # what `greedy` computes besides tokenization
    rows, notes = [], []
    for batch in batches:
        group = {v.name: v for v in variants if v.batch == batch}
        for name in saved:
            for signature, inner in reference.items():
                variant = group.get(f"{name} `{signature}` (text in/out)")
                if variant is None or inner not in group:
                    continue
                base = group[inner]
                ratio = statistics.median(t / b for t, b in zip(variant.times, base.times))
                rows.append((batch, name, signature, variant, base, ratio))
                if signature == "greedy" and scored in group:
                    same_work = statistics.median(
                        t / b for t, b in zip(variant.times, group[scored].times)
                    )
                    notes.append(f"batch {batch}: {name} `greedy` / in-process XLA greedy with "
                                 f"the score: {same_work:.2f}")
    if not rows:
        return
    print()
    print("| batch | export | signature | ms (median) | in-process XLA ms | SavedModel / in-process |")
    print("|---|---|---|---|---|---|")
    for batch, name, signature, variant, base, ratio in rows:
        print(f"| {batch} | {name} | `{signature}` | {1e3 * statistics.median(variant.times):.1f} | "
              f"{1e3 * statistics.median(base.times):.1f} | {ratio:.2f} |")
    for note in notes:
        print(note)
    for name in saved:
        got = [(b, s, r) for b, n, s, _, _, r in rows if n == name]
        met = all(r <= GOAL for _, _, r in got)
        listed = ", ".join(f"{s} batch {b}: {r:.2f}x" for b, s, r in got)
        print(f"Target {name} within {GOAL}x of in-process cached XLA: {listed} -> "
              f"{'met' if met else 'NOT met'}")


def parse_args(argv):
    """`(args, sizes, rounds)`."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="tiny sizes, 1 round, XLA only for cached greedy (smoke test)")
    parser.add_argument("--rounds", type=int, default=None, help="timed rounds (default 5)")
    parser.add_argument("--saved-model", metavar="PATH", default=None,
                        help="export the model to PATH/SavedModel and PATH/SavedModel_XLA (new "
                        "version directories) and time their signatures; the full run exports "
                        "to a temporary directory by default")
    parser.add_argument("--no-saved-model", action="store_true", help="skip the SavedModel")
    parser.add_argument("--no-xla", action="store_true", help="skip the XLA variants")
    parser.add_argument("--no-beam", action="store_true", help="skip beam search")
    parser.add_argument("--no-uncached", action="store_true",
                        help="skip the uncached variants (the slowest); speed-ups are then "
                        "over cached tf.function")
    args = parser.parse_args(argv)
    sizes = dict(QUICK if args.quick else FULL)
    rounds = args.rounds or sizes["rounds"]
    if rounds < 1:
        parser.error("--rounds must be >= 1")
    return args, sizes, rounds


def export_models(args, model, tokenizer, steps):
    """`{export name: the loaded SavedModel's signatures}` (none with --no-saved-model, or
    --quick without --saved-model)."""
    saved_path = None
    if not args.no_saved_model and (args.saved_model or not args.quick):
        saved_path = args.saved_model or tempfile.mkdtemp(prefix="bench_decode_")
    saved = {}  # export name -> the loaded SavedModel's signatures
    if saved_path is not None:
        for name, jit_compile in (("SavedModel", False), ("SavedModel XLA", True)):
            if jit_compile and args.no_xla:
                continue
            saved[name], version, seconds = export_saved_model(
                model, tokenizer, os.path.join(saved_path, name.replace(" ", "_")), steps,
                jit_compile,
            )
            print(f"{name}: exported to {version} in {seconds:.1f} s")

    return saved


def make_variants(args, sizes, model, tokenizer, saved, steps):
    """The `Variant`s to time, batch by batch."""
    rng = np.random.default_rng(1)
    variants = []
    for batch in sizes["batches"]:
        ids, strings = sources(tokenizer, rng, batch, sizes["source_length"])

        def greedy(ids=ids, **kwargs):
            return lambda: decode.greedy_decode(model, ids, max_length=steps, **kwargs)

        def beam(ids=ids, **kwargs):
            return lambda: decode.beam_search(
                model, ids, beam_size=4, max_length=steps, **kwargs
            )[0]

        def identity(out):
            return out

        if not args.no_uncached:
            variants.append(
                Variant("uncached, tf.function", batch, greedy(use_cache=False), identity)
            )
        variants.append(Variant("cached, tf.function", batch, greedy(), identity))
        all_xla = not (args.no_xla or args.quick)
        if all_xla and not args.no_uncached:
            variants.append(
                Variant("uncached, XLA", batch, greedy(use_cache=False, jit_compile=True), identity)
            )
        if not args.no_xla:
            variants.append(Variant("cached, XLA", batch, greedy(jit_compile=True), identity))
        if all_xla and saved:
            # The int part of the `greedy` signature, in process: greedy decoding that
            # adds up the score, one XLA function.
            scored = tf.function(scoring_module(model, tokenizer, steps)._greedy_ids,
                                 jit_compile=True, autograph=False)
            variants.append(Variant("cached, XLA, + score", batch,
                                    lambda ids=ids, f=scored: f(ids), lambda out: out[0]))
        if not args.no_beam:
            variants.append(Variant("beam 4, cached, tf.function", batch, beam(), identity))
            if all_xla:
                variants.append(Variant("beam 4, cached, XLA", batch, beam(jit_compile=True), identity))
        for name, signatures in saved.items():
            for signature in ("greedy", "serving_default") if not args.no_beam else ("greedy",):
                variants.append(Variant(
                    f"{name} `{signature}` (text in/out)", batch,
                    lambda strings=strings, f=signatures[signature]: f(text=strings),
                    lambda out: out["tokens"],
                ))

    return variants


def time_variants(variants, rounds, steps):
    """A warm-up call of each variant (its token counts checked), then `rounds` rounds, the
    order reversed every other round."""
    for variant in variants:
        seconds, counts = variant.call()
        if counts != [steps] * variant.batch:
            raise SystemExit(f"{variant.name}: generated {counts} tokens, expected {steps} per row")
        print(f"  warm-up batch {variant.batch:3d} {variant.name}: {seconds:.2f} s", flush=True)

    for round_index in range(rounds):
        ordered = variants if round_index % 2 == 0 else variants[::-1]
        for variant in ordered:
            variant.times.append(variant.call()[0])
        print(f"  round {round_index + 1}/{rounds} done", flush=True)


def report(variants, sizes, saved, steps, load_start, load_end):
    """Print the table and the targets; `{(batch, variant name): speed-up}`."""
    print()
    baseline_name = variants[0].name
    print(f"| batch | variant | tokens/s | ms per call (median, min–max) | × {baseline_name} |")
    print("|---|---|---|---|---|")
    speedups = {}
    for batch in sizes["batches"]:
        group = [v for v in variants if v.batch == batch]
        baseline = group[0]
        for variant in group:
            median = statistics.median(variant.times)
            ratio = statistics.median(b / t for b, t in zip(baseline.times, variant.times))
            speedups[batch, variant.name] = ratio
            print(f"| {batch} | {variant.name} | {batch * steps / median:,.0f} | "
                  f"{1e3 * median:.1f} ({1e3 * min(variant.times):.1f}–{1e3 * max(variant.times):.1f}) | "
                  f"{ratio:.2f} |")
    print()
    print(f"1-minute load average: {load_start:.2f} at the start, {load_end:.2f} at the end")
    saved_model_ratios(variants, sizes["batches"], saved)
    for mode in ("tf.function", "XLA") if baseline_name.startswith("uncached") else ():
        name = f"cached, {mode}"
        if all((b, name) in speedups for b in sizes["batches"]):
            got = ", ".join(f"batch {b}: {speedups[b, name]:.1f}x" for b in sizes["batches"])
            met = all(speedups[b, name] >= 4 for b in sizes["batches"])
            print(f"Target cached >= 4x uncached (tf.function) at {steps} tokens, {name}: "
                  f"{got} -> {'met' if met else 'NOT met'}")
    return speedups


def main(argv=None):
    args, sizes, rounds = parse_args(argv)
    steps = sizes["output_tokens"]

    print(f"# bench_decode.py, {datetime.datetime.now():%Y-%m-%d %H:%M}")
    print(f"command: python benchmarks/bench_decode.py {' '.join(sys.argv[1:] if argv is None else argv)}")
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"TensorFlow {tf.__version__}, Keras {keras.__version__}, Python {platform.python_version()}")
    load_start = os.getloadavg()[0]
    print(f"1-minute load average at the start: {load_start:.2f}")

    keras.utils.set_random_seed(0)
    tokenizer, model = build(sizes, seed=0)
    print(f"model: {model.count_params():,} parameters, vocabulary {tokenizer.vocab_size}, "
          f"d {sizes['d_model']}, {sizes['num_heads']} heads, d_ff {sizes['intermediate_dim']}, "
          f"{sizes['layers']}+{sizes['layers']} layers; source length {sizes['source_length']}, "
          f"{steps} output tokens")

    saved = export_models(args, model, tokenizer, steps)
    variants = make_variants(args, sizes, model, tokenizer, saved, steps)
    time_variants(variants, rounds, steps)
    load_end = os.getloadavg()[0]
    return report(variants, sizes, saved, steps, load_start, load_end)


if __name__ == "__main__":
    main()
