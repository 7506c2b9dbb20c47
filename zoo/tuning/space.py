"""Search spaces: `Choice`, `Int` and `Float` hyperparameters and a `SearchSpace` of them.

A `SearchSpace` maps hyperparameter names to specs, knows which config fields
each one sets (`fields=`, `derive=`), keeps divisibility constraints
(`divides=`, e.g. heads dividing `d_model`), and declares itself on a
`keras_tuner.HyperParameters`. The default spaces are in `zoo.tuning.spaces`.
"""

import dataclasses
from typing import Any, Callable

from zoo.errors import ZooError

# Search-space names that are `fit` arguments, not config fields.
FIT_ARGUMENTS = ("batch_size",)


def _check_fields(fields):
    if fields is not None and (
        not isinstance(fields, tuple) or not all(isinstance(f, str) for f in fields)
    ):
        raise ZooError(f"`fields` must be a tuple of config field names; received {fields!r}.")


@dataclasses.dataclass(frozen=True)
class Choice:
    """One value among `values` (or among `values(config)` when it is a function).

    Args:
        values: the choices (int, float, str or bool, all of one type), or a
            function of the entry's config values (a dict) returning them,
            evaluated when the hypermodel is made.
        fields: the config fields the value sets; `None` means the field of
            the same name, `()` a `fit` argument.
        derive: `(value, config) -> {field: value}` for values that are not
            copied as they are (`config` holds the fields known so far).
    """

    values: Any
    fields: tuple | None = None
    derive: Callable | None = None

    def __post_init__(self):
        _check_fields(self.fields)
        if not callable(self.values):
            if isinstance(self.values, (str, bytes)) or not hasattr(self.values, "__iter__"):
                raise ZooError(f"Choice `values` must be a list; received {self.values!r}.")
            values = tuple(self.values)
            if not values:
                raise ZooError("Choice `values` must not be empty.")
            types = {type(v) for v in values}
            if types == {int, float}:  # keras-tuner wants one type: [0, 0.1] -> [0.0, 0.1]
                values = tuple(float(v) for v in values)
            elif len(types) > 1 or not types <= {int, float, str, bool}:
                raise ZooError(
                    "Choice values must be int, float, str or bool, all of one type; "
                    f"received {list(values)!r}."
                )
            object.__setattr__(self, "values", values)

    def candidates(self, config):
        return tuple(self.values(config)) if callable(self.values) else self.values

    def declare(self, hp, name, config):
        return hp.Choice(name, list(self.candidates(config)))


@dataclasses.dataclass(frozen=True)
class _Range:
    """A number in `[min_value, max_value]` (both included), of `number_types`, `sampling`
    `"linear"`, `"log"` or `"reverse_log"`; see `Choice` for `fields` and `derive`."""

    min_value: float
    max_value: float
    step: float | None = None
    sampling: str = "linear"
    fields: tuple | None = None
    derive: Callable | None = None
    number_types = (int, float)  # not a field: the bounds' types

    def __post_init__(self):
        _check_fields(self.fields)
        _check_range(self, self.number_types)

    def candidates(self, config):
        return (self.min_value, self.max_value)


@dataclasses.dataclass(frozen=True)
class Int(_Range):
    """An integer in `[min_value, max_value]` (both included); see `Choice` for the rest."""

    number_types = int

    def declare(self, hp, name, config):
        return hp.Int(name, self.min_value, self.max_value, step=self.step, sampling=self.sampling)


@dataclasses.dataclass(frozen=True)
class Float(_Range):
    """A float in `[min_value, max_value]`, `sampling` `"linear"` or `"log"`; see `Choice`."""

    def declare(self, hp, name, config):
        return hp.Float(
            name, self.min_value, self.max_value, step=self.step, sampling=self.sampling
        )


def _check_range(spec, types):
    kind = type(spec).__name__
    for bound in ("min_value", "max_value"):
        value = getattr(spec, bound)
        if isinstance(value, bool) or not isinstance(value, types):
            raise ZooError(f"{kind} `{bound}` must be a number; received {value!r}.")
    if spec.min_value > spec.max_value:
        raise ZooError(
            f"{kind} range is empty: min_value={spec.min_value!r} > max_value={spec.max_value!r}."
        )
    if spec.sampling not in ("linear", "log", "reverse_log"):
        raise ZooError(
            f"{kind} `sampling` must be 'linear', 'log' or 'reverse_log'; received {spec.sampling!r}."
        )
    if spec.sampling != "linear" and spec.min_value <= 0:
        raise ZooError(
            f"{kind} with sampling={spec.sampling!r} needs min_value > 0; "
            f"received min_value={spec.min_value!r}."
        )


_SPECS = (Choice, Int, Float)


def _fields_of(name, param):
    return (name,) if param.fields is None else param.fields


def _as_param(name, spec, old):
    """A user's override of hyperparameter `name` as a spec, keeping `old`'s field mapping."""
    if isinstance(spec, _SPECS):
        param = spec
    elif isinstance(spec, (list, tuple)):
        if not spec:
            raise ZooError(f"The values of hyperparameter `{name}` must not be empty.")
        try:
            param = Choice(tuple(spec))
        except ZooError as error:
            raise ZooError(f"Hyperparameter `{name}`: {error}") from None
    elif isinstance(spec, dict):
        unknown = sorted(set(spec) - {"min_value", "max_value", "step", "sampling"})
        if unknown or "min_value" not in spec or "max_value" not in spec:
            raise ZooError(
                f"A range for hyperparameter `{name}` takes min_value, max_value and "
                f"optionally step and sampling; received {spec!r}."
            )
        integer = all(
            isinstance(spec.get(k), int) and not isinstance(spec.get(k), bool)
            for k in ("min_value", "max_value")
        ) and isinstance(spec.get("step", 1), int)
        try:
            param = (Int if integer else Float)(**spec)
        except ZooError as error:
            raise ZooError(f"Hyperparameter `{name}`: {error}") from None
    else:
        raise ZooError(
            f"Hyperparameter `{name}`: expected a list of values, a dict "
            "{'min_value': ..., 'max_value': ...} or a zoo.tuning.Choice/Int/Float; received "
            f"{spec!r}. To hold a config field constant, pass it as a fixed value instead."
        )
    if param.fields is None and param.derive is None:
        param = dataclasses.replace(param, fields=old.fields, derive=old.derive)
    return param


class SearchSpace:
    """A declarative search space: named hyperparameters and how they set config fields.

    Calling it as `space(hp, fixed)` (the protocol of `zoo.register`'s
    `search_space`) declares its hyperparameters on `hp` and returns the config
    overrides they give; `fixed` config fields are neither searched nor
    overridden.

    Args:
        params: dict from hyperparameter name to `Choice`, `Int` or `Float`, in
            declaration order (a `derive` may read fields set by earlier ones).
        divides: pairs `(a, b)` of names (hyperparameters or config fields)
            such that every value of `a` must divide the value of `b`;
            resolved over the whole space by `resolve` (see the module doc).
        description: one line shown by `str(space)`.
    """

    def __init__(self, params, divides=(), description="", *, explicit=(), base=None):
        for name, param in params.items():
            if not isinstance(param, _SPECS):
                raise ZooError(
                    f"Search-space entry `{name}` must be a zoo.tuning.Choice, Int or Float; "
                    f"received {param!r}."
                )
        self.params = dict(params)
        self.divides = tuple(divides)
        self.description = description
        self.explicit = frozenset(explicit)  # names whose values the user gave
        self.base = dict(base) if base is not None else None  # set by `resolve`

    @property
    def names(self):
        return tuple(self.params)

    def replace(self, **overrides):
        """A copy with the values of the named hyperparameters replaced (see the module doc)."""
        unknown = sorted(set(overrides) - set(self.params))
        if unknown:
            raise ZooError(
                f"Unknown hyperparameter(s) {', '.join(unknown)} in the search space. "
                f"Valid names: {', '.join(self.params)}."
            )
        params = dict(self.params)
        for name, spec in overrides.items():
            params[name] = _as_param(name, spec, params[name])
        return SearchSpace(
            params, self.divides, self.description,
            explicit=self.explicit | set(overrides), base=self.base,
        )

    def resolve(self, base, fixed):
        """Bind to an entry's config values: drop fixed hyperparameters, apply the constraints.

        Args:
            base: the entry's config as a dict, with the fixed values applied.
            fixed: the fixed names (config fields and fit arguments).

        Returns:
            A new `SearchSpace` whose choices are concrete tuples.

        Raises:
            ValueError: naming the hyperparameter when no value is left, or
                when values the user gave explicitly break a constraint.
        """
        fixed = set(fixed)
        config = dict(base)
        params = {}
        for name, param in self.params.items():
            fields = _fields_of(name, param)
            if (fields and all(f in fixed for f in fields)) or (not fields and name in fixed):
                continue
            if isinstance(param, Choice):
                values = param.candidates(config)
                if not values:
                    raise ZooError(
                        f"Hyperparameter `{name}` has no value to choose from for this config."
                    )
                param = dataclasses.replace(param, values=tuple(values))
            params[name] = param
        for divisor, multiple in self.divides:
            self._apply_divides(params, config, divisor, multiple)
        return SearchSpace(
            params, self.divides, self.description, explicit=self.explicit, base=config
        )

    def _apply_divides(self, params, config, divisor, multiple):
        def values(name):
            if name in params:
                if not isinstance(params[name], Choice):
                    raise ZooError(
                        f"Hyperparameter `{name}` must be a choice (a list of values): it is "
                        f"constrained by `{divisor}` dividing `{multiple}`."
                    )
                return params[name].values, True
            if name in config:
                return (config[name],), False
            raise ZooError(f"The constraint `{divisor}` divides `{multiple}` names `{name}`, "
                           "which is neither a hyperparameter nor a config field.")

        divisors, divisor_searched = values(divisor)
        multiples, multiple_searched = values(multiple)
        if divisor_searched or multiple_searched:
            # Filter the searched side (the divisor when both are searched).
            name, side, others = (
                (divisor, divisors, multiples) if divisor_searched else (multiple, multiples, divisors)
            )

            def fits(v):
                return all(m % v == 0 for m in others) if divisor_searched else all(
                    v % d == 0 for d in others)

            keep = tuple(v for v in side if fits(v))
            rejected = [v for v in side if v not in keep]
            other = multiple if name == divisor else divisor
            relation = "divide every" if name == divisor else "be a multiple of every"
            if rejected and name in self.explicit:
                raise ZooError(
                    f"`{name}` values {rejected} do not {relation} `{other}` value "
                    f"{list(others)} (`{divisor}` must divide `{multiple}`)."
                )
            if not keep:
                raise ZooError(
                    f"No `{name}` value among {list(side)} can {relation} `{other}` value "
                    f"{list(others)} (`{divisor}` must divide `{multiple}`): change `{other}` "
                    f"or give `{name}` values in `space`."
                )
            params[name] = dataclasses.replace(params[name], values=keep)
        elif multiples[0] % divisors[0]:
            raise ZooError(
                f"`{divisor}` must divide `{multiple}`; received {divisor}={divisors[0]!r}, "
                f"{multiple}={multiples[0]!r}."
            )

    def __call__(self, hp, fixed=None):
        """Declare the hyperparameters on `hp`; return the config overrides they give."""
        fixed = dict(fixed or {})
        config = {**(self.base or {}), **fixed}
        overrides = {}
        for name, param in self.params.items():
            fields = _fields_of(name, param)
            if (fields and all(f in fixed for f in fields)) or (not fields and name in fixed):
                continue
            value = param.declare(hp, name, config)
            if not fields:
                continue  # a fit argument, read by the hypermodel's fit
            derived = param.derive(value, config) if param.derive else {f: value for f in fields}
            for field, field_value in derived.items():
                if field not in fixed:
                    config[field] = overrides[field] = field_value
        return overrides

    def __str__(self):
        lines = [self.description] if self.description else []
        for name, param in self.params.items():
            if isinstance(param, Choice):
                values = "computed from the config" if callable(param.values) else list(param.values)
            else:
                values = f"{param.min_value} .. {param.max_value} ({param.sampling})"
            fields = _fields_of(name, param)
            target = "fit argument" if not fields else ", ".join(fields)
            lines.append(f"  {name:<16} {values}  -> {target}")
        for divisor, multiple in self.divides:
            lines.append(f"  constraint: {divisor} divides {multiple}")
        return "\n".join(lines)

    def __repr__(self):
        return f"SearchSpace({', '.join(self.params)})"
