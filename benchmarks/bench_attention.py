"""Forward+backward step time: our MultiHeadAttention vs keras.layers.MultiHeadAttention.

Every variant runs in the same process, interleaved round by round, and the table reports
the median over rounds, so that the ratios are taken under the same machine load
(BENCHMARKS.md: compare ratios measured in one run, never absolute times across runs).

A step is the forward pass plus the gradient of `sum(output)` with respect to every weight
and to the inputs (query, and value for cross-attention), inside `tf.function`, once
without and once with `jit_compile=True` (XLA). The ceiling is a 2048³ float32 matmul
timed in the same rounds.

FLOPs are counted analytically for the forward pass (2 per multiply-add): the query, key,
value and output projections, QKᵀ and AV; forward+backward counts 3× the forward.

A third row per (attention, compile) pair, the **floor**, is the least work any
implementation of the same math must do with TensorFlow's kernels: the same chain of
matrix products (the query, key and value projections as one product for self-attention,
as Q and one KV product for cross-attention; QKᵀ and AV per head; the output projection),
the softmax, and the gradients, but with the heads cut out by a split and reshapes
(no transposes), no biases and no 1/√H scale (`make_floor_step`). keras/floor is then
the most that a faster attention layer could gain over Keras's.

Usage:
    python benchmarks/bench_attention.py             # B=16, n=128, d=512, 8 heads of 64
    python benchmarks/bench_attention.py --rounds 9
    python benchmarks/bench_attention.py --quick     # tiny sizes, a smoke test
"""

import argparse
import datetime
import os
import platform
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np
import tensorflow as tf

from keras_attention.layers.multi_head import MultiHeadAttention, copy_keras_weights

FULL = {
    "batch": 16,
    "query_length": 128,
    "key_length": 96,
    "d_model": 512,
    "num_heads": 8,
    "matmul": 2048,
    "rounds": 5,
    "iterations": 3,
}
QUICK = {
    "batch": 2,
    "query_length": 16,
    "key_length": 12,
    "d_model": 32,
    "num_heads": 4,
    "matmul": 256,
    "rounds": 2,
    "iterations": 1,
}


def attention_flops(batch, query_length, key_length, d_model, num_heads, key_dim, value_dim):
    """Forward FLOPs of multi-head attention (2 per multiply-add)."""
    query_projection = 2 * batch * query_length * d_model * num_heads * key_dim
    key_projection = 2 * batch * key_length * d_model * num_heads * key_dim
    value_projection = 2 * batch * key_length * d_model * num_heads * value_dim
    scores = 2 * batch * num_heads * query_length * key_length * key_dim  # QKᵀ
    pooling = 2 * batch * num_heads * query_length * key_length * value_dim  # AV
    output_projection = 2 * batch * query_length * num_heads * value_dim * d_model
    return (
        query_projection + key_projection + value_projection + scores + pooling + output_projection
    )


def make_layers(sizes, query, value):
    """A Keras layer and ours with identical weights, built on these inputs."""
    key_dim = sizes["d_model"] // sizes["num_heads"]
    reference = keras.layers.MultiHeadAttention(sizes["num_heads"], key_dim)
    ours = MultiHeadAttention(sizes["num_heads"], key_dim)
    reference(query, value)
    ours(query, value)
    copy_keras_weights(ours, reference)
    return ours, reference


def make_step(layer, self_attention, jit_compile):
    """tf.function computing sum(layer(...)) and its gradients w.r.t. weights and inputs."""
    weights = layer.trainable_variables

    if self_attention:

        def step(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                loss = tf.reduce_sum(layer(x, x))  # query is value (and key)
            return tape.gradient(loss, [x, *weights])

    else:

        def step(query, value):
            with tf.GradientTape() as tape:
                tape.watch([query, value])
                loss = tf.reduce_sum(layer(query, value))  # key defaults to value
            return tape.gradient(loss, [query, value, *weights])

    return tf.function(step, jit_compile=jit_compile)


def make_floor_step(sizes, self_attention, jit_compile, rng):
    """The floor: multi-head attention's products and softmax, with free layouts.

    The same chain as the layers (projections -> QKᵀ -> softmax -> AV -> output
    projection, gradients of `sum(output)` w.r.t. the input(s) and the kernels), but the
    heads are cut out of the projections by a split and reshapes alone (no transposes:
    the wrong elements go to each head, the same arithmetic), with no biases and no 1/√H
    scale. Returns `(tf.function, args)`.
    """
    batch, d_model, heads = sizes["batch"], sizes["d_model"], sizes["num_heads"]
    head = d_model // heads
    n = sizes["query_length"]
    m = n if self_attention else sizes["key_length"]

    def tensor(*shape):
        return tf.constant(rng.standard_normal(shape) / np.sqrt(shape[0]), tf.float32)

    x = tensor(batch * n, d_model)
    memory = tensor(batch * m, d_model)
    if self_attention:
        kernels = (tensor(d_model, 3 * d_model), tensor(d_model, d_model))  # W_qkv, W_o
    else:
        kernels = (tensor(d_model, d_model), tensor(d_model, 2 * d_model),
                   tensor(d_model, d_model))  # W_q, W_kv, W_o

    def step(x, memory, *kernels):
        with tf.GradientTape() as tape:
            tape.watch([x, memory, *kernels])
            if self_attention:
                q, k, v = tf.split(tf.matmul(x, kernels[0]), 3, axis=1)
            else:
                q = tf.matmul(x, kernels[0])
                k, v = tf.split(tf.matmul(memory, kernels[1]), 2, axis=1)
            q = tf.reshape(q, (batch * heads, n, head))
            k = tf.reshape(k, (batch * heads, head, m))
            v = tf.reshape(v, (batch * heads, m, head))
            pooled = tf.matmul(tf.nn.softmax(tf.matmul(q, k)), v)
            output = tf.matmul(tf.reshape(pooled, (batch * n, d_model)), kernels[-1])
            loss = tf.reduce_sum(output)
        sources = [x, *kernels] if self_attention else [x, memory, *kernels]
        return tape.gradient(loss, sources)

    return tf.function(step, jit_compile=jit_compile), (x, memory, *kernels)


def variants_order(variants):
    """The (attention, compile) pairs in the order the variants were defined."""
    pairs = []
    for attention, compile_name, _ in variants:
        if (attention, compile_name) not in pairs:
            pairs.append((attention, compile_name))
    return pairs


def time_call(fn, args, iterations):
    """Mean seconds per call over `iterations` calls (results fetched to the host)."""
    start = time.perf_counter()
    for _ in range(iterations):
        result = fn(*args)
    tf.nest.map_structure(lambda t: t.numpy(), result)
    return (time.perf_counter() - start) / iterations


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="interleaved rounds; the median is reported (default 5)",
    )
    parser.add_argument(
        "--iterations", type=int, default=None, help="calls per variant per round (default 3)"
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for a smoke test")
    args = parser.parse_args(argv)
    sizes = dict(QUICK if args.quick else FULL)
    if args.rounds is not None:
        sizes["rounds"] = args.rounds
    if args.iterations is not None:
        sizes["iterations"] = args.iterations
    if sizes["rounds"] < 1 or sizes["iterations"] < 1:
        parser.error(f"--rounds and --iterations must be >= 1; received {sizes}")
    return sizes


def build_variants(sizes, rng):
    """`{(attention, compile, layer): (fn, args, forward FLOPs)}`: ours, Keras' and the floor,
    self- and cross-attention, under tf.function and XLA (outputs checked to agree)."""
    batch, d_model, num_heads = sizes["batch"], sizes["d_model"], sizes["num_heads"]
    head = d_model // num_heads
    length_q, length_k = sizes["query_length"], sizes["key_length"]
    x = tf.constant(rng.standard_normal((batch, length_q, d_model)), tf.float32)
    memory = tf.constant(rng.standard_normal((batch, length_k, d_model)), tf.float32)

    variants = {}  # (attention, compile, layer) -> (fn, args, forward FLOPs)
    for attention, query, value in (("self", x, x), ("cross", x, memory)):
        ours, reference = make_layers(sizes, query, value)
        difference = float(tf.reduce_max(tf.abs(ours(query, value) - reference(query, value))))
        if difference > 1e-3:
            raise SystemExit(f"{attention}-attention outputs differ by {difference}; aborting.")
        flops = attention_flops(
            batch, query.shape[1], value.shape[1], d_model, num_heads, head, head
        )
        args = (query,) if attention == "self" else (query, value)
        for compile_name, jit in (("tf.function", False), ("XLA", True)):
            for name, layer in (("ours", ours), ("keras", reference)):
                fn = make_step(layer, attention == "self", jit)
                variants[(attention, compile_name, name)] = (fn, args, flops)
            floor, floor_args = make_floor_step(sizes, attention == "self", jit, rng)
            variants[(attention, compile_name, "floor")] = (floor, floor_args, flops)

    return variants


def interleaved_rounds(sizes, variants, matmul, matmul_args, ceiling_key):
    """`(times, ratios, floor_ratios)` of `sizes["rounds"]` interleaved rounds."""
    # Each round times every (attention, compile) pair as ceiling, ours, keras back to back,
    # alternating which layer goes first, so that load drift on a shared machine hits the
    # two layers (and the ceiling) alike.
    pairs = variants_order(variants)
    times = {key: [] for key in [ceiling_key, *variants]}
    ratios = {pair: [] for pair in pairs}  # keras/ours per round
    floor_ratios = {pair: [] for pair in pairs}  # keras/floor per round
    for round_index in range(sizes["rounds"]):
        for pair_index, pair in enumerate(pairs):
            times[ceiling_key].append(time_call(matmul, matmul_args, sizes["iterations"]))
            names = ["ours", "keras", "floor"]
            if (round_index + pair_index) % 2:
                names.reverse()
            seconds = {}
            for name in names:
                fn, args, _ = variants[(*pair, name)]
                seconds[name] = time_call(fn, args, sizes["iterations"])
                times[(*pair, name)].append(seconds[name])
            ratios[pair].append(seconds["keras"] / seconds["ours"])
            floor_ratios[pair].append(seconds["keras"] / seconds["floor"])
    return times, ratios, floor_ratios


def report(sizes, variants, times, ratios, floor_ratios, ceiling_key):
    """Print the table (see the module docstring)."""
    batch, d_model, num_heads = sizes["batch"], sizes["d_model"], sizes["num_heads"]
    head, length_q, length_k = d_model // num_heads, sizes["query_length"], sizes["key_length"]
    size = sizes["matmul"]
    ceiling_seconds = statistics.median(times[ceiling_key])
    ceiling = 2 * size**3 / ceiling_seconds / 1e9  # GFLOP/s
    print(f"# Multi-head attention, forward+backward ({datetime.date.today().isoformat()})")
    print(
        f"TensorFlow {tf.__version__}, Keras {keras.__version__}, Python "
        f"{platform.python_version()}, {os.cpu_count()} CPU cores ({platform.machine()})"
    )
    print(
        f"B={batch}, d={d_model}, h={num_heads} (key_dim {head}); self: n=m={length_q}; "
        f"cross: n={length_q}, m={length_k}; {sizes['rounds']} interleaved rounds × "
        f"{sizes['iterations']} calls, median."
    )
    print(
        f"Ceiling: {size}³ fp32 matmul in tf.function, median of {len(times[ceiling_key])}: "
        f"{ceiling_seconds * 1e3:.2f} ms = {ceiling:.1f} GFLOP/s "
        f"(best {2 * size**3 / min(times[ceiling_key]) / 1e9:.1f}).\n"
    )
    print(
        "| attention | compile | layer | ms (median) | min–max ms | GFLOP/s | % of ceiling "
        "| keras/ours (range) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for key, (_, _, flops) in variants.items():
        attention, compile_name, name = key
        milliseconds = statistics.median(times[key]) * 1e3
        achieved = 3 * flops / (milliseconds / 1e3) / 1e9
        if name in ("ours", "floor"):
            pair_ratios = (ratios if name == "ours" else floor_ratios)[(attention, compile_name)]
            ratio = (
                f"{statistics.median(pair_ratios):.2f} "
                f"({min(pair_ratios):.2f}–{max(pair_ratios):.2f})"
            )
        else:
            ratio = ""
        print(
            f"| {attention} | {compile_name} | {name} | {milliseconds:.2f} | "
            f"{min(times[key]) * 1e3:.2f}–{max(times[key]) * 1e3:.2f} | {achieved:.1f} | "
            f"{100 * achieved / ceiling:.0f}% | {ratio} |"
        )
    print(
        "\nkeras/ours is the median (range) of the per-round ratios; > 1 means ours is faster. "
        "On floor rows the column is keras/floor: the most any implementation could gain over "
        "Keras (see the docstring)."
    )
    print(
        f"Forward FLOPs: self {variants[('self', 'XLA', 'ours')][2] / 1e9:.4g} G, "
        f"cross {variants[('cross', 'XLA', 'ours')][2] / 1e9:.4g} G; forward+backward = 3×."
    )


def main(argv=None):
    sizes = parse_args(sys.argv[1:] if argv is None else argv)
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    variants = build_variants(sizes, rng)
    size = sizes["matmul"]
    a = tf.constant(rng.standard_normal((size, size)), tf.float32)
    b = tf.constant(rng.standard_normal((size, size)), tf.float32)
    matmul = tf.function(tf.linalg.matmul)
    ceiling_key = ("matmul", f"{size}³ fp32", "tf.function")

    # Warm up: trace, compile, and let the allocator settle.
    for fn, args, _ in variants.values():
        for _ in range(2):
            time_call(fn, args, 1)
    time_call(matmul, (a, b), 2)

    times, ratios, floor_ratios = interleaved_rounds(sizes, variants, matmul, (a, b), ceiling_key)
    report(sizes, variants, times, ratios, floor_ratios, ceiling_key)
    return 0


if __name__ == "__main__":
    sys.exit(main())
