"""SciPy's L-BFGS-B on the same record: a trusted library reference that drives itself (SciPy
owns its loop), with our stopping rules checked in its callback; the NumPy backend only."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from optimizers.base import Optimizer, count
from optimizers.driver import RuleMonitor
from optimizers.objective import make_objective, problem_data
from optimizers.result import Outcome, Stopwatch
from optimizers.stopping import Ending


@dataclass(frozen=True)
class ScipyLBFGS(Optimizer):
    """scipy.optimize.minimize(method='L-BFGS-B') with our stopping rules in its callback."""

    history: int = 10
    name: str = "scipy-lbfgs"
    only_on = "numpy"

    def __post_init__(self):
        count("history", self.history, optimizer="scipy-lbfgs")

    def minimize(self, problem, rules, backend, w0) -> Outcome:
        # heavy (0.18 s), so imported by this method's runs only, before any clock (a sweep's
        # warm process has it: study.sweep.forkserver.NUMPY_STACK)
        import scipy.optimize

        self.refuse_backend(backend.name)
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
