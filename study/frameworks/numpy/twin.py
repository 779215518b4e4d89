"""The NumPy backend's hand-written twins (see study.bench.twins): a minimal GD loop, and the
copy on the host."""

from __future__ import annotations

import time

import numpy as np

from study.bench.twins import gd_step, no_loop


def hand_numpy_gd(problem, dtype: str, formulation: str, iterations: int) -> float:
    """Seconds per iteration of a minimal NumPy GD loop: the loss and gradient at every iterate
    (as the optimizer's state holds them), no stopping checks, no trace. The data is prepared as
    the NumPy backend prepares it (column-major, the run's dtype), outside the clock."""
    X = np.asfortranarray(problem.X, dtype=dtype)
    y = np.asarray(problem.y, dtype=dtype)
    kind = X.dtype.type
    inv_n, step = kind(1.0 / X.shape[0]), kind(gd_step(problem))
    w = np.zeros((X.shape[1], y.shape[1]), dtype=X.dtype)
    if formulation == "gram":
        A, b, c = X.T @ X, X.T @ y, np.sum(y * y)

        def evaluate(w):
            Aw = A @ w
            return (np.sum(w * Aw) - 2 * np.sum(w * b) + c) * inv_n, (2 * inv_n) * (Aw - b)
    else:
        def evaluate(w):
            r = X @ w - y
            return np.vdot(r, r) * inv_n, (2 * inv_n) * (X.T @ r)
    start = time.perf_counter()
    f, g = evaluate(w)
    for _ in range(iterations):
        w = w - step * g
        f, g = evaluate(w)
    float(f)
    return (time.perf_counter() - start) / iterations


def hand_loop(problem, feed: str, dtype: str, device: str, iterations: int) -> float:
    if feed:
        raise no_loop("numpy", feed)
    return hand_numpy_gd(problem, dtype, "data", iterations)


def minimal_loop(options: dict, formulation: str):
    def loop(problem, dtype, iterations):
        return hand_numpy_gd(problem, dtype, formulation, iterations)

    return "driver vs hand-written NumPy loop", loop


def copy_call(shape: tuple, device: str):
    x, out = np.ones(shape), np.empty(shape)

    def call():
        np.multiply(x, 1.0, out=out)
    return call
