"""Trusted reference methods on the same record: SciPy's L-BFGS-B and the closed-form solve.

They drive themselves (SciPy owns its loop), so they provide `minimize(problem, rules, backend,
w0)` instead of init/update, and run on the NumPy backend only.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.optimize

from datasets.errors import InputError
from optimizers.base import require_numpy
from optimizers.driver import RuleMonitor
from optimizers.objective import make_objective, problem_data
from optimizers.result import Outcome, Stopwatch
from optimizers.stopping import Ending

CLOSED_FORM_SOLVERS = ("lstsq", "normal")


def first_line(error) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


@dataclass(frozen=True)
class ScipyLBFGS:
    """scipy.optimize.minimize(method='L-BFGS-B') with our stopping rules in its callback."""

    history: int = 10
    name: str = "scipy-lbfgs"

    def __post_init__(self):
        if isinstance(self.history, bool) or not isinstance(self.history, int) or self.history < 1:
            raise InputError(f"scipy-lbfgs: history must be an integer >= 1, got {self.history!r}")

    def hyperparameters(self) -> dict:
        return {"history": self.history}

    def minimize(self, problem, rules, backend, w0) -> Outcome:
        require_numpy(self.name, backend)
        setup_clock = Stopwatch()
        data = problem_data(backend, problem, backend.formulation)
        objective = make_objective(backend, data, backend.formulation, problem.objective)
        shape = w0.shape
        setup_seconds = setup_clock.elapsed()

        last = {}

        def fun(x):
            f, g = objective.value_and_grad(backend.asarray(x).reshape(shape))
            g = np.asarray(g, dtype=np.float64).ravel()
            last["x"], last["g"] = np.array(x), g
            return float(f), g

        monitor = RuleMonitor(problem, rules)

        def callback(intermediate_result):
            monitor.iteration += 1
            f, x = float(intermediate_result.fun), intermediate_result.x
            g = last["g"]  # SciPy's last evaluation is normally the accepted iterate
            if not np.array_equal(last["x"], x):
                with monitor.clock.paused():  # an evaluation the method itself does not need
                    g = fun(x)[1]
            if monitor.check(f, float(np.linalg.norm(g))):
                raise StopIteration

        f_start, g_start = fun(w0.ravel())
        result = None
        if not monitor.check(f_start, float(np.linalg.norm(g_start))):
            result = scipy.optimize.minimize(
                fun, w0.ravel(), jac=True, method="L-BFGS-B", callback=callback,
                options={"maxcor": self.history, "maxiter": 10**9, "maxfun": 10**9,
                         "ftol": 0.0, "gtol": 0.0})
        seconds = monitor.finish()
        ending = (monitor.ending() if monitor.fired >= 0 else
                  Ending("stalled", f"SciPy stopped by itself: {result.message}"))
        x = result.x if result is not None else w0.ravel()
        nfev = 1 + (result.nfev if result is not None else 0)
        return Outcome(x.reshape(shape), monitor.iteration, seconds, setup_seconds,
                       ending.status, ending.message, monitor.trace, rule=ending.rule,
                       nfev=nfev, ngev=nfev, nhvp=0, extra={"stopping_via": "callback"})


@dataclass(frozen=True)
class ClosedForm:
    """The exact least-squares solution, timed: the limit every iterative method is held to."""

    solver: str = "lstsq"
    name: str = "closed-form"
    solves = "plain least-squares"

    def __post_init__(self):
        if self.solver not in CLOSED_FORM_SOLVERS:
            raise InputError(f"closed-form: unknown solver '{self.solver}'; allowed: "
                             f"{', '.join(CLOSED_FORM_SOLVERS)}")

    def hyperparameters(self) -> dict:
        return {"solver": self.solver}

    def minimize(self, problem, rules, backend, w0) -> Outcome:
        require_numpy(self.name, backend)
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
        # with no target there is nothing to claim: "solved", not "converged"
        status = "solved" if tol is None else "converged" if subopt <= tol else "stalled"
        message = f"{self.solver} solve"
        message += "".join(f"; {first_line(warning.message)}" for warning in caught)
        grad_norm = float(np.linalg.norm(problem.grad(np.asarray(w, dtype=np.float64))))
        trace = {"iteration": [1], "seconds": [seconds], "loss": [f],
                 "suboptimality": [subopt], "grad_norm": [grad_norm]}
        return Outcome(w, 1, seconds, setup_seconds, status, message, trace,
                       nfev=0, ngev=0, nhvp=0, extra={"stopping_via": "none"})
