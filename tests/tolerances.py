"""Tolerances derived from what a test compares (dtype, conditioning, iteration count, number of
operations), never from one machine's output: another BLAS kernel, thread count or CPU sums in
another order, so a test may rely on rounding's size, never on its value. The bounds on
iterates stay far below what a real bug moves (a constant rounded through float32 moves them by
1e-7 or more: tests/test_keras_optimizer.py); a trace's loss or gradient norm, which rounding
reaches through their condition, gets that condition on top.
"""

import numpy as np

EPS = float(np.finfo(np.float64).eps)  # 2.2e-16
EPS32 = float(np.finfo(np.float32).eps)  # 1.2e-7


def twin(iterations: int, kappa: float, eps: float = EPS) -> float:
    """Relative distance between the iterates of two implementations of one method (NumPy and
    TensorFlow, or two BLAS kernels) after `iterations` steps on a problem whose Hessian has
    condition kappa: each step rounds by a few eps, which later steps may amplify by up to
    kappa, so 5 k eps kappa."""
    return 5 * iterations * eps * kappa


def loss_condition(problem) -> float:
    """How many times the relative error of w a least-squares loss can show: f moves by
    |g||dw| <= 2|X||dw||r| / n and rounds by a few eps (|X||w| + |y|)|r| / n, against
    f = |r|^2 / n; so 2(|X||w*| + |y|) / |Xw* - y| (the residual's cancellation)."""
    w = problem.w_star
    residual = np.linalg.norm(problem.X @ w - problem.y)
    return 2 * float(np.linalg.norm(np.abs(problem.X) @ np.abs(w) + np.abs(problem.y))
                     / residual)


def gradient_condition(problem, w) -> float:
    """The same for a least-squares gradient g = 2/n X^T (Xw - y) at w: it rounds by a few eps
    2/n |X|^T (|X||w| + |y|) and moves by |H dw| <= L |w| (|dw| / |w|), against |g|, which
    shrinks towards w*: take w the last iterate of a run."""
    g = 2 / problem.n * problem.X.T @ (problem.X @ w - problem.y)
    rounding = 2 / problem.n * np.abs(problem.X).T @ (np.abs(problem.X) @ np.abs(w)
                                                       + np.abs(problem.y))
    size = max(float(np.linalg.norm(rounding)), problem.spectrum.L * float(np.linalg.norm(w)))
    return size / float(np.linalg.norm(g))


def lstsq_forward_error(problem, w) -> float:
    """What a backward-stable least-squares solve (LAPACK's lstsq) may be off by, relative and
    norm-wise: eps (cond + cond^2 tan theta), cond = cond(X) = sqrt(kappa_raw) and tan theta
    = |Xw - y| / (|X| |w|) (Golub and Van Loan, 5.3.8); x10 for the constants."""
    cond = np.sqrt(problem.reference.kappa_raw)
    tan_theta = np.linalg.norm(problem.X @ w - problem.y) / (np.linalg.norm(problem.X, 2)
                                                           * np.linalg.norm(w))
    return 10 * EPS * (cond + cond**2 * tan_theta)


def distance_to_w_star(problem, tol: float) -> float:
    """How far from w* a least-squares iterate at suboptimality tol can be: f - f* >=
    (mu/2)||w - w*||^2, so sqrt(2 tol scale / mu); x1.001 for the float64 rounding of the
    measured suboptimality (a few eps f / (tol f) ~ 1e-7 relative at tol 1e-8)."""
    return 1.001 * np.sqrt(2 * tol * problem.reference.scale / problem.spectrum.mu)


def relative(a, b) -> float:
    """max |a - b| / max |b|: the relative distance of two iterates."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def assert_twins(result, reference, problem, iterations):
    """Two backends' runs of one least-squares method: iterates within twin(k, kappa), every
    iteration's loss and gradient norm within that times their condition (the gradient's is the
    largest at the last iterate: up to 8e3, for Nesterov)."""
    bound = twin(iterations, problem.reference.kappa_raw)
    assert relative(result.w, reference.w) <= bound
    np.testing.assert_allclose(result.trace["loss"], reference.trace["loss"],
                               rtol=bound * loss_condition(problem))
    np.testing.assert_allclose(result.trace["grad_norm"], reference.trace["grad_norm"],
                               rtol=bound * gradient_condition(problem, reference.w))
