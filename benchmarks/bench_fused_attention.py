"""Fused against explicit attention on the CPU: `ka.MultiHeadAttention(flash_attention=True)`
(`keras.ops.dot_product_attention`) and `flash_attention=False` (the `(B, N, T, S)` scores,
a float32 masked softmax, the weights times the values), under the current Keras backend.

A step is one self-attention layer's forward pass plus the gradients of a weighted sum of
its output with respect to every weight and to the input, compiled as that backend's
training steps are: `tf.function` on TensorFlow, `jax.jit` on JAX, eager on PyTorch (no
`torch.compile`, whose C++ build takes minutes here). The two layers hold the same
weights. Each (shape, mask) point times both paths in the same process, interleaved round
by round (the order alternating), after a warm-up; the table gives the median ms per call
of each and the median of the per-round ratios fused/explicit, with their range
(BENCHMARKS.md: compare ratios measured in one run, never absolute times across runs).
Masks: none, and the causal mask alone (`use_causal_mask=True`; the fused path passes it
as `is_causal=True`).

Run it once per backend (KERAS_BACKEND=tensorflow|jax|torch); the numbers of the three
runs are in benchmarks/README.md, "`bench_fused_attention.py`: fused attention on the
CPU". No accelerator is used. PyTorch's eager steps on its default threads suffer most from
other jobs on a small machine; `OMP_NUM_THREADS=1` steadies them.

Usage:
    KERAS_BACKEND=jax python benchmarks/bench_fused_attention.py
    KERAS_BACKEND=torch python benchmarks/bench_fused_attention.py --rounds 9
    python benchmarks/bench_fused_attention.py --quick      # tiny sizes, a smoke test
"""

import argparse
import datetime
import os
import platform
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# The checkout this script lives in, before any installed copy of keras_attention.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import keras  # noqa: E402 - after the environment and sys.path above
import numpy as np  # noqa: E402

from keras_attention.layers.multi_head import MultiHeadAttention  # noqa: E402

# (B, T = S, D, N): the head size is D / N.
FULL = dict(shapes=((8, 128, 256, 4), (2, 512, 256, 4)), rounds=7, iterations=5, warmup=2)
QUICK = dict(shapes=((2, 16, 32, 4),), rounds=2, iterations=1, warmup=1)
MASKS = ("none", "causal")
PATHS = ("explicit", "fused")  # flash_attention=False, True


def cpu_description():
    """lscpu's model name and the AVX-512 flags it lists (or "no AVX-512")."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    except OSError:
        out = ""
    model, flags = platform.processor() or "unknown CPU", []
    for line in out.splitlines():
        if line.startswith("Model name:"):
            model = line.split(":", 1)[1].strip()
        elif line.startswith("Flags:"):
            flags = sorted(flag for flag in line.split(":", 1)[1].split()
                           if flag.startswith("avx512"))
    return model, (", ".join(flags) if flags else "no AVX-512")


def backend_version():
    name = keras.backend.backend()
    module = {"tensorflow": "tensorflow", "jax": "jax", "torch": "torch"}.get(name)
    if module is None:
        return name
    return f"{name} {__import__(module).__version__}"


def make_layers(batch, length, width, heads):
    """The explicit and the fused layer with the same random weights, and the input and
    upstream gradient of a step, as NumPy float32."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, length, width)).astype("float32")
    upstream = rng.standard_normal((batch, length, width)).astype("float32")
    layers = {}
    for path in PATHS:
        layer = MultiHeadAttention(heads, width // heads, flash_attention=path == "fused")
        layer(x[:, :4], x[:, :4])  # build
        layers[path] = layer
    for weight in layers["explicit"].weights:
        weight.assign(0.1 * rng.standard_normal(weight.shape).astype("float32"))
    layers["fused"].set_weights(layers["explicit"].get_weights())
    return layers, x, upstream


def make_step(layer, x, upstream, causal):
    """A callable running one compiled forward+backward step to completion."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        return _tensorflow_step(layer, x, upstream, causal)
    if backend == "jax":
        return _jax_step(layer, x, upstream, causal)
    if backend == "torch":
        return _torch_step(layer, x, upstream, causal)
    raise SystemExit(f"bench_fused_attention.py runs on tensorflow, jax or torch, not {backend}")


def _tensorflow_step(layer, x, upstream, causal):
    import tensorflow as tf

    x, upstream = tf.constant(x), tf.constant(upstream)
    variables = [weight.value for weight in layer.trainable_weights]

    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(layer(x, x, use_causal_mask=causal) * upstream)
        return loss, tape.gradient(loss, variables + [x])

    return lambda: float(step(x)[0])


def _jax_step(layer, x, upstream, causal):
    import jax
    import jax.numpy as jnp

    variables = layer.trainable_weights

    def loss(values, x):
        with keras.StatelessScope(state_mapping=list(zip(variables, values))):
            return jnp.sum(layer(x, x, use_causal_mask=causal) * upstream)

    step = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
    values, x = [weight.value for weight in variables], jnp.asarray(x)
    return lambda: jax.block_until_ready(step(values, x))


def _torch_step(layer, x, upstream, causal):
    import torch

    x = torch.from_numpy(x).requires_grad_(True)
    upstream = torch.from_numpy(upstream)
    parameters = [weight.value for weight in layer.trainable_weights]

    def step():
        loss = torch.sum(layer(x, x, use_causal_mask=causal) * upstream)
        return torch.autograd.grad(loss, parameters + [x])

    return step


def time_point(steps, rounds, iterations, warmup):
    """ms per call of each step (name -> list over rounds), interleaved round by round,
    the order reversed every other round."""
    for step in steps.values():
        for _ in range(warmup):
            step()
    times = {name: [] for name in steps}
    names = list(steps)
    for round_ in range(rounds):
        for name in names if round_ % 2 == 0 else names[::-1]:
            start = time.perf_counter()
            for _ in range(iterations):
                steps[name]()
            times[name].append(1000 * (time.perf_counter() - start) / iterations)
    return times


def row(shape, mask, times):
    ratios = [fused / explicit for fused, explicit in zip(times["fused"], times["explicit"])]
    batch, length, width, heads = shape
    return (f"| ({batch}, {length}, {width}, {heads}) | {mask} | "
            f"{statistics.median(times['explicit']):.2f} | {statistics.median(times['fused']):.2f} "
            f"| {statistics.median(ratios):.2f} ({min(ratios):.2f}–{max(ratios):.2f}) |")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, a smoke test")
    parser.add_argument("--rounds", type=int, default=None, help="timed rounds (7)")
    parser.add_argument("--iterations", type=int, default=None,
                        help="calls per path and round (5)")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    args.shapes, args.warmup = sizes["shapes"], sizes["warmup"]
    for name in ("rounds", "iterations"):
        if getattr(args, name) is None:
            setattr(args, name, sizes[name])
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1; received {getattr(args, name)}")
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    model, avx512 = cpu_description()
    print(f"bench_fused_attention.py  {datetime.date.today()}  Keras {keras.__version__} on "
          f"{backend_version()}; Python {platform.python_version()}")
    print(f"CPU: {model}, {os.cpu_count()} cores; AVX-512: {avx512}")
    print(f"Self-attention forward + backward, float32; {args.rounds} rounds of "
          f"{args.iterations} calls per path after {args.warmup} warm-up calls; medians.")
    print()
    print("| (B, T = S, D, N) | mask | explicit ms | fused ms | fused/explicit (range) |")
    print("|---|---|---:|---:|---:|")
    for shape in args.shapes:
        layers, x, upstream = make_layers(*shape)
        for mask in MASKS:
            steps = {path: make_step(layers[path], x, upstream, mask == "causal")
                     for path in PATHS}
            times = time_point(steps, args.rounds, args.iterations, args.warmup)
            print(row(shape, mask, times), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
