"""GPU training throughput of the zoo's `vit-b16` and `transformer-base` on Keras 3's JAX
backend, beside PyTorch models of the same shape, and their MFU against the chip's
datasheet dense bf16 peak and its measured bf16 matmul peak (issues #50 and #62).

One command, one chip, one run; it writes one JSON file (every figure, the device, the
driver, the library versions, the date) and one Markdown table (printed last, and written
beside the JSON as `.md`), ready for benchmarks/README.md. What it measures:

- **peak**: an 8192³ bfloat16 matmul through `jax.jit` (random normal operands, median
  of 5 groups of 10 back-to-back calls, each group ended by `block_until_ready`);
- **vit-b16 training**: `zoo.get("vit-b16", jit_compile=True)` (224×224×3, 1,000 classes,
  its own recipe: AdamW, warm-up and cosine decay, `global_clipnorm=1.0`) under the
  `mixed_bfloat16` policy, at the largest batch of 512, 256 and 128 that fits (tried from
  the largest down; an out-of-memory error moves to the next). Beside it timm's
  `vit_base_patch16_224` (same sizes and classes, random weights) at the same batch:
  `torch.compile` (default mode) of the forward pass and the loss,
  `torch.autocast("cuda", dtype=torch.bfloat16)`, fused AdamW (lr 1e-3, weight decay
  0.05 except on the 1-D parameters and `no_weight_decay()`: timm's own split, the
  weights the zoo's recipe excludes), `clip_grad_norm_(1.0)` (the global norm, as the
  zoo's `global_clipnorm`). Images per second;
- **transformer-base training**: `zoo.get("transformer-base", vocabulary_size=37000,
  jit_compile=True)` (6+6 layers, d 512, 8 heads, d_ff 2048, shared tied embedding,
  post-norm, dropout 0.1, label smoothing 0.1, Adam(0.9, 0.98, 1e-9) with the warm-up
  schedule) under `mixed_bfloat16`, on batches of 384 pairs of 64 source and 64 target
  tokens: 24,576 source and 24,576 target tokens, the paper's "approximately 25000
  source tokens and 25000 target tokens" per batch (section 5.1) at one fixed shape, no
  padding. Beside it transformers' `MarianMTModel(MarianConfig(...))` of the same shape
  (d 512, 6+6 layers, 8 heads, d_ff 2048, vocabulary 37,000 shared and tied, ReLU,
  post-norm, scaled embeddings, dropout 0.1; PyTorch's fused attention, as timm's) with
  `torch.compile`, bf16 autocast, fused Adam(0.9, 0.98, 1e-9) at a constant learning rate
  (a schedule costs nothing measurable), cross-entropy with label smoothing 0.1, same
  batch. Tokens per second = (source + target) tokens per second.

Both sides train on one fixed batch of random data already on the device (no input
pipeline). Keras: `model.fit` on a generator that yields those device arrays, one warm-up
epoch of `--warmup-steps` steps (compiling), then `--rounds` epochs of `--steps` steps,
each timed from the call of `fit` to its return followed by `block_until_ready` on the
weights (what a Keras user's epoch costs). PyTorch: the same numbers of steps, each
timed span ended by `torch.cuda.synchronize()`. Rates are medians over rounds; the parts
run one after the other, in two processes (JAX, then PyTorch) so that each has the
whole card.

Float32 matrix products run in TF32 on both sides (`jax_default_matmul_precision` and
`torch.set_float32_matmul_precision("high")`; most products are bf16 anyway).

**MFU** = model FLOPs per second / a peak: the chip's datasheet dense bf16 rate
(`DATASHEET_BF16_TFLOPS`, with its source; the usual MFU, which the goal uses), and the
measured matmul peak above (what the chip gives a plain matmul here). Model FLOPs are counted analytically,
by one formula for both sides of a row (so the two MFUs differ exactly as the two
throughputs do), PaLM's convention (Chowdhery et al. 2022, appendix B): training =
6 × the forward pass's multiply-adds over every matrix product with a weight (patch
embedding, query/key/value/output projections, feed-forward, classifier head or the tied
output projection over the vocabulary), plus 6 × the attention's own products QKᵀ and AV
(2 × T × d multiply-adds per query token per layer, T the keys; the decoder's causal
self-attention counted whole). Embedding look-ups, norms, softmax, activations and the
optimizer are not counted:

- ViT, per image, P patches, T = P + 1 tokens: 6 × (P·p²·C·d + L·T·(4d² + 2·d·m) +
  L·T·2·T·d + d·K); vit-b16 at 224: 105.4 GFLOP;
- Transformer, per pair of S source and T target tokens: 6 × (S·Lₑ·(4d² + 2·d·f + 2·S·d)
  + T·L_d·(4d² + 2·T·d + 2d² + 2·S·d + 2·d·f) + S·L_d·2d² + T·d·V); transformer-base,
  vocabulary 37,000, 384 pairs of 64 + 64 tokens: 9.46 TFLOP a step.

Beside it, for the Keras side, XLA's own count (`jax.jit(model.train_step).lower(...)
.cost_analysis()["flops"]`, before XLA's optimisations; it counts the elementwise ops
too) is recorded as a check of the formula, not used for MFU.

**Fused against explicit attention** (the second table): each zoo model is trained a
second time on the same batch, with the same schedule, with every `ka.MultiHeadAttention`
set to the other attention path (`flash_attention`, read when the step is traced). The
models' own setting is `flash_attention=None`, which is the fused path
(`keras.ops.dot_product_attention`: cuDNN's flash attention for these bf16 inputs) on a
GPU, so the second run there is `flash_attention=False`, the explicit path (the
`(B, N, T, S)` scores, a float32 softmax); on JAX's CPU None is the explicit path, so the
dry run's second run is `flash_attention=True`. Both models train without attention
dropout, as their papers, which the fused path needs. Step times and the ratio
fused/explicit; an explicit run that runs out of memory at the batch the fused one fitted
is recorded as such. It is skipped (and says so) when under 90 s of the run's budget are
left, and by `--no-attention-paths`.

Goals on the H200 (printed with the table): vit-b16 ≥ timm's images/s, transformer-base
≥ the PyTorch model's tokens/s, vit-b16 MFU ≥ 40 %.

**Dry run** (`--dry-run`, what tests/test_bench_gpu_smoke.py runs): the same code paths on
the CPU at tiny sizes (a 512³ peak; `vit-b16` and `transformer-base` with small overrides,
2 steps), in about half a minute. Its figures are no measurement. Without a GPU (and without
`--dry-run`, as `make bench` runs it) the script says so and measures nothing. The PyTorch
rows need torch, timm and transformers (the `bench` extra: `pip install -e '.[bench]'`);
without them they are skipped, the reason printed and recorded, and the JAX side still
runs. On the CPU they run without `torch.compile` (its C++ build would take minutes
here) and with CPU autocast; everything else is the same code. TensorFlow is made
unimportable in the JAX process (an import hook raises `ModuleNotFoundError`), as on the
GPU machine, which has none: an import of it anywhere there fails the run, and the JSON
records that none was loaded.

Usage:
    python benchmarks/bench_gpu.py --dry-run --out /tmp/bench_gpu.json   # CPU, ~25 s
    python benchmarks/bench_gpu.py                    # on a GPU: under 8 minutes on an H200
    python benchmarks/bench_gpu.py --parts transformer --seconds 240     # one row, a rerun

The script runs its two processes with KERAS_BACKEND=jax whatever the caller's backend.

On the lent H200 (Python 3.12, JAX 0.11 and PyTorch 2.11 for CUDA 13, timm and
transformers; no TensorFlow, no Keras), prepare once here, in the repository's root:

    echo /.whl/ >> .git/info/exclude
    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \\
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \\
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \\
        --platform manylinux1_x86_64 -d .whl keras==3.15.1 namex==0.1.0 optree==0.20.0

(2.8 MB in all; keras's other needs, absl-py, numpy, rich, h5py, ml-dtypes and packaging,
and optree's typing-extensions, are on the machine), then `device.run` with
`carry: [".whl"]`, `timeout_s: 480` and the command (one line):

    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade
    --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:. KERAS_BACKEND=jax
    PYTHONUNBUFFERED=1 || exit; set -o pipefail; python3 benchmarks/bench_gpu.py
    --out $OUT/bench_gpu.json 2>&1 | tee $OUT/bench_gpu.log

The run stops starting parts after `--seconds` (440 by default) and ends a process that is
still running 20 s later, so the table is written inside the 480 s, and a 15-minute lease
keeps about 5 minutes to rerun one part (`--parts`). The JSON, the table and the log come
back from $OUT; the JSON is rewritten after every part, so a run stopped at its limit still
returns what it measured.
"""

import argparse
import datetime
import gc
import importlib.abc
import importlib.util
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.abspath(__file__)

# === Sizes ===

FULL = dict(
    matmul=8192, matmul_groups=5, matmul_calls=10,
    vit=dict(overrides=dict(num_classes=1000), batches=(512, 256, 128)),
    transformer=dict(overrides=dict(vocabulary_size=37000), batch=384, length=64),
    warmup_steps=3, steps=20, rounds=3, deadline=440.0,
)
DRY_RUN = dict(
    matmul=512, matmul_groups=5, matmul_calls=5,
    vit=dict(
        overrides=dict(image_size=32, patch_size=8, num_layers=2, hidden_dim=64, num_heads=4,
                       mlp_dim=128, num_classes=10),
        batches=(8, 4),
    ),
    transformer=dict(
        overrides=dict(vocabulary_size=256, num_encoder_layers=1, num_decoder_layers=1,
                       d_model=64, num_heads=4, intermediate_dim=128, max_length=32),
        batch=8, length=16,
    ),
    warmup_steps=1, steps=2, rounds=2, deadline=None,
)
# Dense bf16 Tensor Core rate by NVIDIA's datasheets (half the "with sparsity" figure they
# print), by the name nvidia-smi gives, the more specific names first: the peak MFU is
# conventionally measured against (PaLM's), beside the measured matmul peak.
DATASHEET_BF16_TFLOPS = (
    ("H100 PCIe", 756.0, "NVIDIA H100 Tensor Core GPU datasheet: H100 PCIe, BF16 1,513 TFLOPS "
     "with sparsity"),
    ("H100 NVL", 835.0, "NVIDIA H100 Tensor Core GPU datasheet: H100 NVL, BF16 1,671 TFLOPS "
     "with sparsity"),
    ("H100", 989.4, "NVIDIA H100 Tensor Core GPU datasheet: H100 SXM, BF16 1,979 TFLOPS with "
     "sparsity"),
    ("H200", 989.4, "NVIDIA H200 Tensor Core GPU datasheet: H200 SXM, BF16 1,979 TFLOPS with "
     "sparsity"),
)
GOAL_MFU = 0.40
BENCH_EXTRA = "pip install -e '.[bench]'"

# === FLOPs (the formula of the docstring; the same for both sides of a row) ===


def vit_flops_per_image(sizes):
    """Training FLOPs of one image: 6 × forward multiply-adds of the weights' products
    and of QKᵀ and AV."""
    d, m, layers = sizes["hidden_dim"], sizes["mlp_dim"], sizes["num_layers"]
    patches = (sizes["image_size"] // sizes["patch_size"]) ** 2
    tokens = patches + 1  # the class token
    patch_embedding = patches * sizes["patch_size"] ** 2 * sizes["channels"] * d
    weights = layers * tokens * (4 * d * d + 2 * d * m)
    attention = layers * tokens * 2 * tokens * d  # QKᵀ and AV, (B, N, T, T)
    head = d * sizes["num_classes"]
    return 6 * (patch_embedding + weights + attention + head)


def transformer_flops_per_pair(sizes, source_length, target_length):
    """Training FLOPs of one sentence pair of `source_length` + `target_length` tokens."""
    d, f = sizes["d_model"], sizes["intermediate_dim"]
    s, t = source_length, target_length
    vocabulary = sizes["vocabulary_size"]
    encoder = s * sizes["num_encoder_layers"] * (4 * d * d + 2 * d * f + 2 * s * d)
    decoder = t * sizes["num_decoder_layers"] * (
        4 * d * d + 2 * t * d  # self-attention: projections, QKᵀ and AV
        + 2 * d * d + 2 * s * d  # cross-attention: query and output projections, QKᵀ and AV
        + 2 * d * f
    )
    cross_keys = s * sizes["num_decoder_layers"] * 2 * d * d  # keys and values of the source
    output = t * d * vocabulary  # the tied output projection
    return 6 * (encoder + decoder + cross_keys + output)


# === The results file ===


def read_results(path):
    with open(path) as file:
        return json.load(file)


def update_results(path, key, value):
    """Set `results[key] = value` in the JSON at `path` (written whole, then renamed)."""
    results = read_results(path)
    results[key] = value
    write_results(path, results)
    return results


def write_results(path, results):
    temporary = f"{path}.tmp"
    with open(temporary, "w") as file:
        json.dump(results, file, indent=2)
        file.write("\n")
    os.replace(temporary, path)


def tflops(value):
    return f"{value:.1f}" if value >= 1 else f"{value:.3f}"


def gflop(flops):
    return f"{flops / 1e9:,.1f}" if flops >= 1e9 else f"{flops / 1e9:.4f}"


def out_of_memory(error):
    text = str(error)
    return "RESOURCE_EXHAUSTED" in text or "out of memory" in text.lower()


def one_line(error, limit=300):
    """An error's message on one line, without the terminal's bold codes Keras adds."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(error))
    return " ".join(text.split())[:limit]


def remaining(deadline):
    return float("inf") if deadline is None else deadline - time.time()


def median_rate(units, seconds):
    """Units per second over the median time (for an odd count, the median of the rates; for
    an even one, step times and rates then agree)."""
    return units / statistics.median(seconds)


# === The JAX process: peak, then the zoo models ===


class NoTensorFlow(importlib.abc.MetaPathFinder):
    """Makes `import tensorflow` fail as where it is not installed (the GPU machine)."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "tensorflow":
            raise ModuleNotFoundError(f"No module named {name!r} (bench_gpu.py keeps TensorFlow "
                                      "out of its JAX process, as on the GPU machine)", name=name)
        return None


def jax_child(args):
    # Not `sys.modules["tensorflow"] = None`: Keras takes a key there for an imported module.
    sys.meta_path.insert(0, NoTensorFlow())
    os.environ["KERAS_BACKEND"] = "jax"
    import jax

    sizes = DRY_RUN if args.dry_run else FULL
    gpu = jax.default_backend() == "gpu"
    # TF32 for the float32 matrix products (the loss, the float32 softmax's neighbours), as
    # the PyTorch side's `set_float32_matmul_precision("high")`: the same on both sides.
    jax.config.update("jax_default_matmul_precision", "tensorfloat32")
    import keras

    info = dict(
        backend=jax.default_backend(),
        device=jax.devices()[0].device_kind,
        jax=jax.__version__,
        jaxlib=_version("jaxlib"),  # (not `jax.lib`, which JAX is removing)
        keras=keras.__version__,
        numpy=_version("numpy"),
        keras_backend=keras.backend.backend(),
        float32_matmuls=jax.config.jax_default_matmul_precision,
        xla_python_client_mem_fraction=os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION"),
    )
    update_results(args.out, "jax", info)
    print(f"JAX {info['jax']} on {info['backend']} ({info['device']}), Keras {info['keras']}",
          flush=True)
    if not gpu and not args.dry_run:
        update_results(args.out, "no_gpu", f"JAX sees no GPU (backend {jax.default_backend()!r})")
        return 0

    start = time.perf_counter()
    peak = matmul_peak(sizes["matmul"], sizes["matmul_groups"], sizes["matmul_calls"])
    peak["seconds_taken"] = round(time.perf_counter() - start, 1)
    update_results(args.out, "peak", peak)
    print(f"peak: {peak['n']}³ bf16 matmul through jax.jit, {tflops(peak['tflops'])} TFLOP/s "
          f"(median of {len(peak['group_seconds'])} groups of {peak['calls']}); "
          f"part took {peak['seconds_taken']:.1f} s", flush=True)

    measures = {"vit": keras_vit, "transformer": keras_transformer}
    failed = run_parts(args, "keras", lambda part: measures[part](args, sizes),
                       needed_seconds=0 if args.dry_run else 90)
    update_results(args.out, "tensorflow", dict(
        blocked=any(isinstance(finder, NoTensorFlow) for finder in sys.meta_path),
        loaded="tensorflow" in sys.modules,
    ))
    return failed


def run_parts(args, side, measure, needed_seconds):
    """`measure(part)` for each part in turn, its result, the reason it was skipped or its
    error written to the JSON at once (a run stopped later keeps it). 1 if any failed."""
    failed = 0
    for part in args.parts:
        label = f"{part} ({'Keras' if side == 'keras' else 'PyTorch'})"
        if remaining(args.deadline) < needed_seconds:
            update_results(args.out, f"{part}_{side}", dict(skipped="out of the run's time budget"))
            print(f"{label}: skipped, out of the run's time budget", flush=True)
            continue
        start = time.perf_counter()
        try:
            result = measure(part)
        except Exception as error:  # noqa: BLE001 - recorded; the other parts still run
            traceback.print_exc()
            result = dict(error=f"{type(error).__name__}: {one_line(error)}")
            failed = 1
        result["seconds_taken"] = round(time.perf_counter() - start, 1)
        update_results(args.out, f"{part}_{side}", result)
        print(f"{label}: part took {result['seconds_taken']:.1f} s", flush=True)
    return failed


def _version(package):
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def matmul_peak(n, groups, calls):
    """bf16 `n³` matmul rate through `jax.jit`: median over `groups` of `calls` calls."""
    import jax
    import jax.numpy as jnp

    keys = jax.random.split(jax.random.key(0), 2)
    a = jax.random.normal(keys[0], (n, n), jnp.bfloat16)
    b = jax.random.normal(keys[1], (n, n), jnp.bfloat16)
    matmul = jax.jit(jnp.matmul)
    matmul(a, b).block_until_ready()
    seconds = []
    for _ in range(groups):
        start = time.perf_counter()
        for _ in range(calls):
            c = matmul(a, b)
        c.block_until_ready()
        seconds.append(time.perf_counter() - start)
    flops = 2 * n**3 * calls
    rate = median_rate(flops, seconds)
    return dict(n=n, dtype="bfloat16", calls=calls, group_seconds=[round(s, 6) for s in seconds],
                flops_per_second=rate, tflops=rate / 1e12)


def keras_fit_rates(model, data, units_per_step, steps, rounds, warmup_steps):
    """Warm-up epoch (compiling), then `rounds` epochs of `steps` steps on `data`, a fixed
    batch on the device: seconds of each, and the last loss."""
    import jax
    import numpy as np

    def batches():
        while True:
            yield data

    start = time.perf_counter()
    model.fit(batches(), steps_per_epoch=warmup_steps, epochs=1, shuffle=False, verbose=0)
    jax.block_until_ready([v.value for v in model.trainable_variables])
    warmup = time.perf_counter() - start
    seconds, losses = [], []
    for _ in range(rounds):
        start = time.perf_counter()
        history = model.fit(batches(), steps_per_epoch=steps, epochs=1, shuffle=False,
                            verbose=0)
        jax.block_until_ready([v.value for v in model.trainable_variables])
        seconds.append(time.perf_counter() - start)
        losses.append(float(history.history["loss"][-1]))
    if not np.isfinite(losses).all():
        raise RuntimeError(f"non-finite training loss: {losses}")
    return dict(
        warmup_seconds=round(warmup, 2), round_seconds=[round(s, 4) for s in seconds],
        steps=steps, rounds=rounds, warmup_steps=warmup_steps, last_loss=losses[-1],
        rate=median_rate(steps * units_per_step, seconds),
        step_ms=1000 * statistics.median(seconds) / steps,
    )


def xla_flops(model, data):
    """XLA's FLOP count of one training step (`cost_analysis` of the lowered, unoptimised
    program), or None where the backend gives none."""
    import jax

    state = (
        [v.value for v in model.trainable_variables],
        [v.value for v in model.non_trainable_variables],
        [v.value for v in model.optimizer.variables],
        [v.value for v in model.metrics_variables],
    )
    cost = jax.jit(model.train_step).lower(state, data).cost_analysis()
    if isinstance(cost, (list, tuple)):
        cost = cost[0] if cost else None
    return float(cost["flops"]) if cost and "flops" in cost else None


def add_xla_flops(result, model, data, analytic):
    """XLA's count of a step beside the formula's, as a check of the formula."""
    start = time.perf_counter()
    try:
        counted = xla_flops(model, data)
    except Exception as error:  # noqa: BLE001 - a check only: its failure costs no figure
        print(f"{result['model']} (Keras): no XLA count ({one_line(error)})", flush=True)
        result["xla_flops_error"] = one_line(error)
        counted = None
    result["xla_flops_per_step"] = counted
    result["analytic_flops_per_step"] = analytic
    result["xla_over_analytic"] = counted / analytic if counted else None
    if counted:
        print(f"{result['model']} (Keras): XLA counts {gflop(counted)} GFLOP a step, the "
              f"formula {gflop(analytic)} ({counted / analytic:.3f}×; "
              f"{time.perf_counter() - start:.1f} s to lower)", flush=True)


def fresh_session():
    """A new Keras session (no model left on the device) with the mixed_bfloat16 policy,
    which `clear_session` resets."""
    import keras

    keras.backend.clear_session()
    gc.collect()  # the last model's arrays, before the next one takes the device's memory
    keras.config.set_dtype_policy("mixed_bfloat16")


def policies(model):
    """The dtype policies of the model's layers (name -> count): mixed_bfloat16 but for
    the float32 logits."""
    counts = {}
    for layer in model.layers:
        if layer.weights or layer.name == "logits":
            counts[layer.dtype_policy.name] = counts.get(layer.dtype_policy.name, 0) + 1
    return counts


def _model_fields(config, names):
    return {name: getattr(config, name) for name in names}


VIT_FIELDS = ("image_size", "channels", "num_classes", "patch_size", "num_layers", "hidden_dim",
              "num_heads", "mlp_dim", "dropout", "attention_dropout", "layer_norm_epsilon",
              "pooling", "activation", "learning_rate", "weight_decay", "label_smoothing")
TRANSFORMER_FIELDS = ("vocabulary_size", "num_encoder_layers", "num_decoder_layers", "d_model",
                      "num_heads", "intermediate_dim", "dropout", "attention_dropout",
                      "max_length", "norm_first", "activation", "scale_embeddings",
                      "tie_embeddings", "label_smoothing", "pad_id", "start_id", "end_id")


def keras_vit(args, sizes):
    import jax
    import numpy as np

    import zoo

    overrides = dict(sizes["vit"]["overrides"], jit_compile=True)
    config = zoo.config("vit-b16", **overrides)
    fields = _model_fields(config, VIT_FIELDS)
    flops_per_image = vit_flops_per_image(fields)
    tried = {}
    for batch in args.vit_batches or sizes["vit"]["batches"]:
        fresh_session()
        rng = np.random.default_rng(0)
        size, channels = config.image_size, config.channels
        images = jax.device_put(rng.uniform(0, 255, (batch, size, size, channels)).astype("float32"))
        labels = jax.device_put(rng.integers(0, config.num_classes, batch).astype("int32"))
        try:
            model = zoo.get("vit-b16", **overrides)
            if args.simulate_oom_above and batch > args.simulate_oom_above:
                raise RuntimeError(f"RESOURCE_EXHAUSTED: out of memory simulated above batch "
                                   f"{args.simulate_oom_above} (--simulate-oom-above)")
            timing = keras_fit_rates(model, (images, labels), batch, args.steps, args.rounds,
                                     args.warmup_steps)
        except Exception as error:  # noqa: BLE001 - only out-of-memory moves on
            if not out_of_memory(error):
                raise
            tried[str(batch)] = f"out of memory: {one_line(error, 200)}"
            print(f"vit-b16 (Keras): batch {batch} does not fit ({tried[str(batch)]})", flush=True)
            model = images = labels = None
            continue
        tried[str(batch)] = "fits"
        break
    else:
        return dict(model="vit-b16", fields=fields, batches_tried=tried,
                    error="no batch fits")
    rate = timing.pop("rate")
    result = dict(
        model="vit-b16", fields=fields, batch=batch, batches_tried=tried,
        parameters=model.count_params(), dtype_policies=policies(model),
        jit_compile=True, images_per_second=rate, flops_per_image=flops_per_image,
        flops_per_second=rate * flops_per_image, **timing,
    )
    print(f"vit-b16 (Keras): batch {batch}, {rate:,.0f} images/s, {timing['step_ms']:.1f} ms "
          f"a step (warm-up {timing['warmup_seconds']:.1f} s)", flush=True)
    add_xla_flops(result, model, (images, labels), batch * flops_per_image)
    model = None  # the device's memory, before the second model
    add_attention_paths(args, result, overrides, (images, labels), batch)
    return result


def transformer_batch(config, batch, length, seed=0):
    """Random source and target ids (no padding), labels = the target shifted by one."""
    import numpy as np

    rng = np.random.default_rng(seed)
    vocabulary = config["vocabulary_size"]
    source = rng.integers(4, vocabulary, (batch, length)).astype("int32")
    target = rng.integers(4, vocabulary, (batch, length)).astype("int32")
    target[:, 0] = config["start_id"]
    labels = np.concatenate([target[:, 1:], np.full((batch, 1), config["end_id"], "int32")], 1)
    return source, target, labels


def keras_transformer(args, sizes):
    import jax

    import zoo

    batch = args.transformer_batch or sizes["transformer"]["batch"]
    length = args.transformer_length or sizes["transformer"]["length"]
    overrides = dict(sizes["transformer"]["overrides"], jit_compile=True)
    if length > zoo.config("transformer-base", **overrides).max_length:
        overrides["max_length"] = length  # sinusoidal positions: no weights, no cost
    config = zoo.config("transformer-base", **overrides)
    fields = _model_fields(config, TRANSFORMER_FIELDS)
    flops_per_pair = transformer_flops_per_pair(fields, length, length)
    fresh_session()
    source, target, labels = (jax.device_put(a) for a in transformer_batch(fields, batch, length))
    data = ({"source": source, "target": target}, labels)
    model = zoo.get("transformer-base", **overrides)
    tokens = 2 * batch * length  # source + target
    timing = keras_fit_rates(model, data, tokens, args.steps, args.rounds, args.warmup_steps)
    rate = timing.pop("rate")
    pairs_per_second = rate / tokens * batch
    result = dict(
        model="transformer-base", fields=fields, batch=batch, source_length=length,
        target_length=length, tokens_per_step=tokens, parameters=model.count_params(),
        dtype_policies=policies(model), jit_compile=True,
        tokens_per_second=rate, flops_per_pair=flops_per_pair,
        flops_per_second=pairs_per_second * flops_per_pair, **timing,
    )
    print(f"transformer-base (Keras): {batch} × ({length} + {length}) tokens, {rate:,.0f} "
          f"tokens/s, {timing['step_ms']:.1f} ms a step (warm-up {timing['warmup_seconds']:.1f} s)",
          flush=True)
    add_xla_flops(result, model, data, batch * flops_per_pair)
    model = None  # the device's memory, before the second model
    add_attention_paths(args, result, overrides, data, tokens)
    return result


def set_flash_attention(model, value):
    """`flash_attention = value` on every `ka.MultiHeadAttention` in `model` (read when a
    step is traced, so before the first `fit`); how many there are."""
    from keras_attention.layers.multi_head import MultiHeadAttention

    layers = [layer for layer in model._flatten_layers() if isinstance(layer, MultiHeadAttention)]
    for layer in layers:
        layer.flash_attention = value
    return len(layers)


def add_attention_paths(args, result, overrides, data, units_per_step):
    """`result["attention_paths"]`: the zoo model's step time (`flash_attention=None`)
    beside the same model's with the other attention path forced (the docstring's second
    table), on the same batch and schedule."""
    import zoo
    from keras_attention.layers.multi_head import fused_by_default

    default = "fused" if fused_by_default() else "explicit"
    other = "explicit" if default == "fused" else "fused"
    paths = dict(default=default, other=other,
                 **{default: dict(flash_attention=None, step_ms=result["step_ms"])})
    result["attention_paths"] = paths
    name = result["model"]
    if not args.attention_paths or remaining(args.deadline) < (0 if args.dry_run else 90):
        why = "--no-attention-paths" if not args.attention_paths else "the run's time budget"
        paths[other] = dict(skipped=why)
        print(f"{name} (Keras): {other} attention skipped ({why})", flush=True)
        return
    fresh_session()
    model = zoo.get(name, **overrides)
    flag = other == "fused"
    layers = set_flash_attention(model, flag)
    try:
        timing = keras_fit_rates(model, data, units_per_step, args.steps, args.rounds,
                                 args.warmup_steps)
    except Exception as error:  # noqa: BLE001 - only out-of-memory is recorded
        if not out_of_memory(error):
            raise
        paths[other] = dict(flash_attention=flag, error=f"out of memory: {one_line(error, 200)}")
        print(f"{name} (Keras): {other} attention runs out of memory", flush=True)
        return
    paths[other] = dict(flash_attention=flag, layers=layers, step_ms=timing["step_ms"],
                        warmup_seconds=timing["warmup_seconds"], last_loss=timing["last_loss"])
    paths["fused_over_explicit"] = paths["fused"]["step_ms"] / paths["explicit"]["step_ms"]
    print(f"{name} (Keras): {other} attention (flash_attention={flag}, {layers} layers) "
          f"{timing['step_ms']:.1f} ms a step; fused/explicit "
          f"{paths['fused_over_explicit']:.2f}", flush=True)


# === The PyTorch process ===


def torch_child(args):
    problems = [problem for problem in map(import_problem, ("torch", "timm", "transformers"))
                if problem]
    results = read_results(args.out)
    if problems:
        reason = (f"{'; '.join(problems)}: the PyTorch rows need torch, timm and transformers, "
                  f"the bench extra ({BENCH_EXTRA})")
        for part in args.parts:
            update_results(args.out, f"{part}_torch", dict(skipped=reason))
        print(f"PyTorch rows skipped: {reason}", flush=True)
        return 0
    import torch

    cuda = torch.cuda.is_available()
    if not cuda and not args.dry_run:
        for part in args.parts:
            update_results(args.out, f"{part}_torch", dict(skipped="PyTorch sees no GPU"))
        return 0
    device = "cuda" if cuda else "cpu"
    compile_ = cuda if args.torch_compile is None else args.torch_compile
    import timm
    import transformers

    torch.set_float32_matmul_precision("high")  # TF32, as the JAX side's
    info = dict(torch=torch.__version__, timm=timm.__version__,
                transformers=transformers.__version__, device=device,
                device_name=torch.cuda.get_device_name() if cuda else platform.processor(),
                cuda=torch.version.cuda, compile=compile_,
                float32_matmuls=torch.get_float32_matmul_precision())
    update_results(args.out, "torch", info)
    print(f"PyTorch {info['torch']} ({device}{', CUDA ' + info['cuda'] if cuda else ''}), "
          f"timm {info['timm']}, transformers {info['transformers']}; "
          f"torch.compile {'on' if compile_ else 'off (CPU)'}", flush=True)
    measures = {"vit": torch_vit, "transformer": torch_marian}

    def measure(part):
        keras_side = results.get(f"{part}_keras") or {}
        if "fields" not in keras_side or "batch" not in keras_side:
            why = keras_side.get("skipped") or keras_side.get("error") or "no Keras result"
            return dict(skipped=f"no Keras side to match: {why}")
        try:
            return measures[part](args, keras_side, device, compile_)
        except torch.cuda.OutOfMemoryError as error:
            return dict(error=f"out of memory at batch {keras_side['batch']}: {one_line(error)}")

    return run_parts(args, "torch", measure, needed_seconds=0 if args.dry_run else 60)


def import_problem(name):
    """None where `import name` works, else why not: not installed, or its error (timm
    with a torchvision built for another torch, say)."""
    if importlib.util.find_spec(name) is None:
        return f"{name} not installed"
    try:
        __import__(name)
    except Exception as error:  # noqa: BLE001 - any failure to import means the rows cannot run
        return f"{name} installed but not importable ({type(error).__name__}: {one_line(error, 120)})"
    return None


def torch_train_rates(model, loss_fn, optimizer, device, steps, rounds, warmup_steps,
                      clip_norm=None):
    """The same schedule as `keras_fit_rates`: warm-up steps (compiling), then `rounds`
    spans of `steps` steps, each ended by a device synchronisation."""
    import torch

    autocast = torch.autocast(device, dtype=torch.bfloat16)
    parameters = [p for p in model.parameters() if p.requires_grad]

    def step():
        with autocast:
            loss = loss_fn()
        loss.backward()
        if clip_norm is not None:
            torch.nn.utils.clip_grad_norm_(parameters, clip_norm)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    def synchronize():
        if device == "cuda":
            torch.cuda.synchronize()

    model.train()
    start = time.perf_counter()
    for _ in range(warmup_steps):
        step()
    synchronize()
    warmup = time.perf_counter() - start
    seconds = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(steps):
            loss = step()
        synchronize()
        seconds.append(time.perf_counter() - start)
    last_loss = float(loss.detach().float())
    if not torch.isfinite(torch.tensor(last_loss)):
        raise RuntimeError(f"non-finite training loss: {last_loss}")
    return dict(warmup_seconds=round(warmup, 2), round_seconds=[round(s, 4) for s in seconds],
                steps=steps, rounds=rounds, warmup_steps=warmup_steps, last_loss=last_loss,
                step_ms=1000 * statistics.median(seconds) / steps, seconds=seconds)


def torch_vit(args, keras_side, device, compile_):
    """timm's vit_base_patch16_224 with the Keras side's sizes, batch and recipe."""
    import timm
    import torch
    import torch.nn.functional as F

    try:
        from timm.optim import param_groups_weight_decay
    except ImportError:  # timm before 1.0.10
        from timm.optim.optim_factory import param_groups_weight_decay

    fields, batch = keras_side["fields"], keras_side["batch"]
    model = timm.create_model(
        "vit_base_patch16_224", pretrained=False, num_classes=fields["num_classes"],
        img_size=fields["image_size"], patch_size=fields["patch_size"],
        in_chans=fields["channels"], embed_dim=fields["hidden_dim"], depth=fields["num_layers"],
        num_heads=fields["num_heads"], mlp_ratio=fields["mlp_dim"] / fields["hidden_dim"],
        drop_rate=fields["dropout"], attn_drop_rate=fields["attention_dropout"],
    ).to(device)
    generator = torch.Generator().manual_seed(0)
    size = fields["image_size"]
    images = torch.randn(batch, fields["channels"], size, size, generator=generator).to(device)
    labels = torch.randint(0, fields["num_classes"], (batch,), generator=generator).to(device)
    # timm's own split (its optimizer factory's default): no decay for the 1-D parameters
    # (biases, norms) and `model.no_weight_decay()` (position embedding, class token), the
    # weights the zoo's recipe excludes (bias, gamma, beta, position_embeddings, token).
    groups = param_groups_weight_decay(model, fields["weight_decay"], model.no_weight_decay())
    optimizer = torch.optim.AdamW(groups, lr=fields["learning_rate"], fused=device == "cuda")

    def loss_of(images, labels):
        logits = model(images)
        return F.cross_entropy(logits.float(), labels, label_smoothing=fields["label_smoothing"])

    compiled = torch.compile(loss_of) if compile_ else loss_of
    timing = torch_train_rates(model, lambda: compiled(images, labels), optimizer, device,
                               args.steps, args.rounds, args.warmup_steps, clip_norm=1.0)
    rate = median_rate(args.steps * batch, timing.pop("seconds"))
    flops_per_image = vit_flops_per_image(fields)
    parameters = sum(p.numel() for p in model.parameters() if p.requires_grad)
    print(f"vit-b16 (timm vit_base_patch16_224): batch {batch}, {rate:,.0f} images/s, "
          f"{timing['step_ms']:.1f} ms a step (warm-up {timing['warmup_seconds']:.1f} s)",
          flush=True)
    fused = getattr(getattr(model.blocks[0], "attn", None), "fused_attn", None)
    return dict(model="timm vit_base_patch16_224", batch=batch, parameters=parameters,
                compile=compile_, autocast="bfloat16", images_per_second=rate,
                attention="scaled_dot_product_attention" if fused else "timm's own",
                flops_per_image=flops_per_image, flops_per_second=rate * flops_per_image,
                **timing)


def torch_marian(args, keras_side, device, compile_):
    """transformers' MarianMTModel from a config of the Keras side's sizes."""
    import numpy as np
    import torch
    import torch.nn.functional as F
    from transformers import MarianConfig, MarianMTModel

    fields, batch = keras_side["fields"], keras_side["batch"]
    length = keras_side["source_length"]
    config = MarianConfig(
        vocab_size=fields["vocabulary_size"], d_model=fields["d_model"],
        encoder_layers=fields["num_encoder_layers"], decoder_layers=fields["num_decoder_layers"],
        encoder_attention_heads=fields["num_heads"], decoder_attention_heads=fields["num_heads"],
        encoder_ffn_dim=fields["intermediate_dim"], decoder_ffn_dim=fields["intermediate_dim"],
        max_position_embeddings=fields["max_length"], activation_function=fields["activation"],
        dropout=fields["dropout"], attention_dropout=fields["attention_dropout"],
        activation_dropout=0.0, scale_embedding=fields["scale_embeddings"],
        share_encoder_decoder_embeddings=True, tie_word_embeddings=fields["tie_embeddings"],
        pad_token_id=fields["pad_id"], decoder_start_token_id=fields["start_id"],
        eos_token_id=fields["end_id"], forced_eos_token_id=fields["end_id"], use_cache=False,
    )
    model = MarianMTModel(config).to(device)
    source, target, labels = (torch.from_numpy(a.astype(np.int64)).to(device)
                              for a in transformer_batch(fields, batch, length))
    attention_mask = torch.ones_like(source)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9,
                                 fused=device == "cuda")
    vocabulary = fields["vocabulary_size"]

    def loss_of(source, attention_mask, target, labels):
        logits = model(input_ids=source, attention_mask=attention_mask,
                       decoder_input_ids=target).logits  # (B, T, V)
        return F.cross_entropy(logits.float().reshape(-1, vocabulary), labels.reshape(-1),
                               ignore_index=fields["pad_id"],
                               label_smoothing=fields["label_smoothing"])

    compiled = torch.compile(loss_of) if compile_ else loss_of
    timing = torch_train_rates(model, lambda: compiled(source, attention_mask, target, labels),
                               optimizer, device, args.steps, args.rounds, args.warmup_steps)
    tokens = 2 * batch * length
    rate = median_rate(args.steps * tokens, timing.pop("seconds"))
    flops_per_pair = transformer_flops_per_pair(fields, length, length)
    parameters = sum(p.numel() for p in model.parameters() if p.requires_grad)
    print(f"transformer-base (MarianMTModel): {batch} × ({length} + {length}) tokens, "
          f"{rate:,.0f} tokens/s, {timing['step_ms']:.1f} ms a step "
          f"(warm-up {timing['warmup_seconds']:.1f} s)", flush=True)
    return dict(model="transformers MarianMTModel", batch=batch, source_length=length,
                target_length=length, tokens_per_step=tokens, parameters=parameters,
                attention=model.config._attn_implementation,
                compile=compile_, autocast="bfloat16", tokens_per_second=rate,
                flops_per_pair=flops_per_pair,
                flops_per_second=rate / tokens * batch * flops_per_pair, **timing)


# === The parent: the machine, the two processes, the table ===


def machine():
    """The GPU's name, memory and driver (`nvidia-smi`), the CPU and its core count."""
    found = dict(cpu=_cpu_model(), cores=os.cpu_count(), platform=platform.platform(),
                 python=platform.python_version())
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total,driver_version",
             "--format=csv,noheader"], capture_output=True, text=True, timeout=60, check=True,
        ).stdout.strip().splitlines()
        name, memory, driver = (cell.strip() for cell in out[0].split(","))
        found.update(gpu=name, gpu_memory=memory, driver=driver)
    except (OSError, subprocess.SubprocessError, IndexError, ValueError):
        found.update(gpu=None, driver=None)
    return found


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def run_child(kind, args, deadline):
    env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=os.pathsep.join(filter(None, (ROOT, os.environ.get("PYTHONPATH")))))
    env.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.92")
    command = [sys.executable, SCRIPT, "--child", kind, "--out", args.out,
               "--parts", ",".join(args.parts), "--steps", str(args.steps),
               "--rounds", str(args.rounds), "--warmup-steps", str(args.warmup_steps)]
    if args.dry_run:
        command.append("--dry-run")
    if deadline is not None:
        command += ["--deadline", str(deadline)]
    if args.vit_batches:
        command += ["--vit-batches", ",".join(map(str, args.vit_batches))]
    if args.transformer_batch:
        command += ["--transformer-batch", str(args.transformer_batch)]
    if args.transformer_length:
        command += ["--transformer-length", str(args.transformer_length)]
    if args.simulate_oom_above:
        command += ["--simulate-oom-above", str(args.simulate_oom_above)]
    if not args.attention_paths:
        command.append("--no-attention-paths")
    if args.torch_compile is not None:
        command.append("--torch-compile" if args.torch_compile else "--no-torch-compile")
    # Past the budget by 20 s at most, so that the table is still written inside the
    # device command's limit (480 s against a budget of 440, see the docstring).
    timeout = None if deadline is None else max(deadline - time.time(), 0) + 20
    start = time.perf_counter()
    try:
        code = subprocess.run(command, env=env, timeout=timeout).returncode
    except subprocess.TimeoutExpired:
        code = "killed at the run's time budget"
    return code, round(time.perf_counter() - start, 1)


def datasheet_peak(gpu):
    """`(dense bf16 TFLOP/s, source)` of the GPU named `gpu` (nvidia-smi's name), or None."""
    for chip, rate, source in DATASHEET_BF16_TFLOPS:
        if chip in (gpu or ""):
            return rate, source
    return None


def ratio_row(results, part):
    """The row of `part` in the summary: each side's rate and MFU against the measured matmul
    peak (`*_mfu`) and the datasheet's (`*_mfu_datasheet`), or why it is missing, their ratio
    and parameter counts."""
    keras_side = results.get(f"{part}_keras") or {}
    torch_side = results.get(f"{part}_torch") or {}
    unit = "images_per_second" if part == "vit" else "tokens_per_second"
    peak = (results.get("peak") or {}).get("flops_per_second")
    datasheet = datasheet_peak(results["machine"].get("gpu"))
    row = dict(unit=unit)
    for name, side in (("keras", keras_side), ("torch", torch_side)):
        if unit in side:
            row[name] = side[unit]
            row[f"{name}_parameters"] = side["parameters"]
            if peak:
                row[f"{name}_mfu"] = side["flops_per_second"] / peak
            if datasheet:
                row[f"{name}_mfu_datasheet"] = side["flops_per_second"] / (datasheet[0] * 1e12)
        else:
            row[f"{name}_missing"] = side.get("skipped") or side.get("error") or "not run"
    if "keras" in row and "torch" in row:
        row["keras_over_torch"] = row["keras"] / row["torch"]
    return row


def goals(results):
    """The three goals; MFU against the datasheet's peak (the usual MFU, PaLM's), else, on a
    chip the table does not know, against the measured matmul peak (the goal says which)."""
    vit, transformer = results["summary"].get("vit", {}), results["summary"].get("transformer", {})
    against = "datasheet" if "keras_mfu_datasheet" in vit else "measured matmul peak"
    mfu = vit.get("keras_mfu_datasheet", vit.get("keras_mfu"))
    return {
        "vit-b16 images/s >= timm's": _goal(vit.get("keras_over_torch"), 1.0),
        "transformer-base tokens/s >= the PyTorch model's":
            _goal(transformer.get("keras_over_torch"), 1.0),
        f"vit-b16 MFU >= {GOAL_MFU:.0%} (of the {against})": _goal(mfu, GOAL_MFU),
    }


def _goal(value, target):
    if value is None:
        return dict(value=None, met=None)
    return dict(value=value, met=value >= target)


TABLE_NAMES = {
    "vit": ("vit-b16 training, images/s", "timm `vit_base_patch16_224`"),
    "transformer": ("transformer-base training, tokens/s (source + target)", "`MarianMTModel`"),
}


def run_and_peak_lines(results):
    """The table's first lines: the run (the machine, the versions, the rounds) and the peaks."""
    machine_, jax_info, torch_info = results["machine"], results.get("jax", {}), results.get("torch", {})
    where = machine_.get("gpu") or (jax_info.get("device") if jax_info.get("backend") == "gpu"
                                    else f"CPU ({machine_['cpu']}, {machine_['cores']} cores)")
    torch_versions = (f"PyTorch {torch_info['torch']}, timm {torch_info['timm']}, transformers "
                      f"{torch_info['transformers']}" if torch_info else "no PyTorch")
    lines = [
        f"{results['date'][:10]}, `python benchmarks/bench_gpu.py {results['arguments']}`"
        f"{' (**dry run**: CPU, tiny sizes; not a measurement)' if results['dry_run'] else ''}: "
        f"{where}, driver {machine_.get('driver') or 'none'}; Python {machine_['python']}, "
        f"JAX {jax_info.get('jax')}, Keras {jax_info.get('keras')}; {torch_versions}. "
        f"{results['rounds']} rounds of {results['steps']} steps after {results['warmup_steps']} "
        "of warm-up; medians.",
    ]
    peak = results.get("peak")
    datasheet = datasheet_peak(machine_.get("gpu"))
    if peak:
        of_datasheet = (f", {peak['tflops'] / datasheet[0]:.0%} of the datasheet's" if datasheet
                        else "")
        lines += ["", f"Peaks: measured, a {peak['n']}³ bf16 matmul through `jax.jit`, "
                  f"**{tflops(peak['tflops'])} TFLOP/s** (median of {len(peak['group_seconds'])} "
                  f"groups of {peak['calls']}{of_datasheet}); datasheet, "
                  + (f"**{datasheet[0]:.1f} TFLOP/s** dense bf16 ({datasheet[1]}, halved)"
                     if datasheet else "none known for this device")
                  + ". MFU = the analytic model FLOPs per second (the script's docstring) / a "
                  "peak: against the datasheet's (the usual MFU), and against the measured one."]
    return lines


def table(results):
    """The Markdown that benchmarks/README.md takes: the run, the peak, the table, the goals."""
    torch_info = results.get("torch", {})
    lines = run_and_peak_lines(results)
    compiled = "torch.compile" if torch_info.get("compile", True) else "eager"
    lines += ["", "| workload | batch | zoo: Keras on JAX (XLA, mixed_bfloat16) | PyTorch "
              f"({compiled}, bf16 autocast) | zoo / PyTorch | MFU zoo (datasheet / measured) | "
              "MFU PyTorch (datasheet / measured) |",
              "|---|---|---:|---:|---:|---:|---:|"]
    notes = []
    for part in results["parts"]:
        row, keras_side = results["summary"][part], results.get(f"{part}_keras") or {}
        batch = keras_side.get("batch", "–")
        if part == "transformer" and "batch" in keras_side:
            batch = f"{batch} × ({keras_side['source_length']} + {keras_side['target_length']})"
        workload, torch_name = TABLE_NAMES[part]
        cells = []
        for name, label in (("keras", workload.split(" ")[0]), ("torch", torch_name)):
            if name in row:
                cells.append(f"{row[name]:,.0f}" + (f" ({torch_name})" if name == "torch" else ""))
            else:
                cells.append("–")
                notes.append(f"{label} ({'zoo' if name == 'keras' else 'PyTorch'}): "
                             f"{row[f'{name}_missing']}")
        ratio = f"**{row['keras_over_torch']:.2f}×**" if "keras_over_torch" in row else "–"
        mfus = [" / ".join(f"{100 * row[k]:.1f}%" if k in row else "–"
                           for k in (f"{side}_mfu_datasheet", f"{side}_mfu"))
                for side in ("keras", "torch")]
        lines.append(f"| {workload} | {batch} | {cells[0]} | {cells[1]} | {ratio} | {mfus[0]} | "
                     f"{mfus[1]} |")
        if "keras_parameters" in row and "torch_parameters" in row:
            same = row["keras_parameters"] == row["torch_parameters"]
            notes.append(f"{workload.split(' ')[0]}: {row['keras_parameters']:,} trainable "
                         f"parameters in the zoo's, {row['torch_parameters']:,} in "
                         f"{torch_name}{' (the same)' if same else ' (they differ)'}.")
    lines.append("")
    lines += [f"- {note}" for note in notes]
    lines += attention_table(results)
    for goal, state in results["goals"].items():
        if state["met"] is None:
            verdict = "not measured"
        else:
            value = (f"{100 * state['value']:.1f}%" if "MFU" in goal else f"{state['value']:.2f}×")
            verdict = f"{'met' if state['met'] else 'not met'} ({value})"
        lines.append(f"- Goal {goal}: {verdict}"
                     f"{' (dry run: not a measurement)' if results['dry_run'] else ''}.")
    return "\n".join(lines) + "\n"


def attention_table(results):
    """The second table's lines: each zoo model's step time with fused and with explicit
    attention (`add_attention_paths`), none where neither part has them."""
    rows = []
    for part in results["parts"]:
        paths = (results.get(f"{part}_keras") or {}).get("attention_paths")
        if not paths:
            continue
        cells = []
        for path in ("fused", "explicit"):
            side = paths.get(path, {})
            mark = " (default)" if paths["default"] == path else ""
            cells.append(f"{side['step_ms']:.1f}{mark}" if "step_ms" in side
                         else side.get("skipped") or side.get("error") or "–")
        ratio = (f"**{paths['fused_over_explicit']:.2f}×**" if "fused_over_explicit" in paths
                 else "–")
        rows.append(f"| {TABLE_NAMES[part][0].split(',')[0]} | {cells[0]} | {cells[1]} | {ratio} |")
    if not rows:
        return []
    return ["", "Attention of the zoo's `ka.MultiHeadAttention`, the same training step: fused "
            "(`keras.ops.dot_product_attention`) against explicit (scores, float32 softmax); "
            "ms a step, medians.", "",
            "| workload | fused ms | explicit ms | fused / explicit |", "|---|---:|---:|---:|",
            *rows, ""]


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true",
                        help="tiny sizes on the CPU, the same code paths (a smoke test)")
    parser.add_argument("--out", default=None,
                        help="the JSON file (default: $OUT/bench_gpu.json where OUT is set, "
                        "else benchmarks/results/bench_gpu.json); the table goes beside it, .md")
    parser.add_argument("--parts", default="vit,transformer",
                        help="comma-separated subset of vit,transformer (default both)")
    parser.add_argument("--steps", type=int, default=None, help="timed steps per round (20)")
    parser.add_argument("--rounds", type=int, default=None, help="timed rounds (3)")
    parser.add_argument("--warmup-steps", type=int, default=None,
                        help="steps of the warm-up epoch, which compiles (3)")
    parser.add_argument("--vit-batches", default=None,
                        help="ViT batches to try, largest first (512,256,128)")
    parser.add_argument("--transformer-batch", type=int, default=None,
                        help="sentence pairs per batch (384)")
    parser.add_argument("--transformer-length", type=int, default=None,
                        help="source and target length (64)")
    parser.add_argument("--torch-compile", dest="torch_compile", action="store_true",
                        default=None, help="torch.compile (default: on a GPU only)")
    parser.add_argument("--no-torch-compile", dest="torch_compile", action="store_false")
    parser.add_argument("--seconds", type=float, default=None,
                        help="the run's time budget: parts that would start later are skipped "
                        "(440; none in a dry run)")
    parser.add_argument("--no-attention-paths", dest="attention_paths", action="store_false",
                        help="skip the second training of each zoo model with the other "
                        "attention path (fused against explicit)")
    parser.add_argument("--child", choices=("jax", "torch"), help=argparse.SUPPRESS)
    # The test's way through the batch fallback on a CPU, where nothing runs out of memory.
    parser.add_argument("--simulate-oom-above", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--deadline", type=float, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sizes = DRY_RUN if args.dry_run else FULL
    args.parts = args.parts.split(",")
    for part in args.parts:
        if part not in ("vit", "transformer"):
            parser.error(f"unknown part {part!r}; choose from vit, transformer")
    if args.vit_batches:
        args.vit_batches = [int(b) for b in args.vit_batches.split(",")]
    for name in ("steps", "rounds", "warmup_steps"):
        if getattr(args, name) is None:
            setattr(args, name, sizes[name])
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1; received {getattr(args, name)}")
    if args.seconds is None:
        args.seconds = sizes["deadline"]
    if args.out is None:
        folder = os.environ.get("OUT") or os.path.join(ROOT, "benchmarks", "results")
        args.out = os.path.join(folder, "bench_gpu_dry_run.json" if args.dry_run
                                else "bench_gpu.json")
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.child == "jax":
        return jax_child(args)
    if args.child == "torch":
        return torch_child(args)

    start = time.time()
    deadline = None if args.seconds is None else start + args.seconds
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    arguments = " ".join(sys.argv[1:] if argv is None else argv)
    results = dict(
        benchmark="benchmarks/bench_gpu.py", arguments=arguments, dry_run=args.dry_run,
        date=datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        machine=machine(), parts=args.parts,
        steps=args.steps, rounds=args.rounds, warmup_steps=args.warmup_steps,
    )
    write_results(args.out, results)
    gpu = results["machine"]["gpu"]
    print(f"bench_gpu.py  {results['date']}  {gpu or 'no GPU (nvidia-smi)'}, driver "
          f"{results['machine']['driver']}; CPU {results['machine']['cpu']}, "
          f"{results['machine']['cores']} cores; Python {results['machine']['python']}")
    print(f"command: python benchmarks/bench_gpu.py {arguments}", flush=True)

    processes = {}
    code, seconds = run_child("jax", args, deadline)
    processes["jax"] = dict(returncode=code, seconds=seconds)
    results = update_results(args.out, "processes", processes)
    if "no_gpu" in results:
        print(f"bench_gpu.py measures a GPU, and {results['no_gpu']}: nothing measured. "
              "On a CPU, run it with --dry-run (tiny sizes, the same code paths).")
        return 0
    # Even after a failed JAX part: the PyTorch process matches the parts that ran.
    code, seconds = run_child("torch", args, deadline)
    processes["torch"] = dict(returncode=code, seconds=seconds)
    results = update_results(args.out, "processes", processes)
    results["summary"] = {part: ratio_row(results, part) for part in args.parts}
    results["goals"] = goals(results)
    results["total_seconds"] = round(time.time() - start, 1)
    write_results(args.out, results)
    markdown = table(results)
    with open(os.path.splitext(args.out)[0] + ".md", "w") as file:
        file.write(markdown)
    print()
    print(f"JAX process {processes['jax']['seconds']:.0f} s, PyTorch process "
          f"{processes.get('torch', {}).get('seconds', 0):.0f} s, total "
          f"{results['total_seconds']:.0f} s. Results: {args.out} (table: "
          f"{os.path.splitext(args.out)[0]}.md)")
    print()
    print(markdown)
    failed = {name: p["returncode"] for name, p in processes.items() if p["returncode"] != 0}
    if failed:
        print(f"bench_gpu.py: a process failed: {failed}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
