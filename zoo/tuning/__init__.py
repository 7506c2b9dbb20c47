"""Hyperparameter search for zoo models with keras-tuner: `zoo.hypermodel` and `tune`.

    import keras_tuner
    import zoo

    # A keras_tuner.HyperModel; vocabulary_size is held constant, the rest searched.
    hypermodel = zoo.hypermodel("transformer-tiny", vocabulary_size=1000)
    tuner = keras_tuner.RandomSearch(hypermodel, objective="val_loss", max_trials=10)
    tuner.search(x, y, validation_data=(x_val, y_val), epochs=3)

    # Or all in one: search, print the best trials, write RUN_DIR/best_config.json.
    result = zoo.tuning.tune(
        "transformer-tiny", (x, y), validation_data=(x_val, y_val), max_trials=10,
        directory="RUN_DIR", space={"d_model": [64, 128]}, vocabulary_size=1000,
    )
    best = zoo.tuning.load_best_config("RUN_DIR/best_config.json")
    model = zoo.get(best["model"], **best["config"])   # the best trial's architecture

Search spaces
-------------
Hyperparameters carry the config fields' names, except the few that set
several fields at once. `batch_size` is a `fit` argument, the rest set config
fields. Defaults (the first value is keras-tuner's default):

Transformer (`TransformerConfig`):
    num_layers        [1, 2, 3, 4, 6]        -> num_encoder_layers and num_decoder_layers
    d_model           [64, 128, 256, 512]
    num_heads         [1, 2, 4, 8]           divisors of every d_model value (see below)
    intermediate_dim  [256, 512, 1024, 2048] (d_ff)
    dropout           [0.0, 0.1, 0.2, 0.3]
    label_smoothing   [0.0, 0.1, 0.2]
    warmup_steps      [500, 1000, 2000, 4000]
    batch_size        [16, 32, 64, 128]

ViT (`ViTConfig`):
    patch_size        divisors p of image_size with 2 <= p and 2 <= image_size / p <= 32
                      (4 to 1024 patches), computed from the image size when the
                      hypermodel is made (e.g. [2, 4, 7, 14] for 28, [2, 4, 8, 16] for 32)
    num_layers        [2, 4, 6, 8, 12]       (depth)
    hidden_dim        [64, 128, 192, 256, 384] (width)
    num_heads         [1, 2, 4, 8]           divisors of every hidden_dim value
    mlp_ratio         [2, 4]                 -> mlp_dim = mlp_ratio * hidden_dim
    dropout           [0.0, 0.1, 0.2]
    learning_rate     1e-4 .. 3e-3, log scale
    weight_decay      [0.0, 0.01, 0.05, 0.1]
    batch_size        [32, 64, 128]

RNN + Bahdanau attention (`Seq2SeqConfig`):
    units             [64, 128, 256, 512, 1000] -> encoder_units, decoder_units and
                      attention_units; maxout_units = units // 2 (the paper's 1000 / 500)
    embedding_dim     [32, 64, 128, 256, 620]
    cell              ["gru", "lstm"]
    dropout           [0.0, 0.1, 0.2, 0.3]
    learning_rate     1e-4 .. 1e-2, log scale
    batch_size        [16, 32, 64, 128]

Fixed values. `zoo.hypermodel(name, **fixed)` holds every config field given
in `fixed` constant: a hyperparameter whose fields are all fixed is not
searched at all, and fixed values win over searched ones (fixing only
`num_encoder_layers` leaves `num_layers` searching the decoder's depth).
`batch_size=B` fixes the batch size; `batch_size=None` leaves batching to the
data (needed for an already batched `tf.data.Dataset`).

Narrowing the space. `space={"d_model": [128, 256], "learning_rate":
{"min_value": 1e-4, "max_value": 1e-3, "sampling": "log"}}` replaces the
values of named hyperparameters: a list is a choice, a dict with `min_value`
and `max_value` (and optionally `step`, `sampling`) a range (integers if both
bounds are), or a `Choice`/`Int`/`Float` of this module.

Constraints without conditional hyperparameters. keras-tuner's choices are
fixed when first declared and cannot depend on another hyperparameter's value.
So the constraint "`num_heads` divides `d_model`" is solved when the
hypermodel is made, over the whole space: the `num_heads` choices are the
values that divide *every* `d_model` choice (1, 2, 4, 8 for the defaults);
with `d_model` fixed, the divisors of that value; with `num_heads` fixed, the
`d_model` choices that it divides. Every sampled pair is then valid and no
trial is wasted on an invalid config, with all three tuners (random,
Hyperband, Bayesian). `patch_size` and `image_size` are handled the same way.
Values given explicitly in `space` or `fixed` that break a constraint, unknown
names and values a config rejects raise a `ValueError` naming them, before any
model is built.

Search spaces of registered entries. `zoo.register(..., search_space=...)`
takes a `SearchSpace` (gets all of the above) or any function
`(hp, fixed) -> dict of config overrides` that declares its hyperparameters on
the `keras_tuner.HyperParameters` `hp` (declare `hp.Choice("batch_size", ...)`
there to tune the batch size). Without one, an entry uses its family's.

best_config.json (written by `tune` into its `directory`)::

    {"model": "transformer-tiny",
     "config": {"num_encoder_layers": 2, "d_model": 128, ..., "vocabulary_size": 1000},
     "fit": {"batch_size": 32},
     "objective": {"name": "val_loss", "direction": "min", "value": 2.31},
     "trial_id": "07", "num_params": 1234567, "tuner": "random",
     "hyperparameters": {"num_layers": 2, "d_model": 128, ...}}

`config` holds the searched and the fixed config fields, so
`zoo.get(best["model"], **best["config"])` rebuilds the best trial's model;
`fit` holds the fit arguments (`batch_size`, absent when left to the data).

Resuming. `tune(..., overwrite=False)` (the default) reloads the keras-tuner
project in `directory/project_name` when it exists: completed trials are kept,
a trial that was interrupted is run again, and the search stops once
`max_trials` trials exist. The search's settings (model, fixed values, space,
tuner, objective) are kept in `zoo_search.json` there: resuming with other
settings raises a `ValueError` (keras-tuner would silently mix two searches).
`overwrite=True` starts over.
"""

from zoo.tuning.data import TuningData, load_data
from zoo.tuning.hypermodel import ZooHyperModel, hypermodel
from zoo.tuning.results import (
    BEST_CONFIG,
    TuneResult,
    best_config,
    load_best_config,
    results_table,
    write_best_config,
)
from zoo.tuning.search import (
    TUNERS,
    make_tuner,
    objective_requires_validation,
    parse_objective,
    tune,
)
from zoo.tuning.space import Choice, Float, Int, SearchSpace
from zoo.tuning.spaces import SEQ2SEQ_SPACE, TRANSFORMER_SPACE, VIT_SPACE, vit_patch_sizes

__all__ = [
    "BEST_CONFIG",
    "Choice",
    "Float",
    "Int",
    "SEQ2SEQ_SPACE",
    "SearchSpace",
    "TRANSFORMER_SPACE",
    "TUNERS",
    "TuneResult",
    "TuningData",
    "VIT_SPACE",
    "ZooHyperModel",
    "best_config",
    "hypermodel",
    "load_best_config",
    "load_data",
    "make_tuner",
    "objective_requires_validation",
    "parse_objective",
    "results_table",
    "tune",
    "vit_patch_sizes",
    "write_best_config",
]
