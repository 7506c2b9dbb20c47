"""A quiet, quick command line: the commands that need no model import no TensorFlow, and
TensorFlow's C++ start-up lines stay off stderr (`zoo.cli.quiet`).

Each check runs the command in a fresh process (this one has TensorFlow loaded) through
`zoo.cli.main`, then prints the heavy packages that process holds in `sys.modules`.
"""

import json
import os
import pathlib
import subprocess
import sys

import pytest

from zoo.cli import choices, quiet

ROOT = pathlib.Path(__file__).resolve().parent.parent
HEAVY = ("tensorflow", "keras", "jax", "torch", "tensorflow_text", "keras_tuner")
# Runs `zoo ARGV` for each ARGV given as JSON, each followed by the heavy packages then loaded.
RUNNER = f"""\
import json, sys
from zoo.cli import main
for argv in json.loads(sys.argv[1]):
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code
    heavy = sorted({{name.split(".")[0] for name in sys.modules}} & set({HEAVY!r}))
    print("RESULT", json.dumps({{"argv": argv, "code": code or 0, "heavy": heavy}}))
"""


def run_commands(*argvs, env=None):
    """`(results, stderr)`: each command's exit code and the heavy modules loaded after it."""
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("TF_CPP_MIN_LOG_LEVEL", "ZOO_DEBUG")}
    environment.update(env or {})
    done = subprocess.run([sys.executable, "-c", RUNNER, json.dumps(argvs)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env=environment)
    results = [json.loads(line[len("RESULT "):]) for line in done.stdout.splitlines()
               if line.startswith("RESULT ")]
    assert len(results) == len(argvs), done.stdout[-2000:] + done.stderr[-2000:]
    return results, done.stderr


def test_help_list_and_describe_import_no_tensorflow():
    argvs = (["--help"], ["list"], ["describe", "transformer-small"], ["describe", "vit-tiny",
             "--set", "hidden_dim=128", "--json"], ["predict", "--help"], ["train", "--help"],
             ["tune", "--help"], ["export", "--help"], ["import", "--help"], ["demo", "--help"],
             ["explore", "--help"])
    results, stderr = run_commands(*argvs)
    assert [(r["argv"], r["code"], r["heavy"]) for r in results] == \
        [(list(argv), 0, []) for argv in argvs]
    assert stderr == ""


def test_import_zoo_is_light_and_keras_brings_the_layers():
    """`import zoo` loads no Keras; `zoo.list`, `zoo.config` and `zoo.describe` need none; once
    Keras is imported the families' layers are registered, so a `.keras` file loads."""
    code = f"""\
import sys
import zoo, keras_attention
assert zoo.describe("transformer-small", d_model=512).num_params > 0
assert zoo.config("vit-tiny").hidden_dim == 64 and "vit-b16" in zoo.list("vit-*")
print(sorted({{n.split(".")[0] for n in sys.modules}} & set({HEAVY!r})))
import keras
model = keras.saving.load_model("tests/fixtures/seq2seq_v2.keras", compile=False)
print(type(model.get_layer("decoder")).__module__)
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == ["[]", "zoo.seq2seq.decoder"]


@pytest.mark.large
def test_a_command_that_imports_tensorflow_prints_no_tensorflow_line():
    results, stderr = run_commands(["evaluate", "no-such-run"])
    assert results[0]["code"] == 2 and "tensorflow" in results[0]["heavy"]
    assert stderr.splitlines() == [
        "zoo evaluate: error: no-such-run is not a run directory: no-such-run/config.json "
        "not found (zoo train --out makes one)"]


def test_the_filter_drops_tensorflows_start_up_lines_and_keeps_the_rest():
    # Lines TensorFlow 2.21 printed here (2-core AMD EPYC, no GPU) before absl was set up.
    printed = (
        "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
        "I0000 00:00:1796647609.736964   10283 port.cc:153] oneDNN custom operations are on.\n"
        "I0000 00:00:1796647609.737337   10283 cudart_stub.cc:31] Could not find cuda drivers "
        "on your machine, GPU will not be used.\n"
        "I0000 00:00:1796647609.833625   10283 cpu_feature_guard.cc:227] This TensorFlow "
        "binary is optimized to use available CPU instructions in performance-critical "
        "operations.\n"
        "To enable the following instructions: AVX2 AVX512F FMA, in other operations, rebuild "
        "TensorFlow with the appropriate compiler flags.\n"
        "a line of the command's own\n"
        "E0000 00:00:1796647697.686733   11877 cuda_platform.cc:52] failed call to cuInit: "
        "INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)\n"
        "E0000 00:00:1796661830.755357   32259 util.cc:131] oneDNN supports DT_INT64 only on "
        "platforms with AVX-512. Falling back to the default Eigen-based implementation if "
        "present.\n"
    )
    code = f"""\
import os, sys
from zoo.cli import quiet
with quiet.start_up_lines_filtered():
    os.write(2, {printed.encode()!r})
    print("and one from Python", file=sys.stderr)
"""
    environment = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    environment.pop("ZOO_DEBUG", None)
    quiet_run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               timeout=60, env=environment, cwd=ROOT)
    assert quiet_run.stderr.splitlines() == ["a line of the command's own", "and one from Python"]
    debug_run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               timeout=60, env=dict(environment, ZOO_DEBUG="1"), cwd=ROOT)
    assert debug_run.stderr == printed + "and one from Python\n"  # ZOO_DEBUG=1: everything


def test_errors_pass_but_the_two_first_use_notices_and_cuinit_only_without_drivers():
    cuinit = ("E0000 00:00:1796647697.686733   11877 cuda_platform.cc:52] failed call to cuInit: "
              "CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected\n")
    other = "E0000 00:00:1796647697.686733   11877 op_kernel.cc:1857] OP_REQUIRES failed\n"
    assert quiet.without_notices(cuinit + other) == [cuinit, other]  # drivers were found
    no_drivers = ("I0000 00:00:1796647609.737337   10283 cudart_stub.cc:31] Could not find cuda "
                  "drivers on your machine, GPU will not be used.\n")
    assert quiet.without_notices(no_drivers + cuinit + other) == [other]


def test_tensorflows_first_use_prints_nothing_after_the_filter():
    # Real TensorFlow: its import, then what prints its notices (devices, a ragged concat).
    code = """\
from zoo.cli import quiet
with quiet.start_up_lines_filtered():
    import tensorflow as tf
tf.config.list_physical_devices()
tf.concat([tf.ragged.constant([[1, 2]], tf.int64), tf.ones([1, 1], tf.int64)], axis=1)
print("done")
"""
    environment = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    environment.pop("ZOO_DEBUG", None)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env=environment, cwd=ROOT)
    assert (run.stdout, run.stderr) == ("done\n", "")


@pytest.mark.parametrize("environ, level", [
    ({}, "2"), ({"TF_CPP_MIN_LOG_LEVEL": "0"}, "0"), ({"ZOO_DEBUG": "1"}, None),
])
def test_the_log_level_defaults_to_2_unless_set_or_debugging(environ, level):
    quiet.default_log_level(environ)
    assert environ.get("TF_CPP_MIN_LOG_LEVEL") == level


def test_the_parsers_choices_are_the_librarys():
    from keras_attention.layers import positional
    from zoo import distribute, export, tuning
    from zoo.export import int8
    from zoo.runs import budget, rundir
    from zoo.text import tokenizers
    from zoo.transformer import config

    assert choices.STRATEGIES == distribute.STRATEGIES
    assert choices.SCHEDULES == budget.SCHEDULES
    assert choices.TOKENIZERS == tokenizers.TOKENIZERS
    assert choices.CHECKPOINTS == rundir.CHECKPOINTS
    assert choices.QUANTIZE_MODES == int8.MODES
    assert (choices.SAVED_MODEL, choices.CTRANSLATE2) == (export.SAVED_MODEL, export.CTRANSLATE2)
    assert choices.FORMATS == tuple(export.FORMATS)
    assert choices.TUNERS == tuning.TUNERS
    assert config.LAYOUTS == positional.LAYOUTS


def test_a_submodule_that_imports_keras_first_leaves_no_registration_warning():
    # `zoo export` imported keras_attention.schedules before Keras: Keras's import, from inside
    # it, ran the package's registration while the module was half-defined (a UserWarning).
    code = """\
import keras_attention.schedules
import keras_attention
print(keras_attention.BudgetSchedule.__name__, keras_attention.TransformerSchedule.__name__)
"""
    run = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True,
                         text=True, timeout=120, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout == "BudgetSchedule TransformerSchedule\n"
    assert "registering Keras objects" not in run.stderr
