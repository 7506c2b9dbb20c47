"""Argument checks shared by the export modules (`zoo.export`)."""

from zoo.errors import ZooError


def check_int(name, value, minimum, maximum=None):
    """Raise `ZooError` (a ValueError) unless `value` is an int (not a bool) in [minimum, maximum]."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < minimum
        or (maximum is not None and value > maximum)
    ):
        bound = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        raise ZooError(f"export: `{name}` must be an int {bound}; received {name}={value!r}.")
