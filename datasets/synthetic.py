"""Least-squares problems with an exactly chosen condition number, for controlled comparisons.

X = U diag(s) V^T with orthonormal U (n x d) and V (d x d) from a seeded QR, and singular values
chosen so the Hessian 2/n X^T X has eigenvalues spread geometrically over [1/kappa, 1]: L = 1,
mu = 1/kappa. No intercept column is added, since one would change kappa. lam > 0 adds the ridge
term (lam/2)||w||^2 (the Hessian's eigenvalues then span [1/kappa + lam, 1 + lam]).
"""

from __future__ import annotations

import numpy as np

from convergence_study.errors import InputError
from datasets.declaration import Dataset
from datasets.memory import require_memory
from datasets.problem import Problem
from datasets.values import integer, number


def validate_params(n: int = 10_000, d: int = 5, kappa: float = 10.0, noise: float = 0.1,
                    seed: int = 0, lam: float = 0.0) -> None:
    """The rule between n and d, and the memory (the types and ranges: DATASET's parameters)."""
    if n < d:
        raise InputError(f"synthetic: n={n} is smaller than d={d} (need n >= d)")
    # at its peak: the Gaussian draw, its Q, X and the reference's copies, n x (d + 1) each
    require_memory(f"synthetic with n={n}, d={d}", 6 * 8 * n * (d + 1))


def load(n: int = 10_000, d: int = 5, kappa: float = 10.0, noise: float = 0.1,
         seed: int = 0, lam: float = 0.0) -> Problem:
    DATASET.validate({"n": n, "d": d, "kappa": kappa, "noise": noise, "seed": seed,
                      "lam": lam})
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


DATASET = Dataset(
    "synthetic", load,
    {"n": integer(1), "d": integer(1), "kappa": number(1), "noise": number(0),
     "seed": integer(0), "lam": number(0)},
    seeded=True, rows="n", check=validate_params)
