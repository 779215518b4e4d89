"""A user's own data set from a file: `--dataset path/to/load.py:load`, or `name =
"path/to/load.py:load"` in a study's [[datasets]].

The function returns `X, y`, or `frame, features, labels` (a DataFrame and column names),
checked as a CSV is (datasets/tabular.py). Its parameters are its own keyword parameters (a
default's type is the parameter's type) beside the tabular data set's standardize, intercept,
objective and lam. It is seeded when it takes a `seed`, and a `path` parameter is an input file
(hashed into the rows' fingerprints)."""

from __future__ import annotations

import inspect
from functools import lru_cache

import numpy as np
import pandas as pd

from convergence_study.errors import InputError, first_line
from datasets.declaration import Dataset
from datasets.problem import OBJECTIVES, Problem
from datasets.tabular import from_frame
from datasets.user_file import content_hash, load, split
from datasets.values import anything, boolean, choice, integer, names, number, path

# what every file data set takes, as the tabular data set does (unless the function takes it)
OWN = {"standardize": boolean(), "intercept": boolean(), "objective": choice(*OBJECTIVES),
       "lam": number(0, optional=True)}
OWN_DEFAULTS = {"standardize": False, "intercept": True, "objective": "least-squares",
                "lam": None}


def short_name(name: str) -> str:
    """`load.py:load`: the file's name and the function's, as rows and figures show it."""
    file, attribute = split(name)
    return f"{file.name}:{attribute}"


def declaration(name: str) -> Dataset:
    """The data set `path.py:Function` names, declared from the function's signature."""
    file, _ = split(name)
    return _declaration(name, content_hash(file) if file.is_file() else "")


@lru_cache(maxsize=32)
def _declaration(name: str, _content: str) -> Dataset:
    function = load(name, "data set loader")
    where = f"{split(name)[0]}: {split(name)[1]}"
    if not callable(function) or isinstance(function, type):
        raise InputError(f"{where} is not a function returning X, y (or a DataFrame and its "
                         f"feature and label column names)")
    named = [p for p in inspect.signature(function).parameters.values()
             if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    parameters = {p.name: typed(p.default) for p in named}

    def make(**params) -> Problem:
        return problem_from(name, function, parameters, params)

    return Dataset(short_name(name), make, {**OWN, **parameters}, seeded="seed" in parameters,
                   objective=None, files=tuple(p for p in ("path",) if p in parameters),
                   required=tuple(p.name for p in named if p.default is p.empty))


# a parameter's type from its default's, in this order (a bool is an int); text is any text (a
# file name, a choice the function checks itself)
TYPES = ((bool, boolean), (int, integer), (float, number), (str, path), (list | tuple, names))


def typed(default):
    """A parameter's type, from its default: what the function would be called with."""
    return next((kind() for cls, kind in TYPES if isinstance(default, cls)), anything())


def problem_from(name: str, function, parameters: dict, params: dict) -> Problem:
    """Call the function with its own parameters, then check what it returned."""
    file, attribute = split(name)
    where = f"{file}: {attribute}"
    own = {k: params.get(k, OWN_DEFAULTS[k]) for k in OWN if k not in parameters}
    theirs = {k: v for k, v in params.items() if k in parameters}
    try:
        returned = function(**theirs)
    except InputError as exc:
        raise InputError(f"{where}: {exc}") from None
    except Exception as exc:
        raise InputError(f"{where}(...) raised {type(exc).__name__}: {first_line(exc)}") from None
    row_params = {**dict(params)}
    try:
        if isinstance(returned, tuple) and len(returned) == 3 and isinstance(returned[0],
                                                                             pd.DataFrame):
            frame, features, labels = returned
            return from_frame(frame, features, labels, source=f"{attribute}'s frame",
                              params=row_params, name=short_name(name), **own)
        if isinstance(returned, tuple) and len(returned) == 2:
            X, y = (np.asarray(a) for a in returned)
            check_arrays(X, y)
            return Problem.from_arrays(X.astype(float), y.astype(float), name=short_name(name),
                                       params=row_params, **own)
    except InputError as exc:
        raise InputError(f"{where} returned data that fails a check: {exc}") from None
    raise InputError(f"{where} must return X, y (arrays) or a DataFrame with the feature and "
                     f"label column names, got {describe(returned)}")


def check_arrays(X, y) -> None:
    """Numbers in a matrix (or one column), labels beside them; no label also a feature."""
    for what, array in (("X", X), ("y", y)):
        if not np.issubdtype(array.dtype, np.number) or np.issubdtype(array.dtype, np.bool_):
            raise InputError(f"{what} is not numeric (dtype {array.dtype})")
        if array.ndim not in (1, 2) or array.size == 0:
            raise InputError(f"{what} must be a non-empty vector or matrix, got shape "
                             f"{array.shape}")
    X2, y2 = X.reshape(len(X), -1), y.reshape(len(y), -1)
    if len(X2) != len(y2):
        raise InputError(f"X has {len(X2)} rows but y has {len(y2)}")
    for j in range(y2.shape[1]):
        same = [i for i in range(X2.shape[1]) if np.array_equal(X2[:, i], y2[:, j])]
        if same:
            raise InputError(f"label column {j} is also feature column {same[0]} (its own "
                             "answer)")


def describe(value) -> str:
    if isinstance(value, tuple):
        return f"a tuple of {len(value)} ({', '.join(type(v).__name__ for v in value)})"
    return f"a {type(value).__name__}"
