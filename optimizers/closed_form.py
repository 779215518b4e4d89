"""The closed-form least-squares solve, timed: the limit every iterative method is held to
(NumPy's lstsq or the normal equations' Cholesky solve; the NumPy backend only)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import scipy.linalg

from convergence_study.errors import InputError, first_line
from optimizers.base import Optimizer
from optimizers.result import Outcome, Stopwatch

CLOSED_FORM_SOLVERS = ("lstsq", "normal")


@dataclass(frozen=True)
class ClosedForm(Optimizer):
    """The exact least-squares solution, timed: the limit every iterative method is held to."""

    solver: str = "lstsq"
    name: str = "closed-form"
    solves = "plain least-squares"
    only_on = "numpy"

    def __post_init__(self):
        if self.solver not in CLOSED_FORM_SOLVERS:
            raise InputError(f"closed-form: unknown solver '{self.solver}'; allowed: "
                             f"{', '.join(CLOSED_FORM_SOLVERS)}")

    def minimize(self, problem, rules, backend, w0) -> Outcome:
        self.refuse_backend(backend.name)
        setup_clock = Stopwatch()
        X, y = backend.data_matrix(problem.X), backend.asarray(problem.y)
        setup_seconds = setup_clock.elapsed()
        clock = Stopwatch()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", scipy.linalg.LinAlgWarning)
            try:
                if self.solver == "lstsq":
                    w = np.linalg.lstsq(X, y, rcond=None)[0]
                else:  # normal equations: one pass for X^T X and X^T y, a d x d Cholesky solve
                    w = scipy.linalg.solve(X.T @ X, X.T @ y, assume_a="pos")
            except np.linalg.LinAlgError as exc:  # e.g. X^T X not positive definite in float64
                seconds = clock.elapsed()
                return Outcome(w0, 0, seconds, setup_seconds, "failed",
                               f"{self.solver} solve failed: {first_line(exc)} (kappa "
                               f"{problem.reference.kappa_raw:.3g}: X^T X is singular in "
                               "float64; use solver=lstsq or standardize)",
                               nfev=0, ngev=0, nhvp=0)
        seconds = clock.elapsed()
        f = problem.loss(np.asarray(w, dtype=np.float64))
        subopt = problem.suboptimality(f)
        tol = rules.spec.get("tol")
        # a direct solve claims the target only where it reached it; otherwise it is "solved"
        # (nothing stalled: its rounding left it where it is), the message says it missed
        status = "converged" if tol is not None and subopt <= tol else "solved"
        message = f"{self.solver} solve"
        if tol is not None and status == "solved":
            message += (f"; suboptimality {subopt:.3g} misses the target {tol:g} (its rounding "
                        f"at kappa {problem.reference.kappa_raw:.3g})")
        message += "".join(f"; {first_line(warning.message)}" for warning in caught)
        grad_norm = float(np.linalg.norm(problem.grad(np.asarray(w, dtype=np.float64))))
        trace = {"iteration": [1], "seconds": [seconds], "loss": [f],
                 "suboptimality": [subopt], "grad_norm": [grad_norm]}
        return Outcome(w, 1, seconds, setup_seconds, status, message, trace,
                       nfev=0, ngev=0, nhvp=0, extra={"stopping_via": "none"})
