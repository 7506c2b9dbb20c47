"""The README's quick start and saved_models/README.md's export example run as written."""

import os
import pathlib
import re
import subprocess
import sys
import tomllib

import pytest

from zoo_cli import run_main

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")


def section(text, heading):
    """The text of the Markdown section `heading` (up to the next heading of its level)."""
    level = heading.split(" ", 1)[0]
    start = text.index(heading + "\n")
    following = re.search(rf"^{level} ", text[start + len(heading):], re.M)
    return text[start:start + len(heading) + following.start()] if following else text[start:]


def code_blocks(text, language=""):
    """The fenced code blocks of `text` in `language` ("" for plain ``` blocks)."""
    return re.findall(rf"^```{language}\n(.*?)^```", text, re.M | re.S)


QUICK_START = section(README, "## Quick start")


def test_the_readme_starts_with_its_two_commands():
    first = code_blocks(README)[0]
    assert [line.split()[:2] for line in first.splitlines()] == [["make", "demo"], ["make", "test"]]
    assert README.index(first) < README.index("## Quick start")


def test_the_quick_start_installs_every_extra():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    install = code_blocks(QUICK_START)[0]
    named = re.findall(r"pip install -e '\.\[([\w-]+)\]'", install)
    assert sorted(named) == sorted(extras) and "pip install -e . " in install
    assert all(re.search(r"\d+(\.\d+)? [MG]B", line) for line in install.splitlines())


def test_the_quick_start_is_six_lines_from_zoo_get_to_a_served_prediction():
    block = code_blocks(QUICK_START, "python")[0]
    statements = [line for line in block.splitlines()
                  if line.strip() and not line.startswith(("import ", "from "))]
    assert len(statements) == 6, statements
    steps = ("datasets.numbers(", ".from_corpus(", "zoo.get(", "model.fit(", "zoo.export(",
             '.signatures["serving_default"]')
    assert all(step in line for step, line in zip(steps, statements)), statements


@pytest.mark.large
def test_the_quick_start_runs_as_written(tmp_path):
    block = code_blocks(QUICK_START, "python")[0]
    done = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, capture_output=True,
                          text=True, timeout=900, env=ENV)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "'translation': <tf.Tensor: shape=(1,), dtype=string" in done.stdout, done.stdout[-2000:]
    assert (tmp_path / "saved_models" / "numbers" / "1" / "saved_model.pb").is_file()


@pytest.mark.large
def test_the_saved_models_readme_exports_a_run_as_written(tmp_path):
    """Its first example, up to the CTranslate2 export (the `deploy` extra), on a run of
    `zoo train` at `runs/numbers`."""
    small = ["--set", "num_encoder_layers=1", "--set", "num_decoder_layers=1", "--set", "d_model=16",
             "--set", "num_heads=2", "--set", "intermediate_dim=32", "--set", "vocabulary_size=100"]
    code, _, err = run_main("train", "transformer-tiny", "--data", "numbers", "--train-size", 64,
                            "--test-size", 8, "--epochs", 1, *small,
                            "--out", tmp_path / "runs" / "numbers")
    assert code == 0, err[-3000:]
    example = code_blocks((ROOT / "saved_models" / "README.md").read_text(encoding="utf-8"),
                          "python")[0]
    runnable = example[:example.index("# The same Transformer for CTranslate2")]
    assert "runs.load_run(\"runs/numbers\")" in runnable and "zoo.export(run.model" in runnable
    done = subprocess.run([sys.executable, "-c", runnable], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600, env=ENV)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "saved_models" / "numbers" / "1" / "saved_model.pb").is_file()
