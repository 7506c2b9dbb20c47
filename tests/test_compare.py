"""`zoo evaluate --confidence` and `zoo compare`: how far a score can be trusted, and whether
run B beats run A, on the committed run directories (tests/fixtures, copied before use)."""

import json
import pathlib
import shutil

import pytest

from zoo import datasets, runs
from zoo.datasets.preparation import load_data
from zoo.runs import comparison, scores

from zoo_cli import run_main

FIXTURES = pathlib.Path(__file__).parent / "fixtures"


@pytest.fixture
def transformer_run(tmp_path):
    return pathlib.Path(shutil.copytree(FIXTURES / "run_v1_transformer", tmp_path / "a"))


@pytest.fixture
def convs2s_run(tmp_path):
    return pathlib.Path(shutil.copytree(FIXTURES / "run_v2_convs2s", tmp_path / "b"))


@pytest.mark.large
def test_evaluate_confidence_adds_bootstrap_intervals(transformer_run):
    code, out, err = run_main("evaluate", transformer_run, "--beam-size", 1,
                              "--confidence", 50)
    assert code == 0, err
    assert "95% bootstrap intervals (50 resamples): BLEU" in out and "chrF" in out
    # The result, as `--json` prints it, is in metrics.json.
    greedy = json.loads((transformer_run / "metrics.json").read_text())["greedy"]
    assert greedy["confidence"]["samples"] == 50
    # The intervals are those of the run's own greedy hypotheses, decoded again here.
    run = runs.load_run(transformer_run)
    _, data = load_data(run.name, "numbers", run.config["data"]["options"],
                        run.config["model_config"], 0, True)
    sources, references = runs.evaluation.test_sources_and_references(run, data)
    hypotheses = runs.translate(run, sources, beam_size=1)
    assert greedy["confidence"] == scores.confidence(hypotheses, references, 50)
    assert greedy["chrf"] == pytest.approx(scores.chrf(hypotheses, references))


@pytest.mark.large
def test_compare_two_runs_on_the_same_pairs(transformer_run, convs2s_run):
    code, out, err = run_main("compare", transformer_run, convs2s_run, "--beam-size", 1,
                              "--samples", 50, "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["num_examples"] == 8 and result["dropped"] == 0
    # The same test: each run's greedy output on A's test pairs.
    a, b = runs.load_run(transformer_run), runs.load_run(convs2s_run)
    data, _ = comparison.held_out_from_both(a, b)
    sources, references = runs.evaluation.test_sources_and_references(a, data)
    expected = scores.paired_bootstrap(runs.translate(a, sources, beam_size=1),
                                       runs.translate(b, sources, beam_size=1), references, 50)
    for key in ("bleu", "chrf"):
        assert result[key] == expected[key]
    code, out, _ = run_main("compare", transformer_run, convs2s_run, "--beam-size", 1,
                            "--samples", 50)
    assert "p = " in out and "(at 0.05)" in out and "8 test pairs held out from both" in out


def test_compare_drops_the_test_pairs_that_run_b_trained_on(transformer_run, tmp_path):
    other = pathlib.Path(shutil.copytree(transformer_run, tmp_path / "other-seed"))
    config = json.loads((other / "config.json").read_text())
    config["training"]["seed"] = 5  # another seed: another split of `numbers`
    (other / "config.json").write_text(json.dumps(config))
    a, b = runs.load_run(transformer_run), runs.load_run(other)
    data, dropped = comparison.held_out_from_both(a, b)
    options = dict(config["data"]["options"])
    test_a = datasets.load("numbers", seed=0, **options).test_pairs
    train_b = set(datasets.load("numbers", seed=5, **options).train_pairs)
    assert data.test_pairs == [pair for pair in test_a if pair not in train_b]
    assert dropped == len(test_a) - len(data.test_pairs)


def test_compare_keeps_every_test_pair_of_runs_with_one_data_seed(transformer_run, tmp_path):
    runs_by_data_seed = {}
    for data_seed in (0, 5):
        other = pathlib.Path(shutil.copytree(transformer_run, tmp_path / f"data-seed-{data_seed}"))
        config = json.loads((other / "config.json").read_text())
        config["training"]["seed"] = 3  # another training seed, the data seed given
        config["data"]["options"]["data_seed"] = data_seed
        (other / "config.json").write_text(json.dumps(config))
        runs_by_data_seed[data_seed] = runs.load_run(other)
    a = runs.load_run(transformer_run)  # from before data_seed: its training seed, 0
    data, dropped = comparison.held_out_from_both(a, runs_by_data_seed[0])
    assert dropped == 0 and data.test_pairs == comparison.held_out_from_both(a, a)[0].test_pairs
    _, dropped = comparison.held_out_from_both(a, runs_by_data_seed[5])
    assert dropped > 0


def test_compare_refuses_image_runs_and_mixed_tokenizers(transformer_run, tmp_path):
    vit = shutil.copytree(FIXTURES / "run_v1_vit", tmp_path / "vit")
    code, _, err = run_main("compare", transformer_run, vit)
    assert code == 2 and "compare is for translation runs" in err
    seq2seq = shutil.copytree(FIXTURES / "run_v2_seq2seq", tmp_path / "s")
    code, _, err = run_main("compare", transformer_run, seq2seq)
    assert code == 2 and "target tokenizers are of one kind" in err
