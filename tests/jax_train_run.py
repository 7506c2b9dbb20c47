"""`zoo train` under Keras' JAX backend: run by tests/test_train_jax.py in a process of its own.

    KERAS_BACKEND=jax python tests/jax_train_run.py OUT_DIR TRAIN_ARGUMENTS...

Runs `zoo train TRAIN_ARGUMENTS... --out OUT_DIR/run` through `zoo.cli.main`, loads the run's
`checkpoints/best.keras` and writes its outputs on a fixed batch of token ids
(`OUT_DIR/inputs.npz`, `OUT_DIR/outputs.npy`), then runs the commands that need TensorFlow
on the run and writes their exit codes and error lines, and what `--strategy mirrored` is
there (`zoo.distribute.place`), to `OUT_DIR/report.json`.
"""

import contextlib
import io
import json
import pathlib
import sys

import keras
import numpy as np

from zoo import cli, distribute

# What needs TensorFlow: commands on the run just trained (RUN: its directory; OUT: OUT_DIR),
# and a tf.distribute strategy.
REFUSED = {
    "export": ["export", "RUN", "--to", "OUT/saved_models"],
    "evaluate": ["evaluate", "RUN"],
    "predict": ["predict", "RUN", "elf"],
    "tpu": ["train", "transformer-tiny", "--data", "numbers", "--strategy", "tpu",
            "--out", "OUT/tpu"],
    # Not a refusal of JAX: a JAX job needs its processes named (tests/test_jax_processes.py).
    "multiworker": ["train", "transformer-tiny", "--data", "numbers", "--strategy", "multiworker",
                    "--out", "OUT/multiworker"],
}


def zoo(*argv):
    """`zoo ARGV` in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main([str(argument) for argument in argv])
    return code, out.getvalue(), err.getvalue()


def main(out, train_arguments):
    out = pathlib.Path(out)
    run = out / "run"
    code, stdout, stderr = zoo("train", *train_arguments, "--out", run)
    if code != 0:
        sys.exit(f"zoo train exited with {code}:\n{stdout[-3000:]}\n{stderr[-3000:]}")
    model = keras.saving.load_model(run / "checkpoints" / "best.keras")
    vocabulary = json.loads((run / "config.json").read_text())["model_config"]["vocabulary_size"]
    rng = np.random.default_rng(0)
    inputs = {"source": rng.integers(3, vocabulary, (3, 9)).astype("int32"),
              "target": rng.integers(3, vocabulary, (3, 7)).astype("int32")}
    inputs["source"][1, 5:] = 0  # padding
    np.savez(out / "inputs.npz", **inputs)
    np.save(out / "outputs.npy", keras.ops.convert_to_numpy(model(inputs, training=False)))
    mirrored = distribute.place("mirrored")
    report = {"backend": keras.backend.backend(), "refused": {},
              "mirrored": {"name": mirrored.name, "strategy": mirrored.strategy,
                           "replicas": mirrored.num_replicas_in_sync,
                           "distribution": type(mirrored.distribution).__name__}}
    for what, argv in REFUSED.items():
        argv = [str(run) if a == "RUN" else a.replace("OUT", str(out)) for a in argv]
        code, _, stderr = zoo(*argv)
        report["refused"][what] = {"code": code, "stderr": stderr}
    (out / "report.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
