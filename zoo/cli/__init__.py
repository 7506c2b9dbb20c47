"""The command line: `python -m zoo` (or the `zoo` console script).

    zoo list [PATTERN]
    zoo describe NAME [--set key=value ...] [--json]
    zoo train NAME --data DATASET [--epochs N --batch-size N --max-steps N --strategy S
                                   --model-parallel N --mixed-precision [P] --jit --out RUN_DIR
                                   --config FILE --weights PATH --tokenizer sentencepiece|wordpiece
                                   --set key=value ...]
    zoo evaluate RUN_DIR [--checkpoint best|last|average --beam-size K --limit N --confidence [N]]
    zoo compare RUN_A RUN_B [--beam-size K --limit N --samples N]
    zoo export RUN_DIR [--to saved_models/NAME --version N
                        --format litert|onnx|openvino|ctranslate2]
    zoo import OPUS_MT_FOLDER --to saved_models/NAME [--version N --beam-size K
                                                     --format ctranslate2]
    zoo predict RUN_DIR|SAVED_MODEL INPUT... [--beam-size K --top-k K --json
                                              --sample --temperature T --top-p P --seed S]
    zoo tune NAME --data DATASET [--tuner random|hyperband|bayesian --max-trials N
                                  --objective val_loss --directory RUN_DIR --strategy S
                                  --set key=value ... --space key=[values] ...]
    (train and tune share the dataset options --data-dir --train-size --test-size
     --test-ratio --test-file, and --epochs --batch-size --strategy --set --seed --val-ratio)
    zoo demo [--minutes M]
    zoo explore RUN_DIR|SAVED_MODEL [--port 7860 --host 127.0.0.1]   (the web extra)

User errors (unknown model, missing file, bad --set, a dataset that does not
fit the model, a corrupt file: `zoo.errors.ZooError`) print one line and exit
with code 2; a full disk prints one line (the file, the free space) and exits
with code 1; any other error is a bug of the zoo: it prints its last frames
and exits with code 1. Set ZOO_DEBUG=1 to see the full traceback instead.

`--help`, `zoo list` and `zoo describe` import no TensorFlow (nor Keras); the
other commands import it when they run, with TensorFlow's C++ logging at
errors only (`TF_CPP_MIN_LOG_LEVEL=2` unless set; `ZOO_DEBUG=1` shows it all)
and its start-up lines kept off stderr (`quiet`).

The modules. Light ones, which build the parser: `arguments` (what every
command shares), `choices` (the choices the parsers offer), `quiet`, one
module per command or pair of commands with its `add_<command>_parser`
(`models`: list, describe, which also run there; `train`; `evaluate`:
evaluate, compare, predict; `saved_models`: export, import; `tune`; `demo`;
`explore`),
and `main` (`build_parser`, `main`). The functions that run the other
commands are in `commands/` (`commands.train.run_train`, ...), which import
TensorFlow.

Adding a command `zoo NAME`:
    1. `zoo/cli/NAME.py`: `add_NAME_parser(commands)`, importing only light
       modules (argparse, `zoo.cli.arguments`, `zoo.cli.choices`);
    2. `zoo/cli/commands/NAME.py`: `run_NAME(args)`, importing what it needs;
    3. one line in `zoo.cli.main.COMMANDS`, the dispatch table:
       `"NAME": (add_NAME_parser, "zoo.cli.commands.NAME:run_NAME")`. The
       function is named by a string and imported (importlib) only when the
       command runs: a project import inside no function, and no TensorFlow
       for `zoo --help`. tests/test_cli_light.py checks that `--help` stays
       light.
"""

from zoo.cli.arguments import (
    DATASETS_HELP,
    EXIT_BUG,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    ArgumentParser,
    UserError,
    parse_overrides,
)
from zoo.cli.main import build_parser, main

__all__ = [
    "DATASETS_HELP",
    "EXIT_BUG",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_USAGE",
    "ArgumentParser",
    "UserError",
    "build_parser",
    "main",
    "parse_overrides",
]
