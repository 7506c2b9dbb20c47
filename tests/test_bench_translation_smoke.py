"""The real-language benchmark runs end to end on a tiny model, budget and data slice."""

import json
import math

import pytest
import sacrebleu

from zoo.datasets import catalogs

TINY = ["num_encoder_layers=1", "num_decoder_layers=1", "d_model=16", "num_heads=2",
        "intermediate_dim=32", "vocabulary_size=300", "max_length=16"]


@pytest.mark.large
@pytest.mark.skipif("es" not in catalogs.languages(), reason=(
    "needs the Spanish gettext catalogs of installed software (/usr/share/locale/es/LC_MESSAGES/"
    "*.mo), and this machine has none: packages bring them with their translations, unless a "
    "minimal image drops them (a path-exclude of /usr/share/locale in /etc/dpkg/dpkg.cfg.d/; "
    "remove it, then apt-get install --reinstall coreutils); the catalog reader's own tests ran "
    "on generated .mo files"))
def test_bench_translation_scores_the_exported_model(tmp_path, monkeypatch, run_benchmark):
    # --eval-every past the budget: one snapshot, at the end (each one is exported and scored).
    command = ["--budget", "0.05", "--eval-every", "1",
               "--model", "transformer-tiny", "--train-size", "200", "--eval-size", "3",
               "--signature", "greedy", "--json", str(tmp_path / "row.json")]
    for override in TINY:
        command += ["--set", override]
    monkeypatch.chdir(tmp_path)
    out = run_benchmark("bench_translation.py", *command)
    row = json.loads((tmp_path / "row.json").read_text())
    assert row["model"] == "transformer-tiny" and row["data"] == "gettext:es"
    assert row["train_pairs"] == 200 and row["test_pairs"] == 3 and row["signature"] == "greedy"
    assert row["checkpoint"] == "best"  # the epoch cut short still ends (and validates)
    assert row["budget_minutes"] == 0.05 and row["train_minutes"] > 0 and row["steps"] >= 1
    # The scores are sacrebleu's corpus BLEU and chrF of the translations shown (3 examples:
    # every pair scored), against the catalogs' own strings.
    examples = row["examples"]
    hypotheses, references = [e["translation"] for e in examples], [[e["reference"] for e in examples]]
    assert row["bleu"] == pytest.approx(sacrebleu.corpus_bleu(hypotheses, references).score)
    assert row["chrf"] == pytest.approx(sacrebleu.corpus_chrf(hypotheses, references).score)
    assert row["curve"] and row["curve"][-1]["steps"] == row["steps"]
    for point in row["curve"]:
        assert math.isfinite(point["bleu"]) and math.isfinite(point["chrf"]) and point["minutes"] > 0
    # Translations are strings out of the SavedModel, of the held-out catalogs.
    assert len(examples) == 3
    assert all(isinstance(e["translation"], str) and e["reference"] for e in examples)
    assert "| training minutes | steps | BLEU (cased) | chrF |" in out
