"""SciPy's LSQR and LSMR (scipy.sparse.linalg) as references on the same record.

Neither takes a callback, so the stopping rules are applied by an iteration sweep
(`stopping_via = "iteration sweep"`): the solver runs afresh from w0 with limit k, for k on the
trace schedule, and the first k where a rule fires ends the run (exact below 100 iterations,
within 2.5% above). The timed seconds are the final solve's alone: what a user who knew k would
wait. SciPy's own tests are off (atol = btol = 0, no condition limit); where it still stops by
itself the run is stalled unless a rule fires. `matvecs` counts products with X and X^T.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse.linalg

from optimizers.base import Optimizer
from optimizers.driver import RuleMonitor
from optimizers.objective import make_objective, prepare_data
from optimizers.result import Outcome, Stopwatch, on_trace_schedule
from optimizers.stopping import Ending

SOLVERS = {"scipy-lsqr": scipy.sparse.linalg.lsqr, "scipy-lsmr": scipy.sparse.linalg.lsmr}
LIMIT = {"scipy-lsqr": "iter_lim", "scipy-lsmr": "maxiter"}


class SolveClock:
    """The monitor's clock during a sweep: the seconds of the latest solve."""

    seconds = 0.0

    def elapsed(self) -> float:
        return self.seconds

    def exclude_since(self, t: float) -> None:
        pass  # nothing to take out: `seconds` is set from the solve's own clock


class CountingOperator(scipy.sparse.linalg.LinearOperator):
    """X as a linear operator that counts its products with X and X^T."""

    def __init__(self, X):
        super().__init__(X.dtype, X.shape)
        self.X, self.count = X, 0

    def _matvec(self, v):
        self.count += 1
        return self.X @ v

    def _rmatvec(self, u):
        self.count += 1
        return self.X.T @ u


@dataclass(frozen=True)
class _ScipyKrylov(Optimizer):
    name: str = ""
    solves = "plain least-squares"  # X w = y in the least-squares sense, no penalty
    only_on = "numpy"

    def _solve(self, A, y, w0, k):
        """k iterations from w0 for each label column: (w, SciPy's iterations, its istop)."""
        solve, limit = SOLVERS[self.name], LIMIT[self.name]
        columns = [solve(A, y[:, j], atol=0.0, btol=0.0, conlim=0.0, x0=w0[:, j],
                         **{limit: k}) for j in range(y.shape[1])]
        w = np.stack([c[0] for c in columns], axis=1)
        return w, max(int(c[2]) for c in columns), max(int(c[1]) for c in columns)

    def minimize(self, problem, rules, backend, w0) -> Outcome:
        self.refuse_backend(backend.name)
        setup_clock = Stopwatch()
        X, y = backend.data_matrix(problem.X), backend.asarray(problem.y)
        objective = make_objective(backend, prepare_data(backend, problem.X, problem.y))
        w0 = backend.asarray(w0)
        setup_seconds = setup_clock.elapsed()

        def observe(w):
            f, g = objective.value_and_grad(w)
            return float(f), float(np.sqrt(backend.vdot(g, g)))

        monitor = RuleMonitor(problem, rules)
        monitor.clock = clock = SolveClock()
        w, itn, istop, matvecs, k = w0, 0, 0, 0, 0
        stopped_itself = monitor.check(*observe(w0))
        while not stopped_itself:
            k += 1
            if not on_trace_schedule(k):
                continue
            A = CountingOperator(X)
            solve_clock = Stopwatch()
            w, itn, istop = self._solve(A, y, w0, k)
            clock.seconds, matvecs = solve_clock.elapsed(), A.count
            monitor.iteration = itn
            if monitor.check(*observe(w)) or itn < k:
                break
        seconds = monitor.finish()
        ending = (monitor.ending() if monitor.fired >= 0 else
                  Ending("stalled", f"SciPy stopped by itself after {itn} iterations "
                                    f"(istop {istop})"))
        return Outcome(w, monitor.iteration, seconds, setup_seconds, ending.status,
                       ending.message, monitor.trace, rule=ending.rule, nfev=0, ngev=0, nhvp=0,
                       extra={"stopping_via": "iteration sweep", "matvecs": matvecs,
                              "scipy_istop": istop})


@dataclass(frozen=True)
class ScipyLSQR(_ScipyKrylov):
    """scipy.sparse.linalg.lsqr (Paige and Saunders): CG on the normal equations via
    Golub-Kahan bidiagonalisation; ||r|| decreases monotonically."""

    name: str = "scipy-lsqr"


@dataclass(frozen=True)
class ScipyLSMR(_ScipyKrylov):
    """scipy.sparse.linalg.lsmr (Fong and Saunders): MINRES on the normal equations; both ||r||
    and ||X^T r|| decrease monotonically."""

    name: str = "scipy-lsmr"
