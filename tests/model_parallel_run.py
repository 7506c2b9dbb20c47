"""`keras.distribution.ModelParallel` with `zoo.layout_map` on 8 host devices under JAX: run by
tests/test_model_parallel.py in a process of its own (Keras's devices are fixed per process).

    KERAS_BACKEND=jax XLA_FLAGS=--xla_force_host_platform_device_count=8 \\
        python tests/model_parallel_run.py OUT_DIR

On a mesh `(2, 4)` of axes `("batch", "model")`, for transformer-tiny (4 heads: split over
them) and vit-tiny (2 heads: over D), one block of each kind, without dropout or augmentation
(tests/test_backend_training.py's FAMILIES) and from the same seeded weights: the layout of
every weight (its sharding's spec and shard shape; the optimizer's too), the losses of 3
`train_on_batch` steps with the family's recipe, and the weights after 3 SGD steps, under
`ModelParallel` and on one device. Then
`zoo train transformer-tiny --data numbers --model-parallel 4 ...` (tiny sizes, a few steps)
through `zoo.cli.main`, with the layouts of the model it trained (read after `fit`, from the
model `zoo.registry.get` built), the distribution the same command without `--model-parallel`
resumes under, and what `--model-parallel` refuses (a size that does not divide the devices, a
family without a layout map, a `--strategy`). Writes everything to `OUT_DIR/report.json`.
"""

import contextlib
import io
import json
import pathlib
import sys
import time

import keras
import numpy as np
from test_backend_training import FAMILIES, _data, _set_seeded_weights

import zoo
from zoo import cli, registry
from zoo.runs import placing

MESH = ((2, 4), ("batch", "model"))
# One block of each kind (the layout map's keys match every block alike): half the compiling.
BLOCKS = {"transformer-tiny": {"num_encoder_layers": 1, "num_decoder_layers": 1},
          "vit-tiny": {"num_layers": 1}}
# `zoo train`'s run: tests/conftest.py's small translation sizes, with 4 heads to split.
TRAIN = ["train", "transformer-tiny", "--data", "numbers", "--model-parallel", "4",
         "--epochs", "1", "--batch-size", "4", "--train-size", "48", "--test-size", "8",
         "--set", "num_encoder_layers=1", "--set", "num_decoder_layers=1", "--set", "d_model=16",
         "--set", "num_heads=4", "--set", "intermediate_dim=32", "--set", "vocabulary_size=100",
         "--set", "max_length=16"]
# What `--model-parallel` refuses on JAX, before any work.
REFUSED = {
    "indivisible": ["train", "transformer-tiny", "--data", "numbers", "--model-parallel", "3"],
    "family": ["train", "convs2s-small", "--data", "numbers", "--model-parallel", "2"],
    "strategy": ["train", "vit-tiny", "--data", "digits", "--model-parallel", "2",
                 "--strategy", "mirrored"],
}


def layouts(model):
    """Each weight's path -> its sharding's spec (None: replicated on every axis) and its
    shape on each device, and those of the optimizer's variables."""
    variables = list(model.weights)
    if model.optimizer is not None and model.optimizer.built:
        variables += list(model.optimizer.variables)
    found = {}
    for variable in variables:
        sharding = variable.value.sharding
        shape = tuple(variable.shape)
        found[variable.path] = {"spec": [None if axis is None else str(axis)
                                         for axis in tuple(sharding.spec)] + [None] * (
                                             len(shape) - len(tuple(sharding.spec))),
                                "shape": list(shape),
                                "shard_shape": list(sharding.shard_shape(shape))}
    return found


def train_steps(name, distribution=None, sgd=False):
    """`(model, losses of 3 train_on_batch steps)` of `name` from the seeded weights, built and
    trained under `distribution` (None: one device), with the family's recipe, or recompiled
    with SGD (`sgd`)."""
    inputs, labels = _data(name)
    keras.distribution.set_distribution(distribution)
    try:
        keras.utils.set_random_seed(0)
        model = zoo.get(name, **FAMILIES[name], **BLOCKS[name])
        if sgd:  # made under the distribution, as every variable
            model.compile(optimizer=keras.optimizers.SGD(0.1), loss=model.loss)
        model(inputs)
        _set_seeded_weights(model)
        losses = [float(model.train_on_batch(inputs, labels, return_dict=True)["loss"])
                  for _ in range(3)]
    finally:
        keras.distribution.set_distribution(None)
    return model, losses


def compare(name, mesh):
    """What `name` gives under ModelParallel on `mesh` and on one device: the recipe's losses
    (Adam), and the weights after SGD steps (Adam turns a gradient that is zero but for
    rounding, as the key biases' is, into a step of the learning rate, either way)."""
    layout_map = zoo.layout_map(name, mesh, **BLOCKS[name])
    distribution = keras.distribution.ModelParallel(layout_map=layout_map, batch_dim_name="batch")
    parallel, parallel_losses = train_steps(name, distribution)
    _, single_losses = train_steps(name)
    weights = [train_steps(name, where, sgd=True)[0].get_weights()
               for where in (distribution, None)]
    difference = max(float(np.max(np.abs(a - b))) for a, b in zip(*weights))
    return {"layout_map": {key: list(layout_map[key].axes) for key in layout_map},
            "layouts": layouts(parallel), "losses": parallel_losses,
            "one_device_losses": single_losses, "sgd_max_weight_difference": difference}


def zoo_train(run_dir):
    """`zoo train TRAIN --out run_dir` in this process: its exit code, stderr, and the layouts
    of the model it built and trained."""
    built, real_get = [], registry.get

    def get_and_keep(*args, **kwargs):
        built.append(real_get(*args, **kwargs))
        return built[-1]

    registry.get = get_and_keep
    try:
        code, err = zoo_command(*TRAIN, "--out", run_dir)
    finally:
        registry.get = real_get
    return {"code": code, "stderr": err[-3000:], "layouts": layouts(built[-1]) if built else None}


def zoo_command(*argv):
    """`zoo ARGV` in this process: (exit code, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main([str(argument) for argument in argv])
    return code, err.getvalue()


def resumed_distribution(run_dir):
    """The mesh of the distribution `zoo train transformer-tiny --out run_dir` (no
    `--model-parallel`) would train under: the run's own, read back from its config.json."""
    with placing.model_parallel("transformer-tiny", pathlib.Path(run_dir), None, None, None,
                                  {}):
        distribution = keras.distribution.distribution()
        return {"distribution": type(distribution).__name__,
                "mesh": list(distribution.device_mesh.shape) if distribution else None}


def main(out):
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    devices = keras.distribution.list_devices()
    mesh = keras.distribution.DeviceMesh(*MESH, devices=devices)
    report = {"backend": keras.backend.backend(), "devices": len(devices)}
    report["seconds"] = {}
    for name in ("transformer-tiny", "vit-tiny"):
        started = time.perf_counter()
        report[name] = compare(name, mesh)
        report["seconds"][name] = time.perf_counter() - started
    started = time.perf_counter()
    report["zoo_train"] = zoo_train(out / "run")
    report["seconds"]["zoo_train"] = time.perf_counter() - started
    report["resumed"] = resumed_distribution(out / "run")
    report["refused"] = {what: zoo_command(*argv, "--out", out / what) for what, argv in REFUSED.items()}
    report["refused_left_nothing"] = not any((out / what).exists() for what in REFUSED)
    (out / "report.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
