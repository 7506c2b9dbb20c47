"""Every tutorial runs as a script in smoke mode and draws its pictures; each opens as a notebook.

The scripts run in this process (`runpy`, as `python tutorials/NAME.py` runs them, without
another TensorFlow import per tutorial), except tutorial 6: it splits the CPU into two
logical devices, which only a process whose TensorFlow has not initialised its devices can
do, so it runs as a fresh `python` process.
"""

import os
import pathlib
import runpy
import subprocess
import sys

import matplotlib.image
import pytest
import tensorflow as tf

TUTORIALS = pathlib.Path(__file__).resolve().parents[1] / "tutorials"

# The pictures each tutorial writes into $TUTORIAL_OUT.
PICTURES = {
    "01_attention_pooling.py": [
        "01_kernel_regression.png", "01_multi_head_causal.png", "01_positional_encoding.png",
    ],
    "02_bahdanau_translation.py": [
        "02_training_curves.png", "02_alignment.png", "02_alignment_numeric.png",
    ],
    "03_transformer_translation.py": ["03_training_curves.png", "03_cross_attention.png"],
    "04_vit_fashion_mnist.py": [
        "04_training_curves.png", "04_attention_rollout.png",
        "04_position_embedding_similarity.png",
    ],
    "05_tuning.py": ["05_trials.png", "05_training_curves.png"],
    "06_distributed_training.py": ["06_single_vs_mirrored.png"],
}
# Tutorials that configure TensorFlow's devices: only a fresh process can run them.
OWN_PROCESS = {"06_distributed_training.py"}


def test_every_tutorial_is_listed():
    assert sorted(p.name for p in TUTORIALS.glob("[0-9]*.py")) == sorted(PICTURES)


@pytest.mark.parametrize("name", sorted(PICTURES))
def test_tutorial_is_a_jupytext_percent_notebook(name):
    import jupytext
    import nbformat

    notebook = jupytext.reads((TUTORIALS / name).read_text(encoding="utf-8"), fmt="py:percent")
    nbformat.validate(notebook)
    kinds = [cell.cell_type for cell in notebook.cells]
    assert kinds[0] == "markdown" and notebook.cells[0].source.startswith(f"# {int(name[:2])}.")
    assert kinds.count("code") >= 3 and kinds.count("markdown") >= 3


@pytest.mark.large
@pytest.mark.parametrize("name", sorted(PICTURES))
def test_tutorial_runs_in_smoke_mode_and_draws_its_pictures(name, tmp_path, monkeypatch):
    out = tmp_path / "images"
    env = dict(
        TUTORIAL_SMOKE="1",
        TUTORIAL_OUT=str(out),
        TUTORIAL_MODELS=str(tmp_path / "models"),
        TF_CPP_MIN_LOG_LEVEL="2",
        MPLBACKEND="Agg",
    )
    if name in OWN_PROCESS:
        result = subprocess.run(
            [sys.executable, str(TUTORIALS / name)], cwd=tmp_path, env=dict(os.environ, **env),
            capture_output=True, text=True, timeout=600,
        )
        assert result.returncode == 0, (
            f"{name} failed:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}")
    else:
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        monkeypatch.chdir(tmp_path)
        monkeypatch.setattr(sys, "argv", [str(TUTORIALS / name)])
        try:
            runpy.run_path(str(TUTORIALS / name), run_name="__main__")
        finally:  # smoke runs may run tf.functions eagerly (tutorials 2, 5): not the next test
            tf.config.run_functions_eagerly(False)
    assert sorted(p.name for p in out.glob("*.png")) == sorted(PICTURES[name])
    for picture in PICTURES[name]:
        path = out / picture
        assert path.stat().st_size > 0, picture
        pixels = matplotlib.image.imread(path)
        assert pixels.std() > 0.02, f"{picture} is blank"
