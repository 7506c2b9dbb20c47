"""Callbacks that stop `fit` as a kill would, shared by the run tests
(test_runs.py, test_budget.py, test_marian.py)."""

import keras


class Interrupt(keras.callbacks.Callback):
    """Raises at the start of `epoch`, as a kill would stop the process there."""

    def __init__(self, epoch):
        super().__init__()
        self.epoch = epoch

    def on_epoch_begin(self, epoch, logs=None):
        if epoch == self.epoch:
            raise KeyboardInterrupt
