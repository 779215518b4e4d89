"""Logistic-regression problems with controlled feature conditioning and class overlap.

Features X = Z diag(sqrt(e)) V^T with Z standard normal (n x d), V a seeded orthonormal basis
and e spread geometrically over [1/kappa, 1]: the feature covariance has condition number
kappa, so the Hessian (1/n) X^T diag(s(1 - s)) X + lam I is conditioned like it (its exact
kappa at w* is the reference's `kappa`). Labels are drawn, not thresholded:
P(y = +1 | x) = sigmoid(x^T w_true / overlap), with w_true scaled so that x^T w_true has unit
standard deviation. overlap is the width of the region where the classes mix: 1 mixes them
broadly, 0.01 leaves them nearly separable (then lam alone keeps w* finite). lam defaults to
1/n. No intercept column (it would change kappa).
"""

from __future__ import annotations

import numpy as np
import scipy.special

from datasets.declaration import Dataset
from datasets.problem import Problem
from datasets.synthetic import validate_params as validate_shape
from datasets.values import integer, number, positive


def validate_params(n: int = 10_000, d: int = 5, kappa: float = 10.0, overlap: float = 0.5,
                    lam: float | None = None, seed: int = 0) -> None:
    """As the least-squares twin's: n >= d and the memory."""
    validate_shape(n, d)


def load(n: int = 10_000, d: int = 5, kappa: float = 10.0, overlap: float = 0.5,
         lam: float | None = None, seed: int = 0) -> Problem:
    DATASET.validate({"n": n, "d": d, "kappa": kappa, "overlap": overlap, "lam": lam,
                      "seed": seed})
    rng = np.random.default_rng(seed)
    V, _ = np.linalg.qr(rng.standard_normal((d, d)))
    eigenvalues = np.geomspace(1.0, 1.0 / kappa, d)
    X = (rng.standard_normal((n, d)) * np.sqrt(eigenvalues)) @ V.T
    w_true = V @ (rng.standard_normal(d) / np.sqrt(eigenvalues))  # every direction matters
    w_true /= np.sqrt(np.sum((np.sqrt(eigenvalues) * (V.T @ w_true)) ** 2))  # std(x.w) = 1
    probability = scipy.special.expit((X @ w_true) / overlap)
    y = np.where(rng.random(n) < probability, 1.0, -1.0)
    return Problem.from_arrays(
        X, y, name="synthetic-logistic",
        params={"n": n, "d": d, "kappa": float(kappa), "overlap": float(overlap), "seed": seed},
        intercept=False, objective="logistic", lam=lam,
    )


DATASET = Dataset(
    "synthetic-logistic", load,
    {"n": integer(1), "d": integer(1), "kappa": number(1), "overlap": positive(),
     "lam": number(0, optional=True), "seed": integer(0)},
    seeded=True, objective="logistic", rows="n", check=validate_params)
