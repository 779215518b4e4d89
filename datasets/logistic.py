"""L2-regularized logistic regression on the host, and its certified reference optimum.

loss(w) = (1/n) sum_i log(1 + exp(-y_i x_i^T w)) + (lam/2) ||w||^2, labels y_i in {-1, +1};
log(1 + exp(-m)) as np.logaddexp, which never overflows, however large the margin m.

There is no closed form: the reference is Newton's method in float64 with an Armijo step, until
the Newton decrement lambda^2 = g^T H^-1 g stops shrinking at machine level. Since f(w) - f* <=
lambda^2 near the optimum, the accuracy is lambda^2 (from the gradient in extended precision)
plus a bound on the rounding of f. A problem Newton cannot certify (a Hessian singular in
float64, e.g. separable classes with lam = 0, or too many steps) gets accuracy inf: refused.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
import scipy.special

from convergence_study.errors import InputError
from datasets.reference import EPS, EPS_EXT, EXT, FLOOR, Reference, transpose_times

MAX_NEWTON = 500
ARMIJO = 1e-4


def binary_labels(y: np.ndarray, name: str) -> np.ndarray:
    """Labels {-1, +1} or {0, 1} as {-1, +1}; anything else is refused naming the values."""
    if y.shape[1] != 1:
        raise InputError(f"logistic regression takes one label column, got {y.shape[1]}")
    values = np.unique(y)
    if set(values.tolist()) <= {-1.0, 1.0} or set(values.tolist()) <= {0.0, 1.0}:
        if values.size < 2:
            raise InputError(f"label column '{name}' has only the value {values[0]:g}: "
                             "logistic regression needs both classes")
        return np.where(y > 0, 1.0, -1.0)
    shown = ", ".join(f"{v:g}" for v in values[:6]) + (", ..." if values.size > 6 else "")
    raise InputError(f"label column '{name}' must be binary ({{-1, +1}} or {{0, 1}}); found "
                     f"{values.size} values: {shown}")


def loss(X, y, w, lam: float) -> float:
    margin = y * (X @ w)
    return float(np.mean(np.logaddexp(0.0, -margin)) + 0.5 * lam * np.vdot(w, w))


def grad(X, y, w, lam: float) -> np.ndarray:
    margin = y * (X @ w)
    return -(X.T @ (y * scipy.special.expit(-margin))) / X.shape[0] + lam * w


def hessian_product(X, y, w, v, lam: float) -> np.ndarray:
    s = scipy.special.expit(y * (X @ w))
    return (X.T @ (s * (1 - s) * (X @ v))) / X.shape[0] + lam * v


def hessian(X, y, w, lam: float) -> np.ndarray:
    s = scipy.special.expit(y * (X @ w))
    return (X.T @ (X * (s * (1 - s)))) / X.shape[0] + lam * np.eye(X.shape[1])


def _margins_extended(X, y, w) -> np.ndarray:
    return y.astype(EXT) * (X.astype(EXT) @ np.asarray(w, dtype=EXT))


def loss_extended(X, y, w, lam: float) -> float:
    """The loss in extended precision: compares iterates without float64's rounding."""
    margin = _margins_extended(X, y, w)
    w = np.asarray(w, dtype=EXT)
    return float(np.mean(np.logaddexp(EXT(0), -margin)) + EXT(lam) / 2 * np.sum(w * w))


def curvature_bounds(X, lam: float) -> tuple[float, float]:
    """(mu, L) valid at every w: s (1 - s) <= 1/4, so H <= (1/4n) X^T X + lam I, and H >= lam I."""
    top = float(np.linalg.eigvalsh(X.T @ X)[-1]) / (4 * X.shape[0])
    return lam, top + lam


def _newton_step(H, g):
    """-H^-1 g from a Cholesky factor of the equilibrated Hessian; None if that fails."""
    scale = np.sqrt(np.diag(H))
    if not np.all(scale > 0):
        return None
    try:
        factor = scipy.linalg.cho_factor(H / np.outer(scale, scale))
    except np.linalg.LinAlgError:
        return None
    return -scipy.linalg.cho_solve(factor, g / scale[:, None]) / scale[:, None]


def _kappas(H) -> tuple[float, float]:
    """Condition numbers of H as given and with the columns of X equilibrated (powers of two)."""
    raw = np.linalg.eigvalsh(H)
    diagonal = np.diag(H)
    if not np.all(diagonal > 0):
        return float("inf"), float("inf")
    scale = np.exp2(np.round(np.log2(np.sqrt(diagonal))))
    scaled = np.linalg.eigvalsh(H / np.outer(scale, scale))
    return (float(scaled[-1] / scaled[0]) if scaled[0] > 0 else float("inf"),
            float(raw[-1] / raw[0]) if raw[0] > 0 else float("inf"))


def solve(X: np.ndarray, y: np.ndarray, lam: float) -> Reference:
    """The certified optimum of float64 X (n x d), y (n x 1) in {-1, +1}, lam >= 0."""
    n, d = X.shape
    floor = FLOOR * float(np.log(2.0))  # f(0) = log 2 for every data set
    w = np.zeros((d, 1))
    f = loss(X, y, w, lam)
    previous, steps, certified = float("inf"), 0, False
    while steps < MAX_NEWTON:
        g = grad(X, y, w, lam)
        H = hessian(X, y, w, lam)
        step = _newton_step(H, g)
        if step is None or not np.all(np.isfinite(step)):
            break
        decrement = float(-np.vdot(g, step))  # lambda^2
        if decrement <= EPS**2 * max(f, floor) or (
                decrement <= EPS * max(f, floor) and decrement > previous / 4):
            certified = True  # at machine level, or no longer shrinking (rounding dominates)
            break
        previous = decrement
        alpha, accepted = 1.0, False
        while alpha > 1e-20:
            trial = w + alpha * step
            f_trial = loss(X, y, trial, lam)
            # near the optimum float64 cannot resolve the decrease: the full step is quadratic
            if f_trial <= f - ARMIJO * alpha * decrement or (
                    alpha == 1.0 and decrement <= 1e3 * EPS * max(f, floor)):
                accepted = True
                break
            alpha /= 2
        steps += 1
        if not accepted:
            break
        w, f = trial, f_trial

    margin = _margins_extended(X, y, w)
    f_star = float(np.mean(np.logaddexp(EXT(0), -margin))
                   + EXT(lam) / 2 * np.sum(np.asarray(w, EXT) ** 2))
    sig = scipy.special.expit(-np.asarray(margin, np.float64))
    g_ext = -transpose_times(X, y.astype(EXT) * sig.astype(EXT)) / n + EXT(lam) * w.astype(EXT)
    g64 = np.asarray(g_ext, np.float64)
    H = hessian(X, y, w, lam)
    step = _newton_step(H, g64)
    kappa, kappa_raw = _kappas(H)
    g0_norm = float(np.linalg.norm(X.T @ y)) / (2 * n)  # ||grad f(0)||
    optimality = float(np.linalg.norm(g64)) / g0_norm if g0_norm > 0 else 0.0
    if not certified or step is None:
        return Reference(w, f_star, float("inf"), float("inf"), optimality, floor, kappa,
                         kappa_raw, d, steps, method="newton")
    decrement = float(-np.vdot(g64, step))
    # f(w) - f* <= lambda^2 near the optimum; the margins carry (d + 2) eps_ext |x||w| each,
    # which moves each term by at most sigmoid(-m) times that; the sum by eps_ext f
    spread = (d + 2) * EPS_EXT * (np.abs(X) @ np.abs(w))
    evaluation = float(np.mean(sig * spread)) + 4 * EPS_EXT * f_star
    accuracy = (max(decrement, 0.0) + evaluation) / max(f_star, floor)
    w_norm = float(np.linalg.norm(w))
    w_accuracy = float(np.linalg.norm(step)) / w_norm if w_norm > 0 else 0.0
    return Reference(w, f_star, float(accuracy), w_accuracy, optimality, floor, kappa,
                     kappa_raw, d, steps, method="newton")
