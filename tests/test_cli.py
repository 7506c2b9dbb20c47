"""The command line, run as a user would.

Most commands run in-process through `zoo.cli.main(argv)`, the function the
console script and `python -m zoo` call, with stdout and stderr captured
(`run_main`, tests/zoo_cli.py): a fresh process per command would spend most
of its time importing TensorFlow. Two real processes: one meets the entry point
with a user error and with a bug (exit codes, error lines, ZOO_DEBUG=1), and a
training is killed with SIGKILL and resumed.
"""

import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from zoo import cli

from zoo_cli import run_main

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONUNBUFFERED="1")
ENV.pop("ZOO_DEBUG", None)
TF_NOISE = re.compile(
    r"^(WARNING: All log messages before absl::InitializeLog\(\)|[IWE]\d{4} |To enable the "
    r"following instructions:)"
)

TINY_TRANSFORMER = [
    "--set", "num_encoder_layers=1", "--set", "num_decoder_layers=1", "--set", "d_model=32",
    "--set", "num_heads=2", "--set", "intermediate_dim=64", "--set", "vocabulary_size=200",
    "--set", "max_length=24",
]


def assert_one_line_error(code, err, message):
    assert code == 2
    assert "Traceback" not in err
    # TensorFlow's C++ start-up lines (printed at import whatever TF_CPP_MIN_LOG_LEVEL
    # says) are not ours; everything else on stderr must be the one error line.
    lines = [line for line in err.splitlines() if line.strip() and not TF_NOISE.match(line)]
    assert len(lines) == 1, err
    assert lines[0].startswith("zoo")
    assert message.lower() in lines[0].lower(), lines[0]


# === list and describe ===


def test_list_and_glob():
    result = run_main("list", "vit-*")
    assert result.code == 0, result.err
    names = [line.split()[0] for line in result.out.splitlines()]
    assert names == sorted(names)
    assert "vit-b16" in names and "vit-tiny" in names
    assert not any(n.startswith("transformer") for n in names)


def test_describe_json_reports_analytic_parameter_count():
    result = run_main("describe", "transformer-base", "--json")
    assert result.code == 0, result.err
    described = json.loads(result.out)
    assert described["num_params"] == 63_082_496
    assert described["config"]["d_model"] == 512
    assert "Vaswani" in described["reference"]


def test_describe_with_overrides_prints_summary():
    code, out, _ = run_main("describe", "vit-tiny", "--set", "num_layers=2",
                            "--set", "random_flip=true")
    assert code == 0
    assert "vit-tiny" in out
    assert "num_layers = 2" in out
    assert "random_flip = True" in out


# === User errors: one line, exit code 2 ===


@pytest.mark.parametrize(
    "args, message",
    [
        (("describe", "transformer-bse"), "did you mean 'transformer-base'"),
        (("describe", "vit-tiny", "--set", "patch_size=5"), "patch_size must divide image_size"),
        (("describe", "vit-tiny", "--set", "depth=3"), "Valid fields"),
        (("describe", "vit-tiny", "--set", "oops"), "--set expects key=value"),
        (("list", "nothing-*"), "No model matches"),
        (("train", "transformr-tiny", "--data", "numbers"), "did you mean 'transformer-tiny'"),
        (("train", "vit-tiny", "--data", "numbers"), "'numbers' holds translation data"),
        (("train", "transformer-tiny", "--data", "digits"), "use a translation dataset"),
        (("train", "transformer-tiny", "--data", "wmt14"), "unknown dataset 'wmt14'"),
        (("train", "transformer-tiny", "--data", "tsv:/no/such.tsv"), "not found: /no/such.tsv"),
        (("train", "transformer-tiny"), "data is required"),
        (("train", "transformer-tiny", "--data", "numbers", "--set", "d_model=-1"), "d_model"),
        (("train", "transformer-tiny", "--data", "numbers", "--set", "x"), "--set expects"),
        (("train", "transformer-tiny", "--data", "numbers", "--config", "/no/c.json"),
         "config file not found"),
        (("train", "transformer-tiny", "--data", "numbers", "--epochs", "0"),
         "expected a positive integer"),
        (("train", "seq2seq-bahdanau-small", "--data", "numbers", "--jit"), "jit_compile"),
        (("train", "vit-tiny", "--data", "fashion-mnist", "--data-dir", "/no/dir"), "not found"),
        (("evaluate", "/no/run"), "not a run directory"),
        (("export", "/no/run"), "not a run directory"),
        (("predict", "/no/model", "hallo"), "neither a run directory"),
        (("frobnicate",), "invalid choice"),
    ],
)
def test_user_errors_print_one_line_and_exit_2(args, message):
    code, _, err = run_main(*args)
    assert_one_line_error(code, err, message)


# One process meets the real entry point three times (`python -m zoo` is zoo/__main__.py run
# as the interpreter runs it: `runpy`): a user error, a bug, then the bug again with
# ZOO_DEBUG=1, raised as is, which the interpreter prints before exiting with 1.
ENTRY_POINT_SCRIPT = """\
import os, runpy, sys

def zoo(*argv):
    sys.argv = ["zoo", *argv]
    try:
        runpy.run_module("zoo", run_name="__main__", alter_sys=True)
    except SystemExit as exit_:
        return exit_.code

print("user error: exit code", zoo("train", "vit-tiny", "--data", "numbers"))
sys.stderr.write("=== a bug\\n")
from zoo.vit.model import ViTConfig
def broken(config):
    raise ValueError("Dimensions must be equal")
ViTConfig.num_params = broken
print("bug: exit code", zoo("describe", "vit-tiny"))
sys.stderr.write("=== ZOO_DEBUG=1\\n")
os.environ["ZOO_DEBUG"] = "1"
zoo("describe", "vit-tiny")
"""


@pytest.fixture(scope="module")
def entry_point():
    """`(the process, its stderr for the user error, for the bug, for the bug raised)`."""
    result = subprocess.run([sys.executable, "-c", ENTRY_POINT_SCRIPT], capture_output=True,
                            text=True, timeout=300, env=ENV,
                            cwd=pathlib.Path(__file__).resolve().parent.parent)
    assert result.stderr.count("\n=== ") == 2, result.stderr[-3000:]
    user_error, rest = result.stderr.split("=== a bug\n")
    reported, raised = rest.split("=== ZOO_DEBUG=1\n")
    return result, user_error, reported, raised


@pytest.mark.large
def test_user_errors_from_the_real_entry_point(entry_point):
    result, user_error, _, _ = entry_point
    first = result.stdout.splitlines()[0]
    assert first.startswith("user error: exit code "), result.stdout
    assert_one_line_error(int(first.split()[-1]), user_error, "holds translation data")


def test_bad_config_file_is_a_user_error(tmp_path):
    (tmp_path / "c.json").write_text("{not json")
    code, _, err = run_main("train", "transformer-tiny", "--data", "numbers",
                            "--config", tmp_path / "c.json", "--out", tmp_path / "run")
    assert_one_line_error(code, err, "not valid JSON")


# === Anything else is a bug: exit code 1, its last frames, ZOO_DEBUG=1 for all ===


def _broken_num_params(config):
    """What a bug deep inside looks like: TensorFlow's ValueError, not one of the zoo's."""
    raise ValueError("Dimensions must be equal, but are 3 and 4 for 'add' (op: 'AddV2')")


def test_a_zoo_error_from_deep_inside_is_one_line_exit_2(monkeypatch):
    from zoo.errors import ZooError
    from zoo.vit.model import ViTConfig

    def refuse(config):
        raise ZooError("the sizes do not fit")

    monkeypatch.setattr(ViTConfig, "num_params", refuse)
    code, _, err = run_main("describe", "vit-tiny")
    assert_one_line_error(code, err, "zoo describe: error: the sizes do not fit")


def test_an_internal_value_error_is_a_bug_report_exit_1(monkeypatch):
    from zoo.vit.model import ViTConfig

    monkeypatch.delenv("ZOO_DEBUG", raising=False)
    monkeypatch.setattr(ViTConfig, "num_params", _broken_num_params)
    code, out, err = run_main("describe", "vit-tiny")
    assert code == cli.EXIT_BUG == 1
    assert out == "" and "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip() and not TF_NOISE.match(line)]
    assert lines[0] == ("zoo describe: internal error (a bug, not a mistake in the command): "
                        "ValueError: Dimensions must be equal, but are 3 and 4 for 'add' "
                        "(op: 'AddV2')")
    # The last frames, the raising one last, then how to see them all.
    frames = lines[1:-1]
    assert len(frames) == 3 and all(line.startswith("  ") for line in frames), lines
    assert frames[-1].endswith("in _broken_num_params") and "test_cli.py:" in frames[-1]
    assert "in describe" in frames[-2]  # zoo.description.describe called it
    assert "ZOO_DEBUG=1" in lines[-1] and "full traceback" in lines[-1]


def test_zoo_debug_raises_the_bug_with_its_whole_traceback(capsys, monkeypatch):
    import traceback

    from zoo.vit.model import ViTConfig

    monkeypatch.setenv("ZOO_DEBUG", "1")
    monkeypatch.setattr(ViTConfig, "num_params", _broken_num_params)
    with pytest.raises(ValueError, match="Dimensions must be equal") as caught:
        cli.main(["describe", "vit-tiny"])
    names = [frame.name for frame in traceback.extract_tb(caught.value.__traceback__)]
    assert names[1] == "main" and names[-1] == "_broken_num_params"  # [0]: this test
    assert {"_run", "run_describe", "describe"} <= set(names)
    assert capsys.readouterr().err == ""  # raised as is, nothing printed over it
    with pytest.raises(ValueError, match="not a positive integer|must be a positive integer"):
        cli.main(["describe", "vit-tiny", "--set", "num_layers=0"])  # user errors too


def test_a_bug_from_the_real_entry_point_exits_1_and_zoo_debug_prints_the_traceback(
    entry_point,
):
    result, _, reported, raised = entry_point
    assert result.returncode == 1, result.stderr[-3000:]
    assert result.stdout.splitlines()[1:] == ["bug: exit code 1"]  # nothing else printed
    assert "Traceback" not in reported
    assert "zoo describe: internal error (a bug, not a mistake in the command): " \
           "ValueError: Dimensions must be equal" in reported
    assert "ZOO_DEBUG=1" in reported
    assert "Traceback (most recent call last)" in raised
    assert "in main" in raised and "zoo/description.py" in raised
    assert raised.endswith("in broken\nValueError: Dimensions must be equal\n")
    assert "internal error" not in raised


def test_help_has_an_example():
    for command in ("list", "describe", "train", "evaluate", "export", "predict", "tune", "demo"):
        code, out, _ = run_main(command, "--help")
        assert code == 0
        assert "Example" in out, command


# === Translation end to end: train, evaluate, export, predict ===


# `numbers_run` and `numbers_export` (tests/conftest.py): `zoo train transformer-tiny --data
# numbers` and `zoo export`, run once per session through `zoo.cli.main`, their output kept.


@pytest.mark.large
def test_train_prints_progress_and_a_summary(numbers_run):
    out, run_dir = numbers_run.stdout, numbers_run.run_dir
    assert "Learning a shared SentencePiece vocabulary" in out
    assert "Epoch 2/2" in out and "val_loss" in out  # Keras' progress output
    assert "Trained transformer-tiny: 2 epochs" in out
    assert str(run_dir) in out
    for name in ("config.json", "history.csv", "curves.png", "summary.json",
                 "checkpoints/last.keras", "checkpoints/best.keras", "tokenizer/sentencepiece.model"):
        assert (run_dir / name).is_file(), name
    config = json.loads((run_dir / "config.json").read_text())
    assert config["training"]["batch_size"] == 64  # no --batch-size: translation's default
    assert config["training"]["seed"] == numbers_run.options["seed"] == 3
    assert config["overrides"] == numbers_run.overrides  # each --set, with its type


@pytest.mark.large
def test_evaluate_reports_exact_match_and_bleu(numbers_run, tmp_path):
    shutil.copytree(numbers_run.run_dir, tmp_path / "run")  # evaluate writes metrics.json
    result = run_main("evaluate", tmp_path / "run", "--beam-size", 2, "--json")
    assert result.code == 0, result.err[-3000:]
    metrics = json.loads(result.out)
    assert metrics["num_examples"] == numbers_run.options["test_size"] == 8
    for mode in ("greedy", "beam"):
        assert 0 <= metrics[mode]["exact_match"] <= 100 and 0 <= metrics[mode]["bleu"] <= 100
    assert json.loads((tmp_path / "run/metrics.json").read_text())["beam"] == metrics["beam"]


@pytest.mark.large
def test_export_then_predict_with_the_saved_model_matches_the_run(numbers_run, numbers_export):
    run_dir, saved = numbers_run.run_dir, numbers_export.saved_models
    assert (saved / "1/saved_model.pb").is_file()
    assert f"zoo predict {saved / '1'} INPUT" in numbers_export.stdout
    sentences = ["dreihundertvierundzwanzig", "elf", "neunzehntausend"]
    # The export root resolves to its newest version; a fresh process loads it with
    # tf.saved_model.load and uses serving_default (beam search of 4, alpha 0.6).
    served = run_main("predict", saved, *sentences, "--json")
    assert served.code == 0, served.err[-3000:]
    # Reference: the run's best checkpoint decoded in this process, same beam search.
    from zoo import runs

    expected = runs.predict(run_dir, sentences, beam_size=4, alpha=0.6)
    assert [r["input"] for r in expected] == sentences
    assert json.loads(served.out) == expected
    # And the plain-text output of a run directory, greedy.
    greedy = run_main("predict", run_dir, "elf", "--beam-size", 1)
    assert greedy.code == 0, greedy.err[-3000:]
    translation = runs.predict(run_dir, ["elf"], beam_size=1)[0]["translation"]
    assert greedy.out == f"elf\n  -> {translation}\n"


# === Images end to end ===


@pytest.mark.large
def test_vit_on_fashion_mnist_train_evaluate_predict(fashion_run, tmp_path):
    """`fashion_run` (tests/conftest.py): `zoo train vit-tiny --data fashion-mnist --data-dir DIR
    --epochs 2 --max-steps 4 --batch-size 32 --val-ratio 0 --set ...`, once per session."""
    from PIL import Image

    arrays = fashion_run.arrays
    shutil.copytree(fashion_run.run_dir, tmp_path / "run")  # evaluate writes metrics.json
    assert "stopped by max_steps" in fashion_run.stdout
    summary = json.loads((tmp_path / "run/summary.json").read_text())
    assert summary["steps"] == fashion_run.options["max_steps"] == 4
    config = json.loads((tmp_path / "run/config.json").read_text())
    assert config["training"]["batch_size"] == 32  # --batch-size reaches the run
    assert config["training"]["val_ratio"] == 0.0 and config["data"]["num_validation"] == 0
    evaluated = run_main("evaluate", tmp_path / "run")
    assert evaluated.code == 0, evaluated.err[-3000:]
    assert "accuracy" in evaluated.out
    assert "/step" not in evaluated.out  # no progress bar when the output is not a terminal
    images = arrays["t10k-images-idx3-ubyte"][:2]
    paths = []
    for i, image in enumerate(images):
        Image.fromarray(image).save(tmp_path / f"{i}.png")
        paths.append(tmp_path / f"{i}.png")
    predicted = run_main("predict", tmp_path / "run", *paths, "--top-k", 10, "--json")
    assert predicted.code == 0, predicted.err[-3000:]
    results = json.loads(predicted.out)
    # Reference: the best checkpoint run on the same pixels in this process.
    import keras

    model = keras.saving.load_model(tmp_path / "run/checkpoints/best.keras", compile=False)
    probabilities = keras.ops.convert_to_numpy(
        keras.ops.softmax(model.predict(images[..., None], verbose=0))
    )
    class_names = config["data"]["class_names"]
    for result_, row in zip(results, probabilities):
        got = dict(result_["classes"])
        assert len(got) == 10
        for index, name in enumerate(class_names):
            assert got[name] == pytest.approx(float(row[index]), abs=1e-5)


# === Resume after SIGKILL ===


@pytest.mark.large
def test_resume_after_sigkill_mid_epoch(tmp_path):
    # Epochs of 10 steps (two passes of 19 steps are 4 epochs) and a budget of 40 steps: a
    # kill loses at most the steps since the last epoch's backup, and the resumed run
    # continues the budget's schedule and writes its average.
    out = tmp_path / "run"
    args = [
        sys.executable, "-m", "zoo", "train", "transformer-tiny", "--data", "numbers",
        "--train-size", 300, "--test-size", 4, "--epochs", 2, "--batch-size", 16,
        "--steps-per-epoch", 10, "--max-steps", 40, "--out", out, *TINY_TRANSFORMER,
    ]
    args = [str(a) for a in args]
    process = subprocess.Popen(args, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    metadata = out / "backup/training_metadata.json"
    deadline = time.monotonic() + 240
    try:
        while not metadata.exists():
            assert process.poll() is None, process.stderr.read().decode()[-3000:]
            assert time.monotonic() < deadline, "the first epoch did not finish in time"
            time.sleep(0.05)
        time.sleep(0.3)  # into the second epoch
        assert process.poll() is None, "training ended before it could be killed"
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        first_lines = process.stdout.read().decode()
    finally:
        if process.poll() is None:
            process.kill()
        process.stdout.close()
        process.stderr.close()
    assert process.returncode == -signal.SIGKILL
    assert "Epochs: 10 steps (--steps-per-epoch 10)" in first_lines  # said before training
    assert "Schedule: budget-linear, warm-up 12 of 40 steps (max_steps)" in first_lines
    assert "Short budget (max_steps 40 <= 5000): warm-up 30% of the budget, dropout 0" in first_lines
    backup = json.loads(metadata.read_text())
    backup_epoch = backup["epoch"]
    assert 1 <= backup_epoch < 4
    assert backup["steps"] == 10 * backup_epoch  # what a kill keeps: every finished epoch
    assert backup["schedule_total_steps"] == 40 and backup["schedule_warmup_steps"] == 12
    rows_before = (out / "history.csv").read_text().splitlines()
    assert not (out / "summary.json").exists()

    resumed = run_main(*args[3:])  # the same command again
    assert resumed.code == 0, resumed.err[-3000:]
    assert f"resumed from epoch {backup_epoch}" in resumed.out
    lines = (out / "history.csv").read_text().splitlines()
    epochs = [int(line.split(",")[0]) for line in lines[1:]]
    assert epochs == [0, 1, 2, 3]  # each epoch exactly once
    # Rows of epochs finished before the kill are kept as they were.
    assert lines[: backup_epoch + 1] == rows_before[: backup_epoch + 1]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["epochs"] == 4 and summary["resumed_from_epoch"] == backup_epoch
    assert summary["steps"] == 40 and summary["budget"]["predicted_steps_final"] == 40
    assert not (out / "backup").exists()
    # Both checkpoints load and translate; so does the average, the same way once loaded.
    from zoo import runs

    for checkpoint in ("best", "last"):
        run = runs.load_run(out, checkpoint)
        assert isinstance(runs.translate(run, ["elf"])[0], str)
    average = runs.load_run(out, "average").model
    assert [w.shape for w in average.weights] == [w.shape for w in run.model.weights]


# === The main job ===


@pytest.mark.large
def test_demo_runs_end_to_end_on_tiny_settings(tmp_path, monkeypatch):
    from zoo.runs import demo

    # The demo's recipe on a one-layer transformer-tiny with a small vocabulary, 200 pairs
    # and a budget of under a second: its four steps are under test, not the size of its
    # model or how well it learns.
    monkeypatch.setattr(demo, "OVERRIDES", {
        **demo.OVERRIDES, "num_encoder_layers": 1, "num_decoder_layers": 1, "d_model": 16,
        "num_heads": 2, "intermediate_dim": 32, "vocabulary_size": 100})
    result = run_main(
        "demo", "--minutes", "0.01", "--train-size", "200", "--test-size", "5",
        "--out", tmp_path / "demo", "--export-to", tmp_path / "saved",
    )
    assert result.code == 0, result.err[-3000:]
    assert "exact match" in result.out
    assert "BLEU" in result.out
    assert "beam 4" in result.out
    assert (tmp_path / "saved/1/saved_model.pb").is_file()
    assert "served translations correct" in result.out
    # What the demo says it learns is what it learned.
    tokenizer = json.loads((tmp_path / "demo/config.json").read_text())["training"]["tokenizer"]
    assert tokenizer == "sentencepiece"
    code, out, _ = run_main("demo", "--help")
    assert code == 0 and "SentencePiece" in out


def test_fashion_mnist_without_files_or_network_is_one_line(
    tmp_path, monkeypatch, expect_network_block
):
    """No Debian package, no keras cache, no network: one line, exit 2, no run directory."""
    import keras.src.backend.config as keras_config

    from zoo.datasets import idx_files

    missing = tmp_path / "no-fashion-mnist"
    monkeypatch.setattr(idx_files, "FASHION_MNIST_DIR", missing)
    monkeypatch.setattr(keras_config, "_KERAS_DIR", str(tmp_path / "keras-home"))
    out = tmp_path / "run"
    code, _, err = run_main("train", "vit-tiny", "--data", "fashion-mnist",
                            "--epochs", "1", "--out", out)
    assert_one_line_error(code, err, "Fashion-MNIST not found")
    for named in (str(missing), "dataset-fashion-mnist", "--data-dir", "keras.datasets"):
        assert named in err
    assert expect_network_block, "the download was not even tried"
    assert not out.exists()


@pytest.mark.large
def test_predict_answers_the_good_images_and_names_each_bad_one(tmp_path):
    """One bad image among good ones: one line per bad file, the good ones answered, exit 1;
    for a run directory and for its SavedModel alike."""
    from PIL import Image

    run = tmp_path / "run"
    shutil.copytree(pathlib.Path(__file__).parent / "fixtures" / "run_v1_vit", run)
    Image.fromarray(np.full((8, 8), 200, np.uint8)).save(tmp_path / "good.png")
    (tmp_path / "not-an-image.png").write_text("hello")
    (tmp_path / "cut.png").write_bytes((tmp_path / "good.png").read_bytes()[:40])
    exported = run_main("export", run, "--to", tmp_path / "saved", cwd=tmp_path)
    assert exported.code == 0, exported.err[-2000:]
    for target in (run, tmp_path / "saved"):
        result = run_main("predict", target, "good.png", "not-an-image.png", "missing.png",
                         "cut.png", "--json", cwd=tmp_path)
        assert result.code == 1, result.err[-2000:]
        errors = [line for line in result.err.splitlines() if not TF_NOISE.match(line)]
        assert "Traceback" not in result.err
        assert sorted(e.split(": ")[2] for e in errors) == [
            "cut.png", "missing.png", "not-an-image.png"], errors
        assert "not-an-image.png: not an image (unknown format)" in result.err
        assert "missing.png: file not found" in result.err
        answers = json.loads(result.out)
        assert [a["input"] for a in answers] == [
            "good.png", "not-an-image.png", "missing.png", "cut.png"]
        assert len(answers[0]["classes"]) == 3 and "error" in answers[1]


@pytest.mark.large
def test_fine_tune_a_pretrained_vit_file_then_export_and_predict(tmp_path):
    """`zoo train NAME --weights FILE --data images:DIR`: the file's architecture, input
    statistics and fine-tuning recipe, a new head for the data's classes; then export."""
    from PIL import Image

    rng = np.random.default_rng(0)
    for name in ("cats", "dogs"):
        (tmp_path / "photos" / name).mkdir(parents=True)
        for i in range(6):
            Image.fromarray((rng.random((20, 20, 3)) * 255).astype(np.uint8)).save(
                tmp_path / "photos" / name / f"{i}.png")
    weights = pathlib.Path(__file__).parent / "fixtures" / "vit" / "timm_cls.safetensors"
    tiny = ["--set", "num_layers=2", "--set", "hidden_dim=32", "--set", "num_heads=2",
            "--set", "mlp_dim=64", "--set", "patch_size=4"]
    with pytest.warns(UserWarning, match="gets a new head for num_classes=2"):
        result = run_main("train", "vit-ti16", "--weights", weights, *tiny,
                          "--data", "images:photos", "--max-steps", "2", "--out", "run",
                          cwd=tmp_path)
    assert result.code == 0, result.err[-3000:]
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["training"]["weights"] == str(weights)
    model_config = config["model_config"]
    assert model_config["num_classes"] == 2 and model_config["image_size"] == 16
    assert model_config["pixel_mean"] == 0.5 and model_config["learning_rate"] == 3e-5
    assert run_main("export", "run", "--to", "saved", cwd=tmp_path).code == 0
    answer = run_main("predict", "saved", "photos/cats/0.png", "--json", cwd=tmp_path)
    assert answer.code == 0, answer.err[-2000:]
    assert {name for name, _ in json.loads(answer.out)[0]["classes"]} == {"cats", "dogs"}


@pytest.mark.large
def test_import_an_opus_mt_folder_then_translate(tmp_path):
    folder = pathlib.Path(__file__).parent / "fixtures" / "marian_tiny"
    references = json.loads((folder / "references.json").read_text())
    code, out, err = run_main("import", folder, "--to", tmp_path / "opus",
                              "--max-length", references["max_new_tokens"])
    assert code == 0, err
    assert (tmp_path / "opus" / "1" / "saved_model.pb").is_file()
    sentence = references["sentences"][0]
    code, out, err = run_main("predict", tmp_path / "opus", sentence, "--json")
    assert code == 0, err
    assert json.loads(out)[0]["translation"] == references["beam_text"][0]
    code, _, err = run_main("import", tmp_path, "--to", tmp_path / "x")
    assert_one_line_error(code, err, "config.json: not found")
    code, _, err = run_main("train", "transformer-tiny", "--weights", folder, "--data",
                            "numbers", "--set", "d_model=64", "--out", tmp_path / "run")
    assert_one_line_error(code, err, "d_model=64 differs")  # fine-tuning takes the folder's sizes
