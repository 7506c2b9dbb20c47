"""Runs one `zoo train ...` command line, as one worker of a job, with probes for the tests.

Run by tests/test_distribute.py, one process per worker (`TF_CONFIG` set for
`--strategy multiworker`; under JAX, `--coordinator`, `--num-processes` and `--process-id`),
and as `main(argv)` in the test's own process for its
single-replica reference (`--strategy mirrored` on that process's one device):

    python tests/distributed_worker.py --weights FILE --log FILE [--pause-at E:B] \
        [--interrupt-at E:B] -- train transformer-tiny --data numbers --strategy multiworker \
        --out RUN ...

The arguments after `--` go to the real command line (`zoo.cli.main`), which
calls `zoo.runs.train`; this script only wraps that call to add:

- `--log`: one JSON line per event (`start`, `epoch_begin`, `epoch_end`,
  `paused`, `done`), appended, so a restarted job adds to the killed one's.
- `--weights`: the final weights (`.npz`, keyed by variable path), each
  worker its own file.
- `--pause-at E:B`: sleep after batch B of epoch E (0-based) until killed
  (the fault-tolerance test).
- `--interrupt-at E:B`: interrupt training after batch B of epoch E as Ctrl-C
  does (`KeyboardInterrupt`), then run the same command again in this
  process, as the CLI's message says: it resumes from the last backup (a
  single-replica reference interrupted where a killed job was, without a
  second process).
- After training (unless `--no-export`), every worker exports the model as a SavedModel
  (`model.export`; TensorFlow wants every worker in a save): the chief into
  `RUN/export`, the others into a temporary directory
  (`zoo.distribute.worker_dir`), removed afterwards.
"""

import argparse
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--weights", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--pause-at", default=None)
    parser.add_argument("--interrupt-at", default=None)
    parser.add_argument("--no-export", action="store_true")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    pause_at, interrupt_at = (
        tuple(int(v) for v in at.split(":")) if at else None
        for at in (args.pause_at, args.interrupt_at)
    )

    # Nothing here may run a TensorFlow op before `train` creates the strategy
    # (MultiWorkerMirroredStrategy must come first).
    import keras
    import numpy as np

    from zoo import cli, distribute, runs

    def write(**event):
        with open(args.log, "a") as f:
            f.write(json.dumps(event) + "\n")

    class EventLog(keras.callbacks.Callback):
        epoch = None

        def on_train_begin(self, logs=None):
            strategy = _strategy(self.model)
            replicas = (strategy.num_replicas_in_sync if strategy is not None
                        else len(keras.distribution.list_devices()))  # JAX: the job's devices
            write(event="start", chief=distribute.is_chief(strategy), replicas=replicas)

        def on_epoch_begin(self, epoch, logs=None):
            self.epoch = epoch
            write(event="epoch_begin", epoch=epoch)

        def on_epoch_end(self, epoch, logs=None):
            write(event="epoch_end", epoch=epoch, loss=float(logs["loss"]))

        def on_train_batch_end(self, batch, logs=None):
            if pause_at == (self.epoch, batch):
                write(event="paused", epoch=self.epoch, batch=batch)
                time.sleep(600)  # Until the test kills this process.
            if interrupt_at == (self.epoch, batch) and not interrupted:
                interrupted.append((self.epoch, batch))
                write(event="interrupted", epoch=self.epoch, batch=batch)
                raise KeyboardInterrupt

    results, interrupted = [], []
    real_train = runs.train

    def probed_train(*positional, **keywords):
        keywords["callbacks"] = [*(keywords.get("callbacks") or []), EventLog()]
        results.append(real_train(*positional, **keywords))
        return results[-1]

    runs.train = probed_train
    try:
        status = cli.main(command)
        if interrupted and status == cli.EXIT_INTERRUPTED and not results:
            keras.backend.clear_session()  # as in a new process; the layer names stay the same
            status = cli.main(command)  # the same command again: it resumes
    finally:
        runs.train = real_train  # (main may run in a test's process)
    if status or not results:
        return status or 1

    result = results[0]
    model = result.model
    strategy = _strategy(model)
    np.savez(args.weights, **{w.path: w.numpy() for w in model.weights})
    export = None
    if not args.no_export:
        export = distribute.worker_dir(os.path.join(str(result.run_dir), "export"), strategy)
        model.export(export, format="tf_saved_model", verbose=False)
        distribute.cleanup_worker_dir(export, strategy)
    write(event="done", epochs=result.epochs, initial_epoch=result.initial_epoch, export=export,
          export_exists=export is not None and os.path.exists(export))
    return 0


def _strategy(model):
    """The model's `tf.distribute` strategy; None on JAX (`keras.distribution`)."""
    return getattr(model, "distribute_strategy", None)


if __name__ == "__main__":
    import keras
    import tensorflow as tf

    keras.config.disable_traceback_filtering()  # Full tracebacks in the test logs.
    tf.debugging.disable_traceback_filtering()
    sys.exit(main())
