"""Training throughput of zoo models against same-size models built from keras-hub layers.

Two workloads, the settings of /work/shared/BENCHMARKS.md:

- encoder-decoder Transformer: vocabulary 8000, d 256, 4 heads, d_ff 1024, 3+3
  layers, batch 32, source and target length 64; target tokens per second.
  Zoo: `zoo.get("transformer-small", ...)`; keras-hub:
  `keras_hub.layers.TokenAndPositionEmbedding` + `TransformerEncoder` +
  `TransformerDecoder`.
- ViT: 28x28x1 images, patch 4, d 64, 4 heads, 4 layers, MLP 128, batch 128;
  images per second. Zoo: `zoo.get("vit-tiny", ...)`; keras-hub: a Conv2D patch
  projection, a class token, `keras_hub.layers.PositionEmbedding` and
  `keras_hub.layers.TransformerEncoder(normalize_first=True)`.

Both sides of each pair have exactly the same parameter count (checked) and are
compiled with the same zoo recipe (optimizer, schedule, loss, metrics), so only
the model code differs. Variants: dropout 0 and 0.1 (on the residuals, the
embeddings and the attention weights in both), `tf.function` and XLA
(`jit_compile=True`). Every variant is built and warmed up first, then each
round times every variant back to back (the order reversed every other round)
together with a 2048³ float32 matmul, the ceiling; the table shows medians over
rounds. Utilisation = 6 × non-embedding parameters × tokens per second / ceiling,
where the non-embedding parameters are the layers plus the output projection
(a d×V matmul per token even when tied to the embedding) and, for the ViT,
tokens = images × (patches + 1).

    python benchmarks/bench_train.py --rounds 5
    python benchmarks/bench_train.py --quick        # smoke test: tiny sizes, 1 round,
                                                    # dropout 0.1, tf.function only

keras-hub is in the `bench` extra: `pip install -e '.[bench]'`.
"""

import argparse
import datetime
import os
import platform
import statistics
import sys
import time
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# keras-hub's embedding and Keras's EinsumDense warn that they drop the padding mask
# they pass on by other means; the warning is noise here.
warnings.filterwarnings("ignore", message=".*does not support masking.*")

try:
    import keras_hub
except ImportError:  # pragma: no cover - exercised only without the bench extra
    sys.exit(
        "bench_train.py compares against keras-hub, which is not installed. Install the "
        "bench extra: pip install -e '.[bench]'  (or: pip install 'keras-hub==0.32.*')"
    )

import keras  # noqa: E402 - after the keras-hub check above
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import zoo  # noqa: E402

# === Sizes ===

# The plain ViT of the paper, as the keras-hub side builds it: the class token and
# none of vit-tiny's Fashion-MNIST recipe (sequence pooling, shifted patches,
# augmentation layers, label smoothing).
PLAIN_VIT = dict(
    pooling="cls", shifted_patches=False, random_flip=False, random_translation=0.0,
    random_erasing=0.0, label_smoothing=0.0,
)

FULL = {
    "transformer": dict(
        vocabulary_size=8000, d_model=256, num_heads=4, intermediate_dim=1024,
        num_encoder_layers=3, num_decoder_layers=3, batch=32, length=64,
    ),
    "vit": dict(
        image_size=28, channels=1, patch_size=4, hidden_dim=64, num_heads=4, num_layers=4,
        mlp_dim=128, num_classes=10, batch=128, **PLAIN_VIT,
    ),
}
QUICK = {
    "transformer": dict(
        vocabulary_size=200, d_model=32, num_heads=2, intermediate_dim=64,
        num_encoder_layers=1, num_decoder_layers=1, batch=4, length=8,
    ),
    "vit": dict(
        image_size=8, channels=1, patch_size=4, hidden_dim=16, num_heads=2, num_layers=1,
        mlp_dim=32, num_classes=10, batch=8, **PLAIN_VIT,
    ),
}


# === The zoo models ===


def zoo_transformer(sizes, dropout, xla):
    overrides = {k: v for k, v in sizes.items() if k not in ("batch", "length")}
    # Learned positions over exactly `length` positions, as keras-hub's embedding has.
    return zoo.get(
        "transformer-small", **overrides, max_length=sizes["length"], positional="learned",
        dropout=dropout, attention_dropout=dropout, jit_compile=xla,
    )


def zoo_vit(sizes, dropout, xla):
    overrides = {k: v for k, v in sizes.items() if k != "batch"}
    return zoo.get(
        "vit-tiny", **overrides, dropout=dropout, attention_dropout=dropout, jit_compile=xla
    )


# === The same models from keras-hub layers ===


def hub_transformer(sizes, dropout, xla):
    """Shared, tied embedding and post-norm blocks: the zoo Transformer's architecture."""
    d, heads, ff = sizes["d_model"], sizes["num_heads"], sizes["intermediate_dim"]
    source = keras.Input((None,), dtype="int32", name="source")
    target = keras.Input((None,), dtype="int32", name="target")
    embedding = keras_hub.layers.TokenAndPositionEmbedding(
        sizes["vocabulary_size"], sizes["length"], d, tie_weights=True, mask_zero=True,
        name="shared_embedding",
    )
    x = keras.layers.Dropout(dropout)(embedding(source))
    for _ in range(sizes["num_encoder_layers"]):
        x = keras_hub.layers.TransformerEncoder(ff, heads, dropout=dropout,
                                                layer_norm_epsilon=1e-6)(x)
    y = keras.layers.Dropout(dropout)(embedding(target))
    for _ in range(sizes["num_decoder_layers"]):
        y = keras_hub.layers.TransformerDecoder(ff, heads, dropout=dropout,
                                                layer_norm_epsilon=1e-6)(y, x)
    logits = embedding.token_embedding(y, reverse=True)  # (B, T, V)
    logits = keras.layers.Activation("linear", dtype="float32")(logits)
    model = keras.Model({"source": source, "target": target}, logits, name="hub_transformer")
    config = zoo.config(
        "transformer-small", **{k: v for k, v in sizes.items() if k not in ("batch", "length")},
        dropout=dropout, jit_compile=xla,
    )
    zoo.transformer.compile_model(model, config)  # the same recipe as the zoo model
    return model


class ClassToken(keras.layers.Layer):
    """Prepends a learned class token: `(B, N, D)` -> `(B, N + 1, D)`."""

    def build(self, input_shape):
        self.token = self.add_weight(shape=(1, 1, input_shape[-1]), initializer="zeros")

    def call(self, inputs):
        token = keras.ops.broadcast_to(self.token, (keras.ops.shape(inputs)[0], 1,
                                                    inputs.shape[-1]))
        return keras.ops.concatenate([token, inputs], axis=1)


def hub_vit(sizes, dropout, xla):
    """The zoo ViT's architecture from a Conv2D patch projection and keras-hub encoders."""
    size, patch, d = sizes["image_size"], sizes["patch_size"], sizes["hidden_dim"]
    num_patches = (size // patch) ** 2
    images = keras.Input((size, size, sizes["channels"]), name="images")
    x = keras.layers.Rescaling(1.0 / 255.0)(images)
    x = keras.layers.Conv2D(d, patch, strides=patch)(x)
    x = keras.layers.Reshape((num_patches, d))(x)
    x = ClassToken()(x)
    x = x + keras_hub.layers.PositionEmbedding(num_patches + 1)(x)
    x = keras.layers.Dropout(dropout)(x)
    for _ in range(sizes["num_layers"]):
        x = keras_hub.layers.TransformerEncoder(
            sizes["mlp_dim"], sizes["num_heads"], dropout=dropout, activation="gelu",
            normalize_first=True, layer_norm_epsilon=1e-6,
        )(x)
    x = keras.layers.LayerNormalization(epsilon=1e-6)(x)
    logits = keras.layers.Dense(sizes["num_classes"])(x[:, 0])
    logits = keras.layers.Activation("linear", dtype="float32")(logits)
    model = keras.Model(images, logits, name="hub_vit")
    config = zoo.config(
        "vit-tiny", **{k: v for k, v in sizes.items() if k != "batch"}, dropout=dropout,
        jit_compile=xla,
    )
    zoo.vit.compile_model(model, config)
    return model


# === Data, FLOPs and timing ===


def transformer_data(sizes):
    rng = np.random.default_rng(0)
    batch, length, vocab = sizes["batch"], sizes["length"], sizes["vocabulary_size"]
    source = rng.integers(4, vocab, (batch, length)).astype("int32")
    target = rng.integers(4, vocab, (batch, length)).astype("int32")
    target[:, 0] = 2  # [START]
    labels = np.concatenate([target[:, 1:], np.full((batch, 1), 3, "int32")], axis=1)
    data = ({"source": source, "target": target}, labels)
    return tf.data.Dataset.from_tensors(data).repeat(), batch * length  # target tokens


def vit_data(sizes):
    rng = np.random.default_rng(0)
    batch, size = sizes["batch"], sizes["image_size"]
    images = rng.uniform(0, 255, (batch, size, size, sizes["channels"])).astype("float32")
    labels = rng.integers(0, sizes["num_classes"], batch).astype("int32")
    return tf.data.Dataset.from_tensors((images, labels)).repeat(), batch  # images


def transformer_flop_params(sizes):
    """Non-embedding parameters: the layers plus the d×V output projection."""
    cfg = zoo.config(
        "transformer-small", **{k: v for k, v in sizes.items() if k not in ("batch", "length")}
    )
    embedding = cfg.vocabulary_size * cfg.d_model  # sinusoidal: no position weights
    return cfg.num_params() - embedding + cfg.d_model * cfg.vocabulary_size


def vit_flop_params(sizes):
    """Everything but the class token and the position embeddings; per token."""
    cfg = zoo.config("vit-tiny", **{k: v for k, v in sizes.items() if k != "batch"})
    return cfg.num_params() - cfg.hidden_dim * (cfg.num_patches + 2)


def matmul_ceiling(n, repeats=3):
    """Seconds per `n³` float32 matmul in `tf.function` (median of `repeats`)."""
    a = tf.random.normal((n, n), seed=1)
    b = tf.random.normal((n, n), seed=2)
    matmul = tf.function(lambda: tf.reduce_sum(tf.matmul(a, b)))
    matmul().numpy()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        matmul().numpy()
        times.append(time.perf_counter() - start)
    return 2 * n**3 / statistics.median(times)  # FLOP/s


class _StepClock(keras.callbacks.Callback):
    """Wall and CPU time from the start of `fit` to the end of its last step.

    Leaves out the end of `fit` after the last step: tearing down the
    `tf.data` iterator there sometimes waits ~1.3 s on this machine, which
    would otherwise be charged to whichever model happened to be running.
    """

    def on_train_begin(self, logs=None):
        self.start = (time.perf_counter(), time.process_time())

    def on_train_batch_end(self, batch, logs=None):
        self.end = (time.perf_counter(), time.process_time())

    @property
    def elapsed(self):
        return self.end[0] - self.start[0], self.end[1] - self.start[1]


class Variant:
    def __init__(self, workload, implementation, dropout, xla, build, sizes, data, steps):
        self.workload, self.implementation = workload, implementation
        self.dropout, self.xla = dropout, xla
        self.model = build(sizes, dropout, xla)
        self.dataset, self.units_per_step = data
        self.steps = steps
        self.rates = []  # units per wall-clock second
        self.cpu_rates = []  # units per CPU-second of this process (all threads)

    @property
    def key(self):
        return (self.workload, self.dropout, self.xla)

    def warm_up(self):
        start = time.perf_counter()
        self.model.fit(self.dataset, steps_per_epoch=2, epochs=1, shuffle=False, verbose=0)
        return time.perf_counter() - start

    def measure(self):
        clock = _StepClock()
        history = self.model.fit(
            self.dataset, steps_per_epoch=self.steps, epochs=1, shuffle=False, verbose=0,
            callbacks=[clock],
        )
        elapsed, cpu = clock.elapsed
        if not np.isfinite(history.history["loss"]).all():
            raise RuntimeError(f"non-finite loss in {self.implementation} {self.key}")
        self.rates.append(self.steps * self.units_per_step / elapsed)
        self.cpu_rates.append(self.steps * self.units_per_step / cpu)

    @property
    def median(self):
        return statistics.median(self.rates)

    @property
    def cpu_median(self):
        return statistics.median(self.cpu_rates)

    @property
    def cores_used(self):
        """Mean CPU-seconds per wall-clock second: below the core count when starved."""
        return statistics.mean(c / r for c, r in zip(self.rates, self.cpu_rates))


def parse_args(argv):
    """`(args, workloads, modes)`, checked."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, 1 round (smoke test)")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds (default 5)")
    parser.add_argument("--transformer-steps", type=int, default=5,
                        help="training steps per timing of the Transformer (default 5)")
    parser.add_argument("--vit-steps", type=int, default=20,
                        help="training steps per timing of the ViT (default 20)")
    parser.add_argument("--workloads", default="transformer,vit",
                        help="comma-separated subset of transformer,vit")
    parser.add_argument("--dropouts", default=None,
                        help="comma-separated dropout rates (default 0,0.1; --quick: 0.1)")
    parser.add_argument("--modes", default=None,
                        help="comma-separated subset of function (tf.function), xla "
                        "(default both; --quick: function)")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.transformer_steps, args.vit_steps = 1, 2, 2
    if args.dropouts is None:
        args.dropouts = "0.1" if args.quick else "0,0.1"
    if args.modes is None:
        args.modes = "function" if args.quick else "function,xla"
    if args.rounds < 1:
        parser.error(f"--rounds must be >= 1; received {args.rounds}")
    workloads = args.workloads.split(",")
    modes = args.modes.split(",")
    for workload in workloads:
        if workload not in ("transformer", "vit"):
            parser.error(f"unknown workload {workload!r}; choose from transformer, vit")
    for mode in modes:
        if mode not in ("function", "xla"):
            parser.error(f"unknown mode {mode!r}; choose from function, xla")
    return args, workloads, modes


def make_variants(args, workloads, modes, dropouts, all_sizes):
    """The zoo and keras-hub `Variant` of each workload, dropout and mode, in pairs of equal
    parameter counts."""
    builders = {
        "transformer": (zoo_transformer, hub_transformer, transformer_data,
                        args.transformer_steps),
        "vit": (zoo_vit, hub_vit, vit_data, args.vit_steps),
    }
    variants = []
    for workload in workloads:
        zoo_build, hub_build, make_data, steps = builders[workload]
        sizes = all_sizes[workload]
        data = make_data(sizes)
        for dropout in dropouts:
            for mode in modes:
                pair = [
                    Variant(workload, name, dropout, mode == "xla", build, sizes, data, steps)
                    for name, build in (("zoo", zoo_build), ("keras-hub", hub_build))
                ]
                counts = [v.model.count_params() for v in pair]
                if counts[0] != counts[1]:
                    raise RuntimeError(f"{workload}: sizes differ, zoo/keras-hub {counts}")
                variants += pair
        print(f"{workload}: {counts[0]:,} parameters on each side; {sizes}")

    return variants


def time_variants(variants, rounds, matmul_n):
    """A warm-up of each variant, then `rounds` rounds between matmul ceilings, the order
    reversed every other round; the median ceiling (FLOP/s) and all of them."""
    for variant in variants:
        seconds = variant.warm_up()
        mode = "XLA" if variant.xla else "tf.function"
        print(f"  warm-up {variant.implementation:9s} {variant.workload:11s} "
              f"dropout {variant.dropout:<4} {mode:11s} {seconds:6.1f} s", flush=True)

    ceilings = []
    for round_index in range(rounds):
        order = variants if round_index % 2 == 0 else variants[::-1]
        ceilings.append(matmul_ceiling(matmul_n))
        for variant in order:
            variant.measure()
        ceilings.append(matmul_ceiling(matmul_n))
        print(f"  round {round_index + 1}/{rounds} done", flush=True)
    ceiling = statistics.median(ceilings)

    return ceiling, ceilings


def report(variants, all_sizes, ceiling, ceilings, rounds, matmul_n):
    """Print the table and the target."""
    flop_params = {
        "transformer": transformer_flop_params(all_sizes["transformer"]),
        "vit": vit_flop_params(all_sizes["vit"]),
    }
    tokens_per_unit = {
        "transformer": 1,
        "vit": (all_sizes["vit"]["image_size"] // all_sizes["vit"]["patch_size"]) ** 2 + 1,
    }
    units = {"transformer": "target tokens/s", "vit": "images/s"}

    print()
    print(f"Ceiling: {matmul_n}³ float32 matmul, {ceiling / 1e9:.0f} GFLOP/s "
          f"(median of {len(ceilings)} in this run, range {min(ceilings) / 1e9:.0f}-"
          f"{max(ceilings) / 1e9:.0f}). Medians of {rounds} rounds; utilisation in "
          "parentheses; cores = CPU-seconds per second used by the process.")
    print()
    print("| workload | dropout | compile | zoo | keras-hub | zoo / keras-hub "
          "| per round | zoo / keras-hub per CPU-second |")
    print("|---|---|---|---|---|---|---|---|")
    by_key = {}
    for variant in variants:
        by_key.setdefault(variant.key, {})[variant.implementation] = variant
    ratios = []
    for (workload, dropout, xla), pair in by_key.items():
        cells = []
        for name in ("zoo", "keras-hub"):
            rate = pair[name].median
            flops = 6 * flop_params[workload] * tokens_per_unit[workload] * rate
            cells.append(
                f"{rate:,.0f} ({100 * flops / ceiling:.0f}%, {pair[name].cores_used:.1f} cores)"
            )
        ratio = pair["zoo"].median / pair["keras-hub"].median
        cpu_ratio = pair["zoo"].cpu_median / pair["keras-hub"].cpu_median
        ratios.append(ratio)
        spread = " ".join(f"{z / h:.2f}" for z, h in zip(pair["zoo"].rates,
                                                         pair["keras-hub"].rates))
        print(f"| {workload} ({units[workload]}) | {dropout:g} | "
              f"{'XLA' if xla else 'tf.function'} | {cells[0]} | {cells[1]} | "
              f"**{ratio:.2f}×** | {spread} | {cpu_ratio:.2f}× |")
    print()
    met = sum(r >= 1.2 for r in ratios)
    print(f"Target zoo >= 1.2x keras-hub at equal size (wall clock): met in {met} of "
          f"{len(ratios)} variants (ratios {min(ratios):.2f}-{max(ratios):.2f}).")


def main(argv=None):
    args, workloads, modes = parse_args(argv)
    dropouts = [float(d) for d in args.dropouts.split(",")]
    all_sizes = QUICK if args.quick else FULL
    matmul_n = 256 if args.quick else 2048

    print(
        f"bench_train.py  {datetime.datetime.now().isoformat(timespec='seconds')}  "
        f"TensorFlow {tf.__version__}, Keras {keras.__version__}, keras-hub "
        f"{keras_hub.__version__}, {platform.machine()}, {os.cpu_count()} cores"
    )
    print(f"command: python benchmarks/bench_train.py {' '.join(sys.argv[1:] if argv is None else argv)}")

    variants = make_variants(args, workloads, modes, dropouts, all_sizes)
    ceiling, ceilings = time_variants(variants, args.rounds, matmul_n)
    report(variants, all_sizes, ceiling, ceilings, args.rounds, matmul_n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
