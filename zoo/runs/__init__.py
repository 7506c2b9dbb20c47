"""Training runs: the Python API behind `zoo train / evaluate / export / predict`.

    from zoo import runs
    result = runs.train("transformer-tiny", "numbers", out="runs/tiny", epochs=10)
    metrics = runs.evaluate("runs/tiny")                 # exact match, BLEU, chrF; greedy and beam
    runs.evaluate("runs/tiny", bootstrap=1000)           # ... with 95% bootstrap intervals
    runs.compare("runs/a", "runs/b")                     # is B better? paired bootstrap, p-value
    version_dir = runs.export_run("runs/tiny")           # saved_models/transformer-tiny/<version>
    runs.predict("runs/tiny", ["dreihundertvierundzwanzig"])

One module per concern: `rundir` (the run-directory format, `load_run`),
`options` (`TrainingOptions`, the one list of training options), `callbacks`,
`training` (`train`, resuming), `fitting` (`model.fit`, `summary.json`),
`imported` (fine-tuning a model imported from a folder, with its own
tokenizers), `inference` (`translate`), `evaluation`, `scores` (BLEU, chrF,
exact match, bootstrap intervals and tests), `comparison` (`compare`),
`exporting`, `prediction` and `demo`. What a dataset spec becomes before training is
`zoo.datasets.preparation`'s, shared with `zoo.tuning`.
"""

from zoo.runs.comparison import compare
from zoo.runs.evaluation import evaluate
from zoo.runs.exporting import export_run
from zoo.runs.fitting import RunResult
from zoo.runs.inference import canonical, padded_sources, translate
from zoo.runs.options import TrainingOptions
from zoo.runs.prediction import predict, resolve_saved_model
from zoo.runs.rundir import (
    Run,
    load_run,
    load_tokenizers,
    read_config,
    read_config_file,
    read_history,
)
from zoo.runs.training import RunFinishedError, train

__all__ = [
    "Run",
    "RunFinishedError",
    "RunResult",
    "TrainingOptions",
    "canonical",
    "compare",
    "evaluate",
    "export_run",
    "load_run",
    "load_tokenizers",
    "padded_sources",
    "predict",
    "read_config",
    "read_config_file",
    "read_history",
    "resolve_saved_model",
    "train",
    "translate",
]
