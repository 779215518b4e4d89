"""The least-squares problem every optimizer solves, with its certified reference solution.

loss(w) = (1/n) * ||X w - y||_F^2, gradient 2/n * X^T (X w - y), Hessian 2/n * X^T X.
The reference optimum w*, f* (datasets.reference) is always computed on the host from the
float64 data, whatever dtype a run uses, so every backend is judged against the same target.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from datasets.errors import InputError
from datasets.reference import Reference, solve


@dataclass(frozen=True, eq=False)
class Spectrum:
    """Extreme eigenvalues of the Hessian 2/n X^T X: smoothness L, strong convexity mu, kappa."""

    L: float
    mu: float

    @property
    def kappa(self) -> float:
        return self.L / self.mu if self.mu > 0 else float("inf")


@dataclass(frozen=True, eq=False)
class Problem:
    """Features X (n x d, float64) and labels y (n x k, float64) plus what the study reports."""

    X: np.ndarray
    y: np.ndarray
    name: str
    params: dict = field(default_factory=dict)
    feature_names: tuple[str, ...] = ()
    label_names: tuple[str, ...] = ()

    @classmethod
    def from_arrays(
        cls,
        features,
        labels,
        *,
        name: str,
        params: dict | None = None,
        feature_names=None,
        label_names=None,
        intercept: bool = True,
        standardize: bool = False,
    ) -> Problem:
        """Validate, optionally z-score the features, prepend an intercept column of ones."""
        X = _as_matrix(features, "feature")
        y = _as_matrix(labels, "label")
        feature_names = tuple(feature_names or (f"x{j}" for j in range(X.shape[1])))
        label_names = tuple(label_names or (f"y{j}" for j in range(y.shape[1])))
        if X.shape[0] != y.shape[0]:
            raise InputError(f"features have {X.shape[0]} rows but labels have {y.shape[0]}")
        _check_finite(X, feature_names)
        _check_finite(y, label_names)
        n = X.shape[0]
        if n == 0:
            raise InputError("the data has zero rows")
        d = X.shape[1] + int(intercept)
        if n < d:
            raise InputError(f"the data has {n} rows but {d} coefficients to fit "
                             f"(need rows >= {d})")
        _check_columns(X, feature_names, intercept, standardize)
        if standardize:
            X = (X - X.mean(axis=0)) / X.std(axis=0)
        if intercept:
            X = np.hstack([np.ones((n, 1)), X])
            feature_names = ("intercept", *feature_names)
        params = dict(params or {})
        params.setdefault("standardize", standardize)
        params.setdefault("intercept", intercept)
        return cls(np.ascontiguousarray(X), np.ascontiguousarray(y), name, params,
                   feature_names, label_names)

    @property
    def n(self) -> int:
        return self.X.shape[0]

    @property
    def d(self) -> int:
        return self.X.shape[1]

    @property
    def k(self) -> int:
        return self.y.shape[1]

    def loss(self, w: np.ndarray) -> float:
        r = self.X @ w - self.y
        return float(np.sum(r * r) / self.n)

    def grad(self, w: np.ndarray) -> np.ndarray:
        return (2.0 / self.n) * (self.X.T @ (self.X @ w - self.y))

    @cached_property
    def reference(self) -> Reference:
        """w*, f* with their accuracy and kappa: solved once, before any clock starts."""
        return solve(self.X, self.y)

    def with_reference(self, ref: Reference) -> Problem:
        """The same problem with a reference solved earlier (a sweep's data cache)."""
        problem = replace(self)
        problem.__dict__["reference"] = ref
        return problem

    @property
    def w_star(self) -> np.ndarray:
        return self.reference.w

    @property
    def f_star(self) -> float:
        return self.reference.f

    @cached_property
    def spectrum(self) -> Spectrum:
        """L from an eigen-solve of X^T X (its largest eigenvalue is accurate); mu from the
        reference's kappa (singular values of the scaled QR), which X^T X cannot resolve."""
        L = float(np.linalg.eigvalsh(gram_matrix(self.X))[-1])
        return Spectrum(L=L, mu=L / self.reference.kappa_raw)

    def check_dtype_range(self, dtype) -> None:
        """Reject data whose squares overflow `dtype` (the loss sums squared residuals)."""
        limit = np.sqrt(np.finfo(dtype).max / max(self.n, 1)) / 4
        for values, names in ((self.X, self.feature_names), (self.y, self.label_names)):
            peak = np.abs(values).max(axis=0)
            if (peak > limit).any():
                j = int(np.argmax(peak > limit))
                raise InputError(f"column '{names[j]}' has values up to {peak[j]:.3g}: their "
                                 f"squares overflow {np.dtype(dtype).name} (keep |values| below "
                                 f"{limit:.3g}, or rescale"
                                 f"{'' if np.dtype(dtype) == np.float64 else ', or use float64'})")

    def suboptimality(self, f: float) -> float:
        """(f - f*) / max(f*, floor), floor = eps * f(0): relative to f*, except that an exact
        fit (f* ~ 0, rounding noise) is judged against the smallest loss float64 resolves."""
        return (f - self.f_star) / self.reference.scale


def gram_matrix(X: np.ndarray) -> np.ndarray:
    """The Hessian 2/n X^T X of the mean squared error (one pass over X)."""
    return (2.0 / X.shape[0]) * (X.T @ X)


def _as_matrix(values, what: str) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim == 1:
        array = array[:, None]
    if array.ndim != 2:
        raise InputError(f"{what}s must be a 1-D or 2-D array, got {array.ndim} dimensions")
    if array.dtype == bool or not np.issubdtype(array.dtype, np.number):
        raise InputError(f"{what}s must be numeric, got dtype {array.dtype}")
    return array.astype(np.float64, copy=False)


def _check_finite(array: np.ndarray, names) -> None:
    bad = ~np.isfinite(array)
    if bad.any():
        j = int(np.argmax(bad.any(axis=0)))
        i = int(np.argmax(bad[:, j]))
        raise InputError(f"column '{names[j]}' has {int(bad[:, j].sum())} non-finite values "
                         f"(first at row {i}: {array[i, j]})")


def _check_columns(X: np.ndarray, names, intercept: bool, standardize: bool) -> None:
    """Reject constant and collinear columns: they make w* non-unique and kappa infinite."""
    if intercept or standardize:
        constant = np.ptp(X, axis=0) == 0
        if constant.any():
            j = int(np.argmax(constant))
            raise InputError(f"column '{names[j]}' is constant ({X[0, j]}): it is collinear "
                             "with the intercept and cannot be standardized; drop it")
    for j in range(X.shape[1]):
        for i in range(j):
            if np.array_equal(X[:, i], X[:, j]):
                raise InputError(f"columns '{names[i]}' and '{names[j]}' are identical; drop one")
    Z = np.hstack([np.ones((X.shape[0], 1)), X]) if intercept else X
    peak = np.abs(Z).max(axis=0)  # scaled first: the norm of values near 1e201 overflows
    Z = Z / np.where(peak > 0, peak, 1.0)
    scale = np.linalg.norm(Z, axis=0)
    s = np.linalg.svd(Z / np.where(scale > 0, scale, 1.0), compute_uv=False)
    if s[-1] <= s[0] * 1e-12:
        raise InputError(f"the feature columns {list(names)} are collinear (numerical rank "
                         f"{int(np.sum(s > s[0] * 1e-12))} of {Z.shape[1]}); drop a redundant one")
