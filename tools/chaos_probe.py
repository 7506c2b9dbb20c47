"""`python tools/chaos_probe.py ARGS` is `python -m zoo ARGS` that also counts its training steps.

With `$ZOO_CHAOS_STEP_LOG` set, each training step that ends appends one byte
to that file (`os.write` on an `O_APPEND` descriptor, before the next step
starts), so the file's size is the number of steps this process finished,
exact even when the process is SIGKILLed. `tools/chaos_train.py` runs `zoo
train` this way to measure the work each kill loses: the steps a process
finished minus the steps its run directory kept (the backup's counter). Nothing
else differs from `python -m zoo`: the same parser, the same run directory.
"""

import os
import sys

import keras

from zoo.cli.main import main as zoo_main
from zoo.runs import callbacks

STEP_LOG = "ZOO_CHAOS_STEP_LOG"


class StepLog(keras.callbacks.Callback):
    """Appends one byte to the file descriptor `descriptor` at the end of every training step."""

    def __init__(self, descriptor):
        super().__init__()
        self.descriptor = descriptor

    def on_train_batch_end(self, batch, logs=None):
        os.write(self.descriptor, b".")


def count_steps(path):
    """Add a `StepLog` writing to `path` to every run's callbacks (`RunCallbacks.in_order`)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    in_order = callbacks.RunCallbacks.in_order
    callbacks.RunCallbacks.in_order = lambda self: in_order(self) + [StepLog(descriptor)]


def main(argv):
    if os.environ.get(STEP_LOG):
        count_steps(os.environ[STEP_LOG])
    return zoo_main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
