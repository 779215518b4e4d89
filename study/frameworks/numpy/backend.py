"""NumPy backend: the algorithms' array operations on host arrays of one dtype, and the host
loop over them (the reference every other backend is checked against)."""

from __future__ import annotations

import math

import numpy as np
import scipy.linalg
import scipy.special

from optimizers.driver import host_loop
from optimizers.result import Outcome, Stopwatch
from study.frameworks.base import BaseBackend
from study.frameworks.numpy.host_arrays import (
    host_abs,
    host_logical_and,
    host_logical_not,
    host_logical_or,
    host_maximum,
    host_minimum,
    host_where,
    identity,
    lower_mask,
)


class NumpyBackend(BaseBackend):
    """The backend is its own ops (`BaseBackend.make_ops`)."""

    name = "numpy"

    def __init__(self, dtype: str = "float64", formulation: str = "data", **options):
        super().__init__(dtype, formulation, **options)
        self.tiny = self.dtype.type(np.finfo(self.dtype).tiny)  # guards divisions by zero
        self._trtrs = scipy.linalg.get_lapack_funcs("trtrs", dtype=self.dtype)

    # conversions at the edges of a run
    def asarray(self, value):
        return np.asarray(value, dtype=self.dtype)

    # the data matrix, in this backend's layout, and the products that read it
    def data_matrix(self, X):
        """X in column-major order: with d << n, both X @ w and X.T @ r then stream each column
        contiguously (measured 2-3x faster per product than row-major on 1M x 5)."""
        return np.asfortranarray(X, dtype=self.dtype)

    @staticmethod
    def data_matvec(X, w):
        return X @ w

    @staticmethod
    def data_rmatvec(X, r):
        return X.T @ r

    @staticmethod
    def data_column_squares(X):
        return np.einsum("ij,ij->j", X, X)

    @staticmethod
    def data_gram(X):
        return X.T @ X

    def scalar(self, value):
        return self.dtype.type(value)

    def to_host(self, value) -> np.ndarray:
        return np.asarray(value)

    # the operations algorithms use
    matmul = staticmethod(np.matmul)
    sqrt = staticmethod(np.sqrt)
    abs = staticmethod(host_abs)  # host_*: NumPy's function, without its cost on scalars
    where = staticmethod(host_where)
    isfinite = staticmethod(np.isfinite)
    maximum = staticmethod(host_maximum)
    zeros_like = staticmethod(np.zeros_like)
    minimum = staticmethod(host_minimum)
    logical_and = staticmethod(host_logical_and)
    logical_or = staticmethod(host_logical_or)
    logical_not = staticmethod(host_logical_not)
    sigmoid = staticmethod(scipy.special.expit)

    @staticmethod
    def softplus(x):
        """log(1 + exp(x)) without overflow for any x."""
        return np.logaddexp(0, x)

    @staticmethod
    def while_loop(condition, body, loop_vars: tuple) -> tuple:
        """Apply `body` to the tuple while `condition` holds (tf.while_loop's contract)."""
        while condition(*loop_vars):
            loop_vars = tuple(body(*loop_vars))
        return loop_vars

    @staticmethod
    def cond(predicate, true_fn, false_fn):
        """One of two computations, chosen by a scalar predicate (only the chosen one runs)."""
        return true_fn() if predicate else false_fn()

    @staticmethod
    def matmul_t(a, b):
        """a^T @ b without materialising the transpose."""
        return a.T @ b

    @staticmethod
    def reshape(x, shape):
        return x.reshape(shape)  # np.reshape's view, without its dispatch

    @staticmethod
    def transpose(x):
        return x.T

    @staticmethod
    def strict_upper(a):
        """The entries above the diagonal of a square matrix, zeros elsewhere (np.triu(a, 1)
        with its mask made once)."""
        return np.where(lower_mask(a.shape[-1]), a.dtype.type(0), a)

    @staticmethod
    def eye(n, like):
        return identity(n, like.dtype)

    def solve_triangular(self, a, b, lower: bool):
        """a^-1 b for triangular a, straight through LAPACK's trtrs (SciPy's checked wrapper
        costs 10 us a call, most of an L-BFGS step on the gram formulation). A zero on the
        diagonal gives NaN, so a broken run is recorded as diverged rather than crashing."""
        x, info = self._trtrs(a, b, lower=int(lower))
        return x if info == 0 else np.full_like(b, np.nan)

    @staticmethod
    def sum(x, axis=None):  # the array's own method: np.sum's reduction, without its dispatch
        return x.sum(axis=axis) if type(x) is np.ndarray else np.sum(x, axis=axis)

    @staticmethod
    def diag_part(a):
        return np.diagonal(a).copy()

    @staticmethod
    def vdot(a, b):
        """Inner product of two arrays of the same shape, over all elements (BLAS dot)."""
        return np.vdot(a, b)

    @staticmethod
    def zeros(shape, like):
        return np.zeros(shape, dtype=like.dtype)

    @staticmethod
    def push(history, item):
        """Drop the oldest entry of a fixed-size history (axis 0) and append `item` last."""
        return np.concatenate([history[1:], item[None]], axis=0)

    def run(self, problem, optimizer, rules, w0):
        setup_clock = Stopwatch()
        _, params, start, objective = self.prepare(problem, optimizer, w0)
        setup_seconds = setup_clock.elapsed()

        # math.sqrt on a float64 is np.sqrt's correctly rounded root without a ufunc call;
        # a float32 run keeps its own dtype's root
        root = math.sqrt if self.dtype == np.float64 else (lambda x: float(np.sqrt(x)))

        def observe(state):  # the norm only where the monitor checks in full
            return float(state.f), lambda: root(self.vdot(state.g, state.g))

        state, iterations, seconds, ending, trace = host_loop(
            problem, rules,
            init=lambda: optimizer.init(objective, self, params, start),
            step=lambda state: optimizer.update(objective, self, params, state),
            observe=observe,
        )
        return Outcome(state.w, iterations, seconds, setup_seconds, ending.status,
                       ending.message, trace, rule=ending.rule), state
