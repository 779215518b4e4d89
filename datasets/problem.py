"""The problem every optimizer solves, with its certified reference solution.

Least squares (the default): loss(w) = (1/n) ||X w - y||_F^2 + (lam/2) ||w||^2 (lam 0 unless
ridge is asked for); logistic regression (datasets.logistic): labels in {-1, +1}, lam 1/n unless
given. The objective and lam live in `params`, so they are recorded with every run and survive
a sweep's data cache. The reference w*, f* is computed on the host from the float64 data,
whatever dtype a run uses, so every backend is judged against the same target.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from convergence_study.errors import InputError
from datasets import logistic
from datasets.reference import Reference, conditioning, loss_extended, solve

OBJECTIVES = ("least-squares", "logistic")


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
        objective: str = "least-squares",
        lam: float | None = None,
    ) -> Problem:
        """Validate, optionally z-score the features, prepend an intercept column of ones;
        logistic labels must be binary ({-1, +1} or {0, 1}, mapped to {-1, +1})."""
        X = _as_matrix(features, "feature")
        y = _as_matrix(labels, "label")
        feature_names = tuple(feature_names or (f"x{j}" for j in range(X.shape[1])))
        label_names = tuple(label_names or (f"y{j}" for j in range(y.shape[1])))
        if objective not in OBJECTIVES:
            raise InputError(f"unknown objective '{objective}'; allowed: {', '.join(OBJECTIVES)}")
        if lam is not None and (isinstance(lam, bool) or not isinstance(lam, (int, float))
                                or not np.isfinite(lam) or lam < 0):
            raise InputError(f"lam must be a finite number >= 0, got {lam!r}")
        if X.shape[0] != y.shape[0]:
            raise InputError(f"features have {X.shape[0]} rows but labels have {y.shape[0]}")
        _check_finite(X, feature_names)
        _check_finite(y, label_names)
        if objective == "logistic":
            y = logistic.binary_labels(y, label_names[0])
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
        if objective == "logistic":
            params.update(objective=objective, lam=float(1.0 / n if lam is None else lam))
        elif lam:  # ridge; plain least squares records nothing new
            params["lam"] = float(lam)
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

    @property
    def objective(self) -> str:
        return self.params.get("objective", "least-squares")

    @property
    def lam(self) -> float:
        """The L2 penalty (lam/2)||w||^2: 0 for plain least squares."""
        return float(self.params.get("lam", 0.0))

    def loss(self, w: np.ndarray) -> float:
        if self.objective == "logistic":
            return logistic.loss(self.X, self.y, w, self.lam)
        r = self.X @ w - self.y
        return float(np.sum(r * r) / self.n + 0.5 * self.lam * np.vdot(w, w))

    def grad(self, w: np.ndarray) -> np.ndarray:
        if self.objective == "logistic":
            return logistic.grad(self.X, self.y, w, self.lam)
        return (2.0 / self.n) * (self.X.T @ (self.X @ w - self.y)) + self.lam * w

    def hessian_product(self, w: np.ndarray, v: np.ndarray) -> np.ndarray:
        if self.objective == "logistic":
            return logistic.hessian_product(self.X, self.y, w, v, self.lam)
        return (2.0 / self.n) * (self.X.T @ (self.X @ v)) + self.lam * v

    def loss_extended(self, w: np.ndarray) -> float:
        """The loss in extended precision (to compare with f* without float64's rounding)."""
        if self.objective == "logistic":
            return logistic.loss_extended(self.X, self.y, w, self.lam)
        w_ext = np.asarray(w, dtype=np.longdouble)
        return loss_extended(self.X, self.y, w) + float(self.lam / 2 * np.sum(w_ext * w_ext))

    def curvature_bounds(self) -> tuple[float, float]:
        """(mu, L): bounds of the Hessian's eigenvalues valid at every w (one pass over X)."""
        if self.objective == "logistic":
            return logistic.curvature_bounds(self.X, self.lam)
        eigenvalues = np.linalg.eigvalsh((2.0 / self.n) * (self.X.T @ self.X))
        return float(eigenvalues[0]) + self.lam, float(eigenvalues[-1]) + self.lam

    @cached_property
    def reference(self) -> Reference:
        """w*, f* with their accuracy and kappa: solved once, before any clock starts."""
        if self.objective == "logistic":
            ref = logistic.solve(self.X, self.y, self.lam)
        else:
            ref = solve(self.X, self.y, ridge=self.lam)
        return replace(ref, **self.conditioning(ref))

    def conditioning(self, ref: Reference) -> dict:
        """What the iteration bounds read (datasets.reference.conditioning). Logistic
        regression: mu is the Hessian's at w*, L the global bound the 1/L step uses."""
        if self.objective == "logistic":
            H = logistic.hessian(self.X, self.y, ref.w, self.lam)
            mu = float(np.linalg.eigvalsh(H)[0]) if np.all(np.isfinite(H)) else float("nan")
            return {"mu": mu, "L": self.curvature_bounds()[1]}
        return conditioning(self.X, self.lam, ref.kappa_raw)

    def with_reference(self, ref: Reference, column_peaks=None) -> Problem:
        """The same problem with a reference and column peaks found earlier (a data cache)."""
        problem = replace(self)
        problem.__dict__["reference"] = ref
        if column_peaks is not None:
            problem.__dict__["column_peaks"] = tuple(np.asarray(p, dtype=np.float64)
                                                     for p in column_peaks)
        return problem

    @property
    def w_star(self) -> np.ndarray:
        return self.reference.w

    @property
    def f_star(self) -> float:
        return self.reference.f

    @cached_property
    def spectrum(self) -> Spectrum:
        """The global bounds; for least squares mu from the reference's kappa (the scaled QR's
        singular values), which X^T X cannot resolve (the logistic reference's is at w*)."""
        mu, L = self.curvature_bounds()
        if self.objective == "least-squares":
            mu = L / self.reference.kappa_raw
        return Spectrum(L=L, mu=mu)

    @cached_property
    def column_peaks(self) -> tuple[np.ndarray, np.ndarray]:
        """The largest |value| of each column of X and of y (cached: at 1M x 5 the pass over X
        costs 50 ms of every run)."""
        return np.abs(self.X).max(axis=0), np.abs(self.y).max(axis=0)

    def check_dtype_range(self, dtype, start=None) -> None:
        """Reject data whose arithmetic overflows `dtype`, before any run: the squares of a
        column, and what the first iterations form from the start point (the squared gradient
        norm every stopping check reads, the curvature g^T H g of line searches and CG): data
        near 1e150 pass the first test, but their gradient norm squared is near 1e600."""
        dtype = np.dtype(dtype)
        start = np.zeros((self.d, self.k)) if start is None else np.asarray(start, np.float64)
        start_peak = float(np.max(np.abs(start), initial=0.0))
        limit = np.sqrt(np.finfo(dtype).max / max(self.n, 1)) / 4
        for peak, names in zip(self.column_peaks, (self.feature_names, self.label_names),
                               strict=True):
            if (peak > limit).any():
                j = int(np.argmax(peak > limit))
                raise InputError(f"column '{names[j]}' has values up to {peak[j]:.3g}: their "
                                 f"squares overflow {dtype.name} (keep |values| below "
                                 f"{limit:.3g}, or rescale"
                                 f"{'' if dtype == np.float64 else ', or use float64'})")
        log_max = math.log10(np.finfo(dtype).max)
        if max(self.iteration_magnitudes(start_peak).values()) <= log_max:
            return  # the cheap bound from the column peaks settles it (the usual case)
        # The bound can be loose by decades (heavy tails): judge the values at the start point,
        # with two decades of room for the first iterations' growth.
        what, log_size = max(self.start_magnitudes(start).items(), key=lambda kv: kv[1])
        if log_size > log_max - 2:
            x_peaks, y_peaks = self.column_peaks
            j = int(np.argmax(x_peaks))
            raise InputError(
                f"column '{self.feature_names[j]}' has values up to {x_peaks[j]:.3g} (labels up "
                f"to {y_peaks.max():.3g}): the {what} at the start point is about "
                f"1e{log_size:.0f}, at or past {dtype.name}'s largest 1e{log_max:.0f}, so every "
                "method would overflow in its first iterations; rescale the columns "
                f"(standardize = true) or the labels"
                f"{'' if dtype == np.float64 else ', or use float64'}")

    def start_magnitudes(self, w0) -> dict[str, float]:
        """log10 of the squared gradient norm and of the curvature along the gradient at w0,
        with X and y scaled by powers of two so that nothing overflows here."""
        w0 = np.asarray(w0, dtype=np.float64).reshape(self.d, -1)
        sx = _power_of_two(np.max(self.column_peaks[0]))
        X = self.X / sx
        if self.objective == "logistic":
            with np.errstate(over="ignore"):  # a margin may overflow to inf: the sigmoid takes it
                margin = self.y * (X @ w0) * sx
                weight = 1.0 / (1.0 + np.exp(margin))  # sigmoid(-margin)
            g = -(X.T @ (self.y * weight)) / self.n  # the gradient over sx
            q = X @ g
            s = 1.0 / (1.0 + np.exp(-np.clip(margin, -700, 700)))
            curvature = np.sum(s * (1 - s) * q * q) / self.n
            log_g, log_c = math.log10(sx), 4 * math.log10(sx)
        else:
            sy = _power_of_two(np.max(self.column_peaks[1]))
            r = X @ (w0 * (sx / sy)) - self.y / sy  # the residual over sy
            g = (2.0 / self.n) * (X.T @ r)  # the gradient over sx sy
            q = X @ g
            curvature = 2.0 / self.n * float(np.vdot(q, q))
            log_g = math.log10(sx) + math.log10(sy)
            log_c = 4 * math.log10(sx) + 2 * math.log10(sy)
        tiny = np.finfo(np.float64).tiny
        grad_sq = 2 * log_g + math.log10(max(float(np.vdot(g, g)), tiny))
        return {"squared gradient norm": grad_sq,
                "curvature along the gradient": log_c + math.log10(max(float(curvature), tiny))}

    def iteration_magnitudes(self, start_peak: float = 0.0) -> dict[str, float]:
        """log10 of upper bounds, from the column peaks, of what `start_magnitudes` computes, at
        a start whose largest |entry| is `start_peak`. Least squares: |r| <= R = max|y| + d
        max|x| start_peak, ||g||^2 <= d (2 max|x| R)^2, L <= 2 d max|x|^2 + lam; logistic:
        ||g||^2 <= d max|x|^2 and L <= d max|x|^2 / 4 + lam."""
        x_peak = max(float(np.max(self.column_peaks[0])), np.finfo(np.float64).tiny)
        log_d, log_x = math.log10(self.d), math.log10(x_peak)
        if self.objective == "logistic":
            log_grad = log_d + 2 * log_x
            log_hessian = log_d - math.log10(4) + 2 * log_x
        else:
            y_peak = float(np.max(self.column_peaks[1]))
            residual = _log10_sum(math.log10(max(y_peak, np.finfo(np.float64).tiny)),
                                  log_d + log_x + math.log10(start_peak) if start_peak > 0
                                  else -math.inf)
            log_grad = log_d + 2 * (math.log10(2) + log_x + residual)
            log_hessian = math.log10(2) + log_d + 2 * log_x
        log_hessian = _log10_sum(log_hessian, math.log10(self.lam) if self.lam else -math.inf)
        return {"squared gradient norm": log_grad,
                "curvature along the gradient": log_hessian + log_grad}

    def suboptimality(self, f: float) -> float:
        """(f - f*) / max(f*, floor), floor = eps * f(0): an exact fit (f* ~ 0) is judged against
        the smallest loss float64 resolves."""
        return (f - self.f_star) / self.reference.scale


def _power_of_two(peak: float) -> float:
    """The power of two at or above a positive peak (1 for zero): an exact scaling."""
    return 2.0 ** math.ceil(math.log2(peak)) if peak > 0 else 1.0


def _log10_sum(a: float, b: float) -> float:
    """log10(10^a + 10^b) without forming either power (they may overflow float64)."""
    high, low = max(a, b), min(a, b)
    return high if low == -math.inf else high + math.log10(1 + 10 ** (low - high))


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
