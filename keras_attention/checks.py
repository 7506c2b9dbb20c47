"""Argument checks shared by the layers and the zoo: reject bad input early and
say what was received."""


def check_positive_int(name, value, allow_none=False):
    """Raise `ValueError` unless `value` is an int > 0 (or None with `allow_none`)."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"`{name}` must be a positive integer; received {name}={value!r}.")


def check_int(name, value, minimum):
    """Raise `ValueError` unless `value` is an int >= `minimum` (bools are not ints here)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}; received {name}={value!r}")


def check_rate(name, value):
    """Raise `ValueError` unless `value` is a number in [0, 1)."""
    if not (isinstance(value, (int, float)) and 0.0 <= value < 1.0):
        raise ValueError(f"`{name}` must be a float in [0, 1); received {name}={value!r}.")
