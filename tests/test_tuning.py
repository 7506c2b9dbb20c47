"""Tests of hyperparameter tuning (`zoo/tuning.py`, `zoo.hypermodel`, `zoo tune`).

A random search of one trial runs on a tiny model of every family; its
`best_config.json` rebuilds a model with the same architecture (the best
checkpoint's weights load into it and give the same outputs). The ranking of
several trials, resuming, Hyperband, Bayesian optimisation, distribution
strategies and user entries run on a tiny MLP registered here, the fastest model
to fit. Search spaces are checked by sampling them with keras-tuner and
validating every sampled config.
"""

import dataclasses
import json
import runpy
import sys

import keras
import keras_tuner
import numpy as np
import pytest
import tensorflow as tf

import zoo
from zoo import tuning
from zoo.errors import ZooError
from zoo.tuning import results

COMPLETED = keras_tuner.engine.trial.TrialStatus.COMPLETED

# === Tiny data and search spaces per family ===

VOCAB, LENGTH, COUNT = 20, 6, 32


def _translation_data(rng):
    source = rng.integers(1, VOCAB, (COUNT, LENGTH)).astype("int32")
    target = rng.integers(1, VOCAB, (COUNT, LENGTH)).astype("int32")
    source[:, -2:] = 0  # some padding
    return {"source": source, "target": target}, np.roll(target, -1, axis=1)


def _image_data(rng):
    images = rng.integers(0, 256, (COUNT, 8, 8, 1)).astype("uint8")
    return images, rng.integers(0, 3, (COUNT,)).astype("int32")


FAMILIES = {
    "transformer-tiny": dict(
        data=_translation_data,
        fixed=dict(vocabulary_size=VOCAB, max_length=8),
        space=dict(num_layers=[1], d_model=[8, 16], intermediate_dim=[16], batch_size=[16]),
    ),
    "seq2seq-bahdanau-small": dict(
        data=_translation_data,
        fixed=dict(vocabulary_size=VOCAB, max_length=8),
        space=dict(units=[8, 16], embedding_dim=[8], batch_size=[16]),
    ),
    "vit-tiny": dict(
        data=_image_data,
        fixed=dict(image_size=8, channels=1, num_classes=3, decay_steps=10, warmup_steps=0),
        space=dict(num_layers=[1], hidden_dim=[8, 16], mlp_ratio=[2], batch_size=[16]),
    ),
}


# === A tiny user entry (fast to fit) ===


@dataclasses.dataclass(frozen=True)
class MLPConfig:
    input_dim: int = 4
    units: int = 8
    learning_rate: float = 1e-2

    def __post_init__(self):
        if self.units <= 0:
            raise ValueError(f"`units` must be positive; received units={self.units!r}.")


def _build_mlp(config):
    inputs = keras.Input((config.input_dim,), name="features")
    hidden = keras.layers.Dense(config.units, activation="relu", name="hidden")(inputs)
    return keras.Model(inputs, keras.layers.Dense(1, name="out")(hidden), name="mlp")


def _compile_mlp(model, config):
    model.compile(keras.optimizers.SGD(config.learning_rate), loss="mse")


def _mlp_space(hp, fixed):
    hp.Choice("batch_size", [8, 16])
    return {
        "units": hp.Choice("units", [2, 4, 8, 16]),
        "learning_rate": hp.Float("learning_rate", 1e-3, 1e-1, sampling="log"),
    }


MLP = "tuning-test-mlp"


def _register_mlp():
    zoo.register(MLP, _build_mlp, MLPConfig(), compile_fn=_compile_mlp, search_space=_mlp_space,
                 overwrite=True)


def _mlp_arrays(rng):
    x = rng.normal(size=(32, 4)).astype("float32")
    return x, (x @ np.arange(1.0, 5.0, dtype="float32"))[:, None]


@pytest.fixture
def mlp():
    """A registered user entry with a function search space; yields its name."""
    _register_mlp()
    yield MLP
    zoo.registry.unregister(MLP)


@pytest.fixture
def mlp_data(rng):
    return _mlp_arrays(rng)


@pytest.fixture(scope="module")
def mlp_search(tmp_path_factory):
    """One random search of 2 trials on the MLP entry, for the tests that only read it (they
    register the entry again with `mlp`)."""
    keras.utils.set_random_seed(0)  # the same trials whichever test asks first
    data = _mlp_arrays(np.random.default_rng(0))
    _register_mlp()
    try:
        return tuning.tune(MLP, data, validation_data=data, max_trials=2, verbose=0, input_dim=4,
                           directory=tmp_path_factory.mktemp("mlp_search"))
    finally:
        zoo.registry.unregister(MLP)


class CountFits(keras.callbacks.Callback):
    """Counts `fit` calls in a class attribute (keras-tuner deep-copies callbacks)."""

    fits = 0
    strategies = []

    def on_train_begin(self, logs=None):
        CountFits.fits += 1
        CountFits.strategies.append(self.model.distribute_strategy)


@pytest.fixture
def count_fits():
    CountFits.fits, CountFits.strategies = 0, []
    return CountFits


def _completed(tuner):
    return [t for t in tuner.oracle.trials.values() if t.status == COMPLETED]


def _sample_configs(hypermodel, count, seed=0):
    """`count` random points of the hypermodel's space, as keras-tuner samples them."""
    hp = keras_tuner.HyperParameters()
    hypermodel.declare_hyperparameters(hp)
    configs = []
    for i in range(count):
        trial_hp = hp.copy()
        trial_hp.values = {p.name: p.random_sample(seed + 1000 * i + j)
                           for j, p in enumerate(hp.space)}
        configs.append((trial_hp, hypermodel.config_overrides(trial_hp)))
    return configs


# === A random search on every family ===


@pytest.mark.large
@pytest.mark.parametrize("name", list(FAMILIES))
def test_random_search_best_config_rebuilds_the_best_model(name, rng, tmp_path):
    """One trial per family: the family's hypermodel builds, fits and is rebuilt from
    best_config.json (choosing the best of several trials is the oracle's, family-free:
    test_user_entry_with_a_function_search_space checks it on the MLP)."""
    family = FAMILIES[name]
    x, y = family["data"](rng)
    result = tuning.tune(
        name, (x, y), validation_data=(x, y), max_trials=1, directory=tmp_path, epochs=1,
        space=family["space"], verbose=0, **family["fixed"],
    )
    trials = _completed(result.tuner)
    assert len(trials) == 1
    # Fixed values held constant; searched values inside the space.
    for trial in trials:
        config = result.hypermodel.config_overrides(trial.hyperparameters)
        assert {k: config[k] for k in family["fixed"]} == family["fixed"]
        assert trial.hyperparameters.values["batch_size"] == 16
        for key, choices in family["space"].items():
            assert trial.hyperparameters.values[key] in choices, key

    best = result.best
    assert json.loads((tmp_path / "best_config.json").read_text()) == best
    assert tuning.load_best_config(tmp_path / "best_config.json") == best
    assert best["model"] == name and best["fit"] == {"batch_size": 16}
    scores = [t.score for t in trials]
    assert best["objective"] == {"name": "val_loss", "direction": "min", "value": min(scores)}

    # The config rebuilds the best trial's architecture: same weights, same outputs.
    best_model = result.tuner.get_best_models(1)[0]
    rebuilt = zoo.get(best["model"], **best["config"])
    assert rebuilt.count_params() == best_model.count_params() == best["num_params"]
    assert [w.shape for w in rebuilt.weights] == [w.shape for w in best_model.weights]
    rebuilt.set_weights(best_model.get_weights())
    batch = x if not isinstance(x, dict) else {k: v[:4] for k, v in x.items()}
    batch = batch[:4] if not isinstance(batch, dict) else batch
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(rebuilt(batch)),
        keras.ops.convert_to_numpy(best_model(batch)), rtol=1e-5, atol=1e-6,
    )
    assert "rank" in result.table and str(best["trial_id"]) in result.table


# === Search spaces ===


def test_every_family_has_a_documented_search_space():
    assert zoo.search_space("transformer-base") is tuning.TRANSFORMER_SPACE
    assert zoo.search_space("vit-b16") is tuning.VIT_SPACE
    assert zoo.search_space("seq2seq-bahdanau") is tuning.SEQ2SEQ_SPACE
    for space in (tuning.TRANSFORMER_SPACE, tuning.VIT_SPACE, tuning.SEQ2SEQ_SPACE):
        for name in space.names:
            assert name in tuning.__doc__, name


@pytest.mark.parametrize("name, fixed", [
    ("transformer-tiny", {}),
    ("transformer-tiny", {"d_model": 96}),
    ("vit-tiny", {}),
    ("vit-b16", {}),
    ("vit-tiny-32", {"hidden_dim": 48}),
    ("seq2seq-bahdanau-small", {}),
])
def test_every_sampled_point_is_a_valid_config(name, fixed):
    hypermodel = zoo.hypermodel(name, **fixed)
    for hp, overrides in _sample_configs(hypermodel, 60):
        config = zoo.config(name, **overrides)  # validates
        if hasattr(config, "d_model"):
            assert config.d_model % config.num_heads == 0
            assert config.num_encoder_layers == config.num_decoder_layers == hp["num_layers"]
        if hasattr(config, "patch_size"):
            assert config.image_size % config.patch_size == 0
            assert config.hidden_dim % config.num_heads == 0
            assert config.mlp_dim == hp["mlp_ratio"] * config.hidden_dim
        if hasattr(config, "maxout_units"):
            units = hp["units"]
            assert (config.encoder_units, config.decoder_units, config.attention_units,
                    config.maxout_units) == (units, units, units, units // 2)
        for key, value in fixed.items():
            assert getattr(config, key) == value


def test_heads_are_divisors_of_every_d_model_choice():
    def choices(hypermodel, name):
        return list(hypermodel.search_space.params[name].values)

    assert choices(zoo.hypermodel("transformer-tiny"), "num_heads") == [1, 2, 4, 8]
    assert choices(zoo.hypermodel("transformer-tiny", d_model=36), "num_heads") == [1, 2, 4]
    # Explicit heads that do not divide every d_model are an error; default ones are filtered.
    space = {"d_model": [40, 96], "num_heads": [1, 2, 3, 4, 6, 8]}
    with pytest.raises(ValueError, match=r"`num_heads` values \[3, 6\] do not divide"):
        zoo.hypermodel("transformer-tiny", space=space)
    hypermodel = zoo.hypermodel("transformer-tiny", space={"d_model": [36, 96]})
    assert choices(hypermodel, "num_heads") == [1, 2, 4]
    with pytest.raises(ValueError, match="No `d_model` value .* multiple of every `num_heads`"):
        zoo.hypermodel("transformer-tiny", num_heads=3)
    # Heads fixed: the d_model choices become its multiples.
    hypermodel = zoo.hypermodel("transformer-tiny", num_heads=8, space={"d_model": [64, 128]})
    assert choices(hypermodel, "d_model") == [64, 128] and "num_heads" not in hypermodel.search_space.params


def test_vit_patch_sizes_divide_the_image_size():
    for size in (8, 28, 32, 224):
        expected = [p for p in range(2, size + 1) if size % p == 0 and 4 <= (size // p) ** 2 <= 1024]
        assert list(tuning.vit_patch_sizes(size)) == expected
    assert list(tuning.vit_patch_sizes(28)) == [2, 4, 7, 14]
    hypermodel = zoo.hypermodel("vit-tiny", image_size=32, channels=3)
    assert list(hypermodel.search_space.params["patch_size"].values) == [2, 4, 8, 16]
    # image_size fixed: the entry's patch_size (4) is searched, so 30 is fine.
    hypermodel = zoo.hypermodel("vit-tiny", image_size=30)
    assert list(hypermodel.search_space.params["patch_size"].values) == [2, 3, 5, 6, 10, 15]
    with pytest.raises(ValueError, match="patch_size"):
        zoo.hypermodel("vit-tiny", image_size=29)  # prime: no patch size gives >= 4 patches
    with pytest.raises(ValueError, match="patch_size"):
        zoo.hypermodel("vit-tiny", image_size=30, patch_size=4)
    with pytest.raises(ValueError, match="patch_size"):
        zoo.hypermodel("vit-tiny", space={"patch_size": [4, 5]})


def test_fixed_values_are_not_searched_and_win():
    hypermodel = zoo.hypermodel("transformer-tiny", d_model=32, dropout=0.0,
                                num_encoder_layers=3, batch_size=8)
    names = hypermodel.search_space.names
    assert "d_model" not in names and "dropout" not in names and "batch_size" not in names
    assert "num_layers" in names  # still searches the decoder's depth
    for hp, overrides in _sample_configs(hypermodel, 20):
        assert overrides["d_model"] == 32 and overrides["dropout"] == 0.0
        assert overrides["num_encoder_layers"] == 3
        assert overrides["num_decoder_layers"] == hp["num_layers"]
        assert hypermodel.fit_arguments(hp) == {"batch_size": 8}
    both = zoo.hypermodel("transformer-tiny", num_encoder_layers=1, num_decoder_layers=1)
    assert "num_layers" not in both.search_space.names


@pytest.mark.parametrize("kwargs, message", [
    (dict(d_modle=64), "d_modle"),
    (dict(dropout=1.5), "dropout"),
    (dict(num_heads=3), "num_heads"),
    (dict(batch_size=0), "batch_size"),
    (dict(space={"num_layer": [1]}), "num_layer"),
    (dict(space={"dropout": [0.1, 1.5]}), "dropout"),
    (dict(space={"num_layers": [0, 1]}), "num_encoder_layers"),
    (dict(space={"d_model": []}), "d_model"),
    (dict(space={"warmup_steps": 500}), "warmup_steps"),
    (dict(space={"dropout": {"min_value": 0.3, "max_value": 0.1}}), "min_value"),
    (dict(space={"num_heads": [3, 4]}), "num_heads"),
    (dict(space={"dropout": [0.1, "high"]}), "dropout"),
    (dict(space={"learning_rate": [1e-3]}), "learning_rate"),  # not in the Transformer's space
])
def test_bad_overrides_raise_a_value_error_naming_them(kwargs, message):
    with pytest.raises(ValueError, match=message):
        zoo.hypermodel("transformer-tiny", **kwargs)


def test_space_ranges_and_values_replace_the_defaults():
    hypermodel = zoo.hypermodel("vit-tiny", space={
        "learning_rate": {"min_value": 1e-4, "max_value": 1e-3, "sampling": "log"},
        "num_layers": {"min_value": 1, "max_value": 3},
        "dropout": [0, 0.1],  # mixed int and float: keras-tuner wants floats
    })
    params = hypermodel.search_space.params
    assert isinstance(params["learning_rate"], tuning.Float)
    assert isinstance(params["num_layers"], tuning.Int)
    assert params["dropout"].values == (0.0, 0.1)
    for _, overrides in _sample_configs(hypermodel, 30):
        assert 1e-4 <= overrides["learning_rate"] <= 1e-3
        assert 1 <= overrides["num_layers"] <= 3 and overrides["dropout"] in (0.0, 0.1)


def test_unknown_model_and_entry_without_space(user_entry_without_space):
    with pytest.raises(zoo.UnknownModelError):
        zoo.hypermodel("transformer-tinyy")
    with pytest.raises(ValueError, match="no search space"):
        zoo.hypermodel(user_entry_without_space)


@pytest.fixture
def user_entry_without_space():
    zoo.register("tuning-test-nospace", _build_mlp, MLPConfig(), compile_fn=_compile_mlp,
                 overwrite=True)
    yield "tuning-test-nospace"
    zoo.registry.unregister("tuning-test-nospace")


def test_objective_direction():
    assert tuning.parse_objective("val_loss").direction == "min"
    assert tuning.parse_objective("val_masked_accuracy").direction == "max"
    assert tuning.parse_objective("val_bleu:max").direction == "max"
    with pytest.raises(ValueError, match="val_thing:min"):
        tuning.parse_objective("val_thing")
    with pytest.raises(ValueError, match="'min' or 'max'"):
        tuning.parse_objective("val_loss:down")


# === User entries ===


def test_user_entry_with_a_function_search_space(mlp, mlp_search):
    with pytest.raises(ValueError, match="SearchSpace"):
        zoo.hypermodel(mlp, space={"units": [4]})
    result = mlp_search
    trials = _completed(result.tuner)
    assert len(trials) == 2
    assert trials[0].hyperparameters.values != trials[1].hyperparameters.values
    assert result.best["objective"] == {"name": "val_loss", "direction": "min",
                                        "value": min(t.score for t in trials)}
    best_trial = min(trials, key=lambda t: t.score)
    assert str(result.best["trial_id"]) == str(best_trial.trial_id)
    for trial in trials:
        values = trial.hyperparameters.values
        config = result.hypermodel.config_overrides(trial.hyperparameters)
        assert config == {"units": values["units"], "learning_rate": values["learning_rate"],
                          "input_dim": 4}
    best = result.best
    assert best["fit"]["batch_size"] in (8, 16)
    rebuilt = zoo.get(mlp, **best["config"])
    assert rebuilt.count_params() == best["num_params"] == 4 * best["config"]["units"] * 1 + (
        best["config"]["units"] * 2 + 1)


def test_results_count_a_zoo_family_from_its_config_without_building():
    def build_nothing(config):
        raise AssertionError("results built the model")

    sizes = dict(num_encoder_layers=1, num_decoder_layers=1, d_model=16, num_heads=2,
                 intermediate_dim=32, vocabulary_size=50)
    zoo.register("tuning-test-results", build_nothing, zoo.entry("transformer-tiny").config)
    try:
        counted = results.num_params("tuning-test-results", sizes)
    finally:
        zoo.registry.unregister("tuning-test-results")
    assert counted == zoo.get("transformer-tiny", compile=False, **sizes).count_params()


@dataclasses.dataclass(frozen=True)
class RefusingConfig(MLPConfig):
    """An MLP config whose checks now refuse every searched learning rate."""

    def __post_init__(self):
        if self.learning_rate != 1e-2:
            raise ZooError(f"learning_rate is fixed now; received {self.learning_rate!r}")


def test_results_table_raises_a_builder_bug_and_names_a_refused_config(mlp, mlp_search):
    result = mlp_search
    units = {t.trial_id: t.hyperparameters.values["units"] for t in _completed(result.tuner)}
    rows = [line.split() for line in result.table.splitlines()[2:]]
    assert len(rows) == 2 and "invalid" not in result.table
    for row in rows:  # rank, trial, objective, params, ...: the built MLP's 4u + u + u + 1
        assert row[3] == f"{6 * units[row[1]] + 1:,}", result.table

    def buggy_builder(config):
        raise ValueError("a bug in the builder, not in the config")

    zoo.register(mlp, buggy_builder, MLPConfig(), compile_fn=_compile_mlp,
                 search_space=_mlp_space, overwrite=True)
    with pytest.raises(ValueError, match="a bug in the builder"):
        tuning.results_table(result.tuner, result.hypermodel)

    zoo.register(mlp, _build_mlp, RefusingConfig(), compile_fn=_compile_mlp,
                 search_space=_mlp_space, overwrite=True)
    table = tuning.results_table(result.tuner, result.hypermodel).splitlines()
    assert [row.split()[3] for row in table[2:4]] == ["invalid", "invalid"]
    assert sorted(line.split("'")[0] for line in table[4:]) == sorted(
        f"invalid: trial {trial_id}" for trial_id in units)
    assert all("refused now: learning_rate is fixed now" in line for line in table[4:])


def test_user_entry_with_its_own_search_space_object(mlp_data, tmp_path):
    space = tuning.SearchSpace({"units": tuning.Choice([3, 5]),
                                "batch_size": tuning.Choice([8], fields=())})
    zoo.register("tuning-test-mlp-space", _build_mlp, MLPConfig(), compile_fn=_compile_mlp,
                 search_space=space, overwrite=True)
    try:
        hypermodel = zoo.hypermodel("tuning-test-mlp-space", space={"units": [5, 7]})
        assert {o["units"] for _, o in _sample_configs(hypermodel, 10)} <= {5, 7}
        with pytest.raises(ValueError, match="units"):
            zoo.hypermodel("tuning-test-mlp-space", space={"units": [0, 5]})
    finally:
        zoo.registry.unregister("tuning-test-mlp-space")
    with pytest.raises(ValueError, match="search_space"):
        zoo.register("tuning-test-bad", _build_mlp, MLPConfig(), search_space={"units": [1]})


# === Resume, tuners, strategy ===


class InterruptSecondFit(keras.callbacks.Callback):
    fits = 0

    def on_train_begin(self, logs=None):
        InterruptSecondFit.fits += 1
        if InterruptSecondFit.fits == 2:
            raise KeyboardInterrupt  # as Ctrl-C in the middle of trial 2


def test_an_interrupted_search_continues_where_it_stopped(mlp, mlp_data, tmp_path, count_fits):
    args = dict(validation_data=mlp_data, max_trials=3, directory=tmp_path, verbose=0)
    InterruptSecondFit.fits = 0
    with pytest.raises(KeyboardInterrupt):
        tuning.tune(mlp, mlp_data, callbacks=[InterruptSecondFit()], **args)
    state = json.loads((tmp_path / mlp / "oracle.json").read_text())
    assert state["ongoing_trials"] == {"tuner0": "1"}  # trial 1 was running
    first = json.loads((tmp_path / mlp / "trial_0" / "trial.json").read_text())

    result = tuning.tune(mlp, mlp_data, callbacks=[count_fits()], **args)
    assert count_fits.fits == 2  # trial 1 again, then trial 2; trial 0 is kept
    trials = result.tuner.oracle.trials
    assert sorted(trials) == ["0", "1", "2"] and len(_completed(result.tuner)) == 3
    assert trials["0"].score == first["score"]
    assert trials["0"].hyperparameters.values == first["hyperparameters"]["values"]

    count_fits.fits = 0
    again = tuning.tune(mlp, mlp_data, callbacks=[count_fits()], **args)
    assert count_fits.fits == 0 and again.best == result.best  # nothing left to run
    with pytest.raises(ValueError, match=r"other settings \(fixed differ\)"):
        tuning.tune(mlp, mlp_data, units=4, **args)
    with pytest.raises(ValueError, match=r"other settings \(tuner differ\)"):
        tuning.tune(mlp, mlp_data, **{**args, "tuner": "bayesian"})
    fresh = tuning.tune(mlp, mlp_data, callbacks=[count_fits()], overwrite=True,
                        **{**args, "max_trials": 1})
    assert count_fits.fits == 1 and sorted(fresh.tuner.oracle.trials) == ["0"]


@pytest.mark.parametrize("kind, tuner_class", [
    ("hyperband", keras_tuner.Hyperband),
    ("bayesian", keras_tuner.BayesianOptimization),
])
def test_hyperband_and_bayesian_search(kind, tuner_class, mlp, mlp_data, tmp_path):
    result = tuning.tune(mlp, mlp_data, validation_data=mlp_data, tuner=kind, max_trials=2,
                         epochs=2, directory=tmp_path, verbose=0)
    assert isinstance(result.tuner, tuner_class)
    assert len(_completed(result.tuner)) == 2
    assert result.best["tuner"] == kind
    assert not any(k.startswith("tuner/") for k in result.best["hyperparameters"])
    zoo.get(mlp, **result.best["config"])


def test_tuner_arguments_are_checked(mlp):
    hypermodel = zoo.hypermodel(mlp)
    with pytest.raises(ValueError, match="tuner"):
        tuning.make_tuner(hypermodel, "grid")
    with pytest.raises(ValueError, match="max_trials"):
        tuning.make_tuner(hypermodel, max_trials=0)
    with pytest.raises(ValueError, match="validation"):
        tuning.tune(mlp, (np.zeros((4, 4)), np.zeros((4, 1))), objective="val_loss")


def test_search_under_a_distribution_strategy(mlp, mlp_data, tmp_path, count_fits):
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    result = tuning.tune(mlp, mlp_data, validation_data=mlp_data, max_trials=1,
                         directory=tmp_path, strategy=strategy, callbacks=[count_fits()],
                         verbose=0)
    assert result.tuner.distribution_strategy is strategy
    assert count_fits.strategies == [strategy]  # the model was built in its scope
    named = tuning.make_tuner(zoo.hypermodel(mlp), strategy="mirrored",
                              directory=tmp_path / "named")
    assert isinstance(named.distribution_strategy, tf.distribute.MirroredStrategy)


def test_batch_size_with_datasets_and_data_functions(mlp, mlp_data, tmp_path):
    x, y = mlp_data
    batches = []

    def make(global_batch):
        batches.append(global_batch)
        return tf.data.Dataset.from_tensor_slices((x, y)).batch(global_batch)

    result = tuning.tune(mlp, make, validation_data=make, max_trials=1, directory=tmp_path,
                         verbose=0, space=None)
    assert batches and set(batches) == {result.best["fit"]["batch_size"]}
    dataset = make(8)
    result = tuning.tune(mlp, dataset, validation_data=dataset, max_trials=1,
                         directory=tmp_path / "dataset", verbose=0)
    assert result.best["fit"] == {}  # the dataset's own batches
    with pytest.raises(ValueError, match="already batched"):
        tuning.tune(mlp, dataset, validation_data=dataset, max_trials=1, batch_size=8,
                    directory=tmp_path / "conflict", verbose=0)
    # Used directly with keras-tuner, the hypermodel refuses to ignore its batch size.
    model = zoo.get(mlp)
    hp = keras_tuner.HyperParameters()
    zoo.hypermodel(mlp).declare_hyperparameters(hp)
    with pytest.raises(ValueError, match="already batched"):
        zoo.hypermodel(mlp).fit(hp, model, dataset, epochs=1, verbose=0)


# === Command line ===


def _zoo(capsys, monkeypatch, *args):
    """`python -m zoo ARGS`, its module run in this process (runpy): (exit code, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["zoo", *args])
    with pytest.raises(SystemExit) as exit_:
        runpy.run_module("zoo", run_name="__main__")
    captured = capsys.readouterr()
    return exit_.value.code, captured.out, captured.err


@pytest.mark.large
def test_cli_tune_writes_a_best_config_that_zoo_get_accepts(tmp_path, capsys, monkeypatch):
    run_dir = tmp_path / "run"
    code, out, err = _zoo(
        capsys, monkeypatch, "tune", "vit-tiny", "--data", "digits", "--max-trials", "1", "--epochs", "1",
        "--steps-per-epoch", "2", "--train-size", "200", "--directory", str(run_dir),
        "--space", "num_layers=[1]", "--space", "hidden_dim=[16]", "--space", "batch_size=[16]",
        "--set", "warmup_steps=0",
    )
    assert code == 0, err[-3000:]
    assert "rank" in out and "val_loss" in out
    best = tuning.load_best_config(run_dir / "best_config.json")
    assert best["model"] == "vit-tiny"
    assert {k: best["config"][k] for k in ("image_size", "channels", "num_classes")} == {
        "image_size": 8, "channels": 1, "num_classes": 10}
    model = zoo.get(best["model"], **best["config"])
    assert model.count_params() == best["num_params"]

    code, _, err = _zoo(capsys, monkeypatch, "tune", "vit-tiny", "--data", "digits", "--space",
                        "hidden_dim=[6]", "--space", "num_heads=[4]", "--directory",
                        str(tmp_path / "bad"))
    assert code == 2 and "num_heads" in err
