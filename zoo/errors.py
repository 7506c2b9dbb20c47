"""`ZooError`: a mistake in what the user asked for, as opposed to a bug of the zoo.

The zoo raises it (or a subclass: `zoo.registry.UnknownModelError`,
`zoo.files.CorruptFileError`, `zoo.transformer.marian.FolderError`, ...) for
an unknown model or dataset, a bad flag or `--set` field, a file that is
missing, corrupt or of another kind. The command line prints it as one line
and exits with code 2; any other exception is a bug, which it reports as one
(exit code 1, the traceback with `ZOO_DEBUG=1`).

It subclasses `keras_attention.checks.ArgumentError` (what the shared argument
checks raise, for the layers' arguments and the zoo's config fields alike), and
so `ValueError`: code that catches `ValueError` still catches it.
"""

from keras_attention.checks import ArgumentError


class ZooError(ArgumentError):
    """A mistake in what the user asked for: the message says what and how to fix it."""
