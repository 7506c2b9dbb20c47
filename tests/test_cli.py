"""The command line, run as a user would: through subprocesses."""

import json
import os
import subprocess
import sys

import pytest

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONUNBUFFERED="1")


def zoo_cli(*args, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "zoo", *args],
        capture_output=True, text=True, timeout=timeout, env=ENV,
    )


def test_list_and_glob():
    result = zoo_cli("list", "vit-*")
    assert result.returncode == 0, result.stderr
    names = [line.split()[0] for line in result.stdout.splitlines()]
    assert names == sorted(names)
    assert "vit-b16" in names and "vit-tiny" in names
    assert not any(n.startswith("transformer") for n in names)


def test_describe_json_reports_analytic_parameter_count():
    result = zoo_cli("describe", "transformer-base", "--json")
    assert result.returncode == 0, result.stderr
    described = json.loads(result.stdout)
    assert described["num_params"] == 63_082_496
    assert described["config"]["d_model"] == 512
    assert "Vaswani" in described["reference"]


def test_describe_with_overrides_prints_summary():
    result = zoo_cli("describe", "vit-tiny", "--set", "num_layers=2", "--set", "random_flip=true")
    assert result.returncode == 0, result.stderr
    assert "vit-tiny" in result.stdout
    assert "num_layers = 2" in result.stdout
    assert "random_flip = True" in result.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (("describe", "transformer-bse"), "did you mean 'transformer-base'"),
        (("describe", "vit-tiny", "--set", "patch_size=5"), "patch_size must divide image_size"),
        (("describe", "vit-tiny", "--set", "depth=3"), "Valid fields"),
        (("describe", "vit-tiny", "--set", "oops"), "--set expects key=value"),
        (("list", "nothing-*"), "No model matches"),
    ],
)
def test_user_errors_print_one_line_and_exit_2(args, message):
    result = zoo_cli(*args)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    error_lines = [line for line in result.stderr.splitlines() if line.startswith("zoo ")]
    assert len(error_lines) == 1
    assert message.lower() in error_lines[0].lower()


def test_help_has_an_example():
    for command in ("list", "describe", "demo"):
        result = zoo_cli(command, "--help")
        assert result.returncode == 0
        assert "Example:" in result.stdout


@pytest.mark.slow
def test_demo_runs_end_to_end_on_tiny_settings():
    result = zoo_cli(
        "demo", "--minutes", "0.15", "--train-size", "600", "--test-size", "20", timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "exact match" in result.stdout
    assert "BLEU" in result.stdout
