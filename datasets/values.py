"""Typed values checked at the edge, the one layer every check of a config value, data set
parameter or hyperparameter goes through: `<where>: <name> must be <what it may be>, got <the
value>` (an InputError: exit 2). Not pydantic or attrs: they coerce ("1e4" becomes 1e4, 1
becomes True) where a study must refuse, and their messages run to several lines.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from convergence_study.errors import InputError

INT64 = 2**63 - 1
# how a message says what a value of these kinds may be
WORDS = {"boolean": "true or false", "names": "a list of column names", "path": "a file name",
         "any": "any value"}


@dataclass(frozen=True)
class Value:
    kind: str  # integer, number, boolean, choice, names, path, any
    low: float | None = None
    high: float | None = None
    low_open: bool = False  # low excluded
    high_open: bool = False  # high excluded
    choices: tuple = ()
    optional: bool = False  # None allowed (the owner's default applies)
    extra: dict = field(default_factory=dict, compare=False)

    def describe(self) -> str:
        """What the value may be, as the message says it."""
        if self.kind in WORDS:
            return WORDS[self.kind]
        if self.kind == "choice":
            return f"one of: {', '.join(map(str, self.choices))}"
        noun = "an integer" if self.kind == "integer" else "a finite number"
        if self.low is not None and self.high is not None:
            return (f"{'an integer ' if self.kind == 'integer' else ''}in "
                    f"{'(' if self.low_open else '['}{self.low:g}, {self.high:g}"
                    f"{')' if self.high_open else ']'}")
        bounds = []
        if self.low is not None:
            bounds.append(f"{'>' if self.low_open else '>='} {self.low:g}")
        if self.high is not None:
            bounds.append(f"{'<' if self.high_open else '<='} {self.high:g}")
        return f"{noun} {' and '.join(bounds)}".strip()

    def check(self, where: str, value):
        if value is None and self.optional:
            return None
        if not self.accepts(value):
            raise InputError(f"{where} must be {self.describe()}, got {value!r}")
        if self.kind == "integer":
            return int(value)
        if self.kind == "number":
            return float(value)
        return value

    def accepts(self, value) -> bool:
        if self.kind == "any":  # a user's loader's parameter without a typed default
            return True
        if self.kind == "boolean":
            return isinstance(value, (bool, np.bool_))
        if self.kind == "choice":
            return not isinstance(value, bool) and value in self.choices
        if self.kind == "path":
            return isinstance(value, (str, os.PathLike))
        if self.kind == "names":  # one name may stand alone
            return isinstance(value, str) or (isinstance(value, list) and bool(value)
                                              and all(isinstance(v, str) for v in value))
        if isinstance(value, (bool, np.bool_)):
            return False
        if self.kind == "integer":
            if not isinstance(value, (int, np.integer)) or abs(int(value)) > INT64:
                return False
        elif not isinstance(value, (int, float, np.integer, np.floating)) \
                or not math.isfinite(float(value)):
            return False
        value = float(value)
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            return False
        return not (self.high is not None
                    and (value > self.high or (self.high_open and value == self.high)))


# the kinds by name: integer(low, high), number(low, high), positive(), boolean(), names(),
# path(), anything(), each also taking optional=True
integer = partial(Value, "integer")
number = partial(Value, "number")
positive = partial(Value, "number", 0.0, low_open=True)
boolean = partial(Value, "boolean")
names = partial(Value, "names")
path = partial(Value, "path")
anything = partial(Value, "any")


def fraction(closed_low: bool = True, **kw) -> Value:
    """[0, 1) (a beta, a decay of an average), or (0, 1)."""
    return Value("number", 0.0, 1.0, low_open=not closed_low, high_open=True, **kw)


def choice(*choices, **kw) -> Value:
    return Value("choice", choices=tuple(choices), **kw)


def check_values(where: str, values: dict, declared: dict[str, Value]) -> dict:
    """Every value against its declaration: an unknown name lists the allowed ones; returns the
    values as checked."""
    for key in values:
        if key not in declared:
            raise InputError(f"{where} has no parameter '{key}'; allowed: "
                             f"{', '.join(declared)}")
    return {key: declared[key].check(f"{where}: {key}", value) for key, value in values.items()}
