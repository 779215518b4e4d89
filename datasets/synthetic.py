"""Problems with an exactly chosen condition number, for controlled comparisons: least squares
(`synthetic`) and logistic regression (`synthetic-logistic`). No intercept column is added,
since one would change kappa.

Least squares: X = U diag(s) V^T with orthonormal U (n x d) and V (d x d) from a seeded QR, and
singular values chosen so the Hessian 2/n X^T X has eigenvalues spread geometrically over
[1/kappa, 1]: L = 1, mu = 1/kappa. lam > 0 adds the ridge term (lam/2)||w||^2.

Logistic regression: X = Z diag(sqrt(e)) V^T with Z standard normal and e spread geometrically
over [1/kappa, 1], so the Hessian is conditioned like kappa (its exact kappa at w* is the
reference's). Labels are drawn, not thresholded: P(y = +1 | x) = sigmoid(x^T w_true / overlap),
x^T w_true of unit standard deviation. overlap 1 mixes the classes broadly, 0.01 leaves them
nearly separable (then lam alone keeps w* finite). lam defaults to 1/n.
"""

from __future__ import annotations

import numpy as np
import scipy.special

from convergence_study.errors import InputError
from datasets.declaration import Dataset
from datasets.memory import require_memory
from datasets.problem import Problem
from datasets.values import integer, number, positive


def validate_params(n: int = 10_000, d: int = 5, **_) -> None:
    """The rule between n and d, and the memory (the types and ranges: DATASET's parameters)."""
    if n < d:
        raise InputError(f"synthetic: n={n} is smaller than d={d} (need n >= d)")
    # at its peak: the Gaussian draw, its Q, X and the reference's copies, n x (d + 1) each
    require_memory(f"synthetic with n={n}, d={d}", 6 * 8 * n * (d + 1))


def load(n: int = 10_000, d: int = 5, kappa: float = 10.0, noise: float = 0.1,
         seed: int = 0, lam: float = 0.0) -> Problem:
    rng = np.random.default_rng(seed)
    U, _ = np.linalg.qr(rng.standard_normal((n, d)))
    V, _ = np.linalg.qr(rng.standard_normal((d, d)))
    eigenvalues = np.geomspace(1.0, 1.0 / kappa, d)
    singular = np.sqrt(eigenvalues * n / 2.0)
    X = (U * singular) @ V.T
    w_true = rng.standard_normal((d, 1))
    y = X @ w_true + noise * rng.standard_normal((n, 1))
    return Problem.from_arrays(
        X, y, name="synthetic",
        params={"n": n, "d": d, "kappa": float(kappa), "noise": float(noise), "seed": seed},
        intercept=False, lam=lam,
    )


def load_logistic(n: int = 10_000, d: int = 5, kappa: float = 10.0, overlap: float = 0.5,
                  lam: float | None = None, seed: int = 0) -> Problem:
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
    "synthetic", load,
    {"n": integer(1), "d": integer(1), "kappa": number(1), "noise": number(0),
     "seed": integer(0), "lam": number(0)},
    seeded=True, rows="n", check=validate_params)
LOGISTIC = Dataset(
    "synthetic-logistic", load_logistic,
    {"n": integer(1), "d": integer(1), "kappa": number(1), "overlap": positive(),
     "lam": number(0, optional=True), "seed": integer(0)},
    seeded=True, objective="logistic", rows="n", check=validate_params)
