"""Trusted reference methods on the same record: SciPy's L-BFGS-B and the closed-form solve.

They drive themselves (SciPy owns its loop), so they provide `minimize(problem, rules, backend,
w0)` instead of init/update, and run on the NumPy backend only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.optimize

from datasets.errors import InputError
from optimizers.driver import _append, host_ops
from optimizers.objective import make_objective, prepare_data
from optimizers.result import TRACE_COLUMNS, Outcome, Stopwatch, on_trace_schedule
from optimizers.stopping import Context, Ending

CLOSED_FORM_SOLVERS = ("lstsq", "normal")


def _require_numpy(name: str, backend) -> None:
    if backend.name != "numpy":
        raise InputError(f"{name} runs on the numpy backend only, not '{backend.name}'")


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
        _require_numpy(self.name, backend)
        setup_clock = Stopwatch()
        data = prepare_data(backend, problem.X, problem.y, backend.formulation)
        objective = make_objective(backend, data, backend.formulation)
        shape = w0.shape
        setup_seconds = setup_clock.elapsed()

        last = {}

        def fun(x):
            f, g = objective.value_and_grad(backend.asarray(x).reshape(shape))
            g = np.asarray(g, dtype=np.float64).ravel()
            last["x"], last["g"] = np.array(x), g
            return float(f), g

        ops, trace = host_ops(), {c: [] for c in TRACE_COLUMNS}
        memory = {"states": rules.init_state(ops), "f0": None, "f_prev": float("nan"),
                  "iteration": 0, "fired": -1}
        clock = Stopwatch()

        def check(f, g):
            """Evaluate the rules at an iterate; True when one fires."""
            memory["f0"] = f if memory["f0"] is None else memory["f0"]
            grad_norm = float(np.linalg.norm(g))
            ctx = Context(memory["iteration"], clock.elapsed(), f, memory["f0"],
                          memory["f_prev"], problem.suboptimality(f), grad_norm)
            fired, memory["states"] = rules.check(ops, ctx, memory["states"])
            with clock.paused():
                if on_trace_schedule(ctx.iteration):
                    _append(trace, ctx.iteration, ctx.elapsed, f, ctx.suboptimality, grad_norm)
            memory["fired"], memory["f_prev"] = rules.first(fired), f
            return memory["fired"] >= 0

        def callback(intermediate_result):
            memory["iteration"] += 1
            f, x = float(intermediate_result.fun), intermediate_result.x
            g = last["g"]  # SciPy's last evaluation is normally the accepted iterate
            if not np.array_equal(last["x"], x):
                with clock.paused():  # an evaluation the method itself does not need
                    g = fun(x)[1]
            if check(f, g):
                raise StopIteration

        f_start, g_start = fun(w0.ravel())
        result = None
        if not check(f_start, g_start):
            result = scipy.optimize.minimize(
                fun, w0.ravel(), jac=True, method="L-BFGS-B", callback=callback,
                options={"maxcor": self.history, "maxiter": 10**9, "maxfun": 10**9,
                         "ftol": 0.0, "gtol": 0.0})
        seconds = clock.elapsed()
        iteration = memory["iteration"]
        ending = (rules.ending(memory["fired"], iteration) if memory["fired"] >= 0 else
                  Ending("stalled", f"SciPy stopped by itself: {result.message}"))
        x = result.x if result is not None else w0.ravel()
        if not trace["iteration"] or trace["iteration"][-1] != iteration:
            f_end, g_end = fun(x)
            _append(trace, iteration, seconds, f_end, problem.suboptimality(f_end),
                    float(np.linalg.norm(g_end)))
        nfev = 1 + (result.nfev if result is not None else 0)
        return Outcome(x.reshape(shape), iteration, seconds, setup_seconds, ending.status,
                       ending.message, trace, rule=ending.rule, nfev=nfev, ngev=nfev, nhvp=0)


@dataclass(frozen=True)
class ClosedForm:
    """The exact least-squares solution, timed: the limit every iterative method is held to."""

    solver: str = "lstsq"
    name: str = "closed-form"

    def __post_init__(self):
        if self.solver not in CLOSED_FORM_SOLVERS:
            raise InputError(f"closed-form: unknown solver '{self.solver}'; allowed: "
                             f"{', '.join(CLOSED_FORM_SOLVERS)}")

    def hyperparameters(self) -> dict:
        return {"solver": self.solver}

    def minimize(self, problem, rules, backend, w0) -> Outcome:
        _require_numpy(self.name, backend)
        setup_clock = Stopwatch()
        X, y = backend.data_matrix(problem.X), backend.asarray(problem.y)
        setup_seconds = setup_clock.elapsed()
        clock = Stopwatch()
        if self.solver == "lstsq":
            w = np.linalg.lstsq(X, y, rcond=None)[0]
        else:  # normal equations: one pass for X^T X and X^T y, then a d x d Cholesky solve
            w = scipy.linalg.solve(X.T @ X, X.T @ y, assume_a="pos")
        seconds = clock.elapsed()
        f = problem.loss(np.asarray(w, dtype=np.float64))
        subopt = problem.suboptimality(f)
        tol = rules.spec.get("tol")
        converged = tol is None or subopt <= tol
        status = "converged" if converged else "stalled"
        message = f"{self.solver} solve" + ("" if converged else
                                            f": suboptimality {subopt:.3g} above tol {tol}")
        grad_norm = float(np.linalg.norm(problem.grad(np.asarray(w, dtype=np.float64))))
        trace = {"iteration": [1], "seconds": [seconds], "loss": [f],
                 "suboptimality": [subopt], "grad_norm": [grad_norm]}
        return Outcome(w, 1, seconds, setup_seconds, status, message, trace,
                       nfev=0, ngev=0, nhvp=0)
