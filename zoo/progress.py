"""Progress bars for the long loops of data preparation (`zoo.datasets`, `zoo.text`)."""

import keras


def progress_bar(total, unit_name, progress):
    """A `keras.utils.Progbar` over `total` items (None: unknown) when `progress`, else None."""
    if not progress:
        return None
    return keras.utils.Progbar(total, unit_name=unit_name)


def say(message, quiet=False):
    """Print `message` (flushed) unless `quiet`."""
    if not quiet:
        print(message, flush=True)
