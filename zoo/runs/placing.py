"""Where a run trains: `place` resolves `zoo train`'s `--strategy`, `--tpu`, the processes of a
JAX job and `--model-parallel` (a new run's, or the one a resumed run recorded) into a
`zoo.distribute.Placement`, before anything else of the run is done (TensorFlow's
`MultiWorkerMirroredStrategy` and JAX's `keras.distribution.initialize` must come first).
"""

import contextlib

from zoo import distribute, layouts
from zoo.runs.rundir import read_config, read_config_file


def place(name, run_dir, strategy, tpu, processes, given):
    """`distribute.place(strategy, tpu, processes)`, under `--model-parallel`'s distribution
    when there is one (`model_parallel`); `given`: `(config_file, overrides, options)` of
    `zoo.runs.train`, which decide the sizes the layout map splits."""
    with model_parallel(name, run_dir, strategy, *given):
        return distribute.place(strategy, tpu=tpu, processes=processes)


def model_parallel(name, run_dir, strategy, config_file, overrides, options):
    """The scope of `model_parallel=N` (`zoo train --model-parallel N`), else of the resumed
    run's `training.model_parallel`: `zoo.layouts.model_parallel`'s distribution, which
    `distribute.place("default")` takes, its layout map from the run's sizes (the resumed
    run's config, else `config_file`, `overrides` and `weights`); a null one without either."""
    saved = read_config(run_dir) if (run_dir / "config.json").is_file() else None
    size = options.get("model_parallel") or (saved or {}).get("training", {}).get(
        "model_parallel")
    if size is None:
        return contextlib.nullcontext()
    if saved is not None:
        sizes = dict(saved["model_config"])
    else:
        sizes = read_config_file(config_file)[0] if config_file is not None else {}
        sizes.update(overrides or {})
        if options.get("weights") is not None:
            sizes["weights"] = options["weights"]
    return layouts.model_parallel(name, size, strategy, **sizes).scope()
