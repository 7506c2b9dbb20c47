"""`zoo.runs.options.TrainingOptions`: the one list of training options."""

import dataclasses
import json
import pathlib

import pytest

from zoo import cli
from zoo.datasets import preparation
from zoo.runs.options import TrainingOptions

FIXTURES = pathlib.Path(__file__).parent / "fixtures"


def test_zoo_train_has_a_flag_for_every_option_and_passes_each_one():
    args = cli.build_parser().parse_args([
        "train", "transformer-tiny", "--data", "numbers", "--epochs", "3", "--batch-size", "8",
        "--max-steps", "5", "--time-limit", "1.5", "--seed", "2", "--val-ratio", "0.1",
        "--mixed-precision", "--jit", "--separate-vocabularies", "--data-dir", "d",
        "--train-size", "10", "--test-size", "4", "--test-ratio", "0.3", "--test-file", "t.tsv",
        "--weights", "w.npz", "--tokenizer", "wordpiece", "--batch-tokens", "512",
        "--schedule", "budget-cosine", "--steps-per-epoch", "40", "--average-checkpoints", "3",
        "--warmup-ratio", "0.2", "--data-seed", "7", "--model-parallel", "2",
    ])
    given = {name: getattr(args, name) for name in TrainingOptions.names()}
    assert None not in given.values(), given
    options = TrainingOptions(**given)
    assert options.training_section()["mixed_precision"] == "auto"
    assert options.data_section()["test_path"] == "t.tsv"
    assert options.training_section()["tokenizer"] == "wordpiece"
    assert options.training_section()["weights"] == "w.npz"
    assert options.training_section()["batch_tokens"] == 512
    assert options.training_section()["schedule"] == "budget-cosine"
    assert options.training_section()["steps_per_epoch"] == 40
    assert options.training_section()["average_checkpoints"] == 3
    assert options.training_section()["warmup_ratio"] == 0.2
    assert options.data_section()["data_seed"] == 7
    assert options.training_section()["model_parallel"] == 2


def test_sections_are_the_config_json_ones_with_defaults_filled_in():
    options = TrainingOptions(epochs=3)
    training = options.training_section()
    assert training["epochs"] == 3 and training["seed"] == 0 and training["val_ratio"] == 0.05
    assert training["batch_size"] is None  # decided by the data's kind
    data = options.data_section()
    assert set(data) == {"data_dir", "train_size", "test_size", "test_ratio", "test_path",
                         "data_seed"}
    # The test split does not follow the training seed: a new run records data seed 0.
    assert data["data_seed"] == 0 and TrainingOptions(seed=3).data_section()["data_seed"] == 0


def test_an_earlier_config_json_reads_back_and_conflicts_name_the_option():
    saved = json.loads((FIXTURES / "run_v1_transformer/config.json").read_text())
    options = TrainingOptions.from_config(saved)
    assert options.epochs == 2 and options.train_size == 200
    assert options.conflicts(saved) == []
    assert TrainingOptions(epochs=3).conflicts(saved) == ["epochs=3 (saved: 2)"]
    assert TrainingOptions(seed=0, test_size=8).conflicts(saved) == []


@pytest.mark.parametrize("field, value", [("epochs", 0), ("batch_size", True), ("batch_tokens", 0),
                                          ("max_steps", 1.5), ("time_limit", -1),
                                          ("data_seed", -1)])
def test_bad_values_are_refused_with_their_name(field, value):
    with pytest.raises(ValueError, match=field):
        TrainingOptions(**{field: value})


def test_options_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        TrainingOptions().epochs = 3


def test_the_data_options_are_the_ones_preparation_passes_to_the_datasets():
    assert TrainingOptions.names("data") == preparation.DATA_OPTIONS


def test_the_data_seed_decides_the_split_and_earlier_runs_keep_their_training_seeds():
    def test_pairs(options, seed=None):
        _, data = preparation.load_data("transformer-tiny", "numbers", options, seed=seed,
                                        quiet=True)
        return data.test_pairs

    sizes = {"train_size": 40, "test_size": 10}
    fixed = test_pairs({**sizes, "data_seed": 0}, seed=5)
    assert fixed == test_pairs(sizes) == test_pairs({**sizes, "data_seed": None})
    assert fixed != test_pairs({**sizes, "data_seed": 5}, seed=0)
    # A config.json from before the option (no data_seed) split with its training seed.
    saved = json.loads((FIXTURES / "run_v1_transformer/config.json").read_text())
    assert "data_seed" not in saved["data"]["options"]
    saved["training"]["seed"] = 5
    _, data = preparation.load_run_data(saved, quiet=True)
    assert data.test_pairs == test_pairs(dict(saved["data"]["options"], data_seed=5))


@pytest.mark.large
def test_a_run_with_token_batches_records_them_and_image_runs_refuse_them(tmp_path, capsys):
    from zoo import runs

    small = dict(d_model=16, num_heads=2, intermediate_dim=32, num_encoder_layers=1,
                 num_decoder_layers=1)
    runs.train("transformer-tiny", "numbers", tmp_path / "run", overrides=small, train_size=64,
               test_size=8, epochs=1, max_steps=2, batch_tokens=96, tokenizer="wordpiece")
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["training"]["batch_tokens"] == 96
    assert "global batch 96 tokens" in capsys.readouterr().out
    with pytest.raises(ValueError, match="batch_tokens is for translation"):
        runs.train("vit-tiny", "digits", tmp_path / "image", max_steps=1, batch_tokens=96,
                   overrides=dict(hidden_dim=8, num_heads=1, mlp_dim=8, num_layers=1))


@pytest.mark.parametrize("ratio", [0, 1, 1.5, -0.1, True, "0.1"])
def test_a_warmup_ratio_outside_zero_to_one_is_refused(ratio):
    with pytest.raises(ValueError, match="warmup_ratio must be a number between 0 and 1"):
        TrainingOptions(warmup_ratio=ratio)
