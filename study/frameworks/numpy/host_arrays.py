"""NumPy's operations without their per-call cost on the scalars and small arrays of an L-BFGS
step and its line search: what the NumPy backend uses where `np.where`, `np.maximum`,
`np.logical_and`, `np.eye` or `np.triu` spend more time on their arguments than on the
arithmetic (np.where on two scalars: 2 us; choosing one in Python: 15 ns). Each gives the value
and dtype the NumPy function gives (a NumPy scalar where NumPy gives a 0-d array); anything
else goes to the NumPy function. Arrays are returned as they are, not copied, and the cached
ones are read-only: the algorithms are pure functions of their state and write to no array.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

_SCALARS = (np.float64, np.float32)
_SAME_WHEN_SAME_TYPE = (np.bool_, *_SCALARS)  # one type: one shape () and one dtype
_BOOLS = (bool, np.bool_)
_NUMBERS = (int, float)  # Python numbers: NumPy takes them at the other operand's dtype


def host_where(condition, x, y):
    """np.where(condition, x, y): a scalar condition choosing between two arrays or NumPy
    scalars of one type, shape and dtype (or a NumPy scalar and a Python number) returns the
    chosen one."""
    if type(condition) in _BOOLS:
        kind = type(x)
        if kind is type(y):
            if kind in _SAME_WHEN_SAME_TYPE or (
                    kind is np.ndarray and x.shape == y.shape and x.dtype == y.dtype):
                return x if condition else y
        elif kind in _SCALARS and type(y) in _NUMBERS:
            return x if condition else x.dtype.type(y)
    return np.where(condition, x, y)


def _scalars(a, b):
    """(a, b) as NumPy scalars of one dtype, or None where NumPy's function must decide."""
    if type(a) in _SCALARS:
        if type(b) is type(a):
            return a, b
        if type(b) in _NUMBERS:
            return a, a.dtype.type(b)
    return None


def host_maximum(a, b):
    """np.maximum: a if a >= b or a is NaN, else b (NumPy's own rule, signed zeros too)."""
    pair = _scalars(a, b)
    if pair is None:
        return np.maximum(a, b)
    a, b = pair
    return a if a >= b or a != a else b


def host_minimum(a, b):
    """np.minimum: a if a <= b or a is NaN, else b."""
    pair = _scalars(a, b)
    if pair is None:
        return np.minimum(a, b)
    a, b = pair
    return a if a <= b or a != a else b


def host_abs(x):
    return abs(x) if type(x) in _SCALARS else np.abs(x)


def host_logical_and(a, b):
    return a & b if type(a) is np.bool_ and type(b) is np.bool_ else np.logical_and(a, b)


def host_logical_or(a, b):
    return a | b if type(a) is np.bool_ and type(b) is np.bool_ else np.logical_or(a, b)


def host_logical_not(a):
    if type(a) is np.bool_:
        return np.False_ if a else np.True_
    return np.logical_not(a)


@lru_cache(maxsize=64)
def identity(n: int, dtype) -> np.ndarray:
    """np.eye(n, dtype=dtype), made once (read-only)."""
    eye = np.eye(n, dtype=dtype)
    eye.flags.writeable = False
    return eye


@lru_cache(maxsize=64)
def lower_mask(n: int) -> np.ndarray:
    """The mask np.triu(a, 1) zeroes: on and below the diagonal of an n x n matrix."""
    mask = np.tri(n, n, k=0, dtype=bool)
    mask.flags.writeable = False
    return mask
