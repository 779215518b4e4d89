"""scipy-lsqr and scipy-lsmr: the run's rules applied by an iteration sweep, on the same record."""

import numpy as np
import pytest
import scipy.sparse.linalg

from datasets import InputError, make_problem
from optimizers import build_rules, make_optimizer, run
from study.frameworks.registry import make_backend

pytestmark = pytest.mark.numerical


@pytest.mark.parametrize("name", ["scipy-lsqr", "scipy-lsmr"])
def test_reaches_the_target_and_says_how_it_stopped(well_conditioned, numpy64, name):
    result = run(well_conditioned, make_optimizer(name), build_rules(tol=1e-8, max_iter=1000),
                 backend=numpy64)
    assert result.status == "converged" and result.suboptimality <= 1e-8
    record = result.record()
    assert record["stopping_via"] == "iteration sweep"
    assert record["matvecs"] == 2 * result.iterations + 2
    assert record["scipy_istop"] == 7  # SciPy's iteration limit: the sweep ended it
    assert list(result.trace["iteration"]) == list(range(result.iterations + 1))


def test_the_sweep_stops_at_the_first_iteration_that_meets_the_rule(numpy64):
    problem = make_problem("synthetic", n=2000, d=30, kappa=1e3, seed=5)
    result = run(problem, make_optimizer("scipy-lsqr"), build_rules(tol=1e-8, max_iter=1000),
                 backend=numpy64)
    k = result.iterations
    assert result.status == "converged" and k > 5
    # An independent LSQR through the very arithmetic the run did (column-major X, products one
    # vector at a time, x0 = 0). Through another layout the two iterates differ by rounding
    # that LSQR's loss of orthogonality amplifies past d = 30 iterations: on a kappa = 1e3
    # problem, sums taken in another order moved the suboptimality at the same k by 30%
    # (9.58e-9 against 7.41e-9 under OpenBLAS's SkylakeX kernels), so only the same path can
    # pin down k itself.
    X = np.asfortranarray(problem.X)

    def suboptimality(iterations):
        w = scipy.sparse.linalg.lsqr(X, problem.y[:, 0], atol=0, btol=0, conlim=0,
                                     x0=np.zeros(problem.d), iter_lim=iterations)[0]
        return problem.suboptimality(problem.loss(w[:, None]))

    assert suboptimality(k) <= 1e-8 < suboptimality(k - 1)
    # The same iterate: equal up to evaluating the loss, whose cancellation (f - f*) / f* at
    # 1e-8 leaves about eps / 1e-8 ~ 2e-8 of relative noise; 1e-6 is that with room.
    assert result.trace["suboptimality"].iloc[-1] == pytest.approx(suboptimality(k), rel=1e-6)


def test_iteration_budget_and_other_records(numpy64):
    problem = make_problem("synthetic", n=2000, d=30, kappa=1e4, seed=5)
    result = run(problem, make_optimizer("scipy-lsmr"), build_rules(tol=1e-12, max_iter=7),
                 backend=numpy64)
    assert result.status == "max_iter" and result.iterations == 7
    for name, via in (("scipy-lbfgs", "callback"), ("closed-form", "none"), ("gd", "loop")):
        record = run(problem, make_optimizer(name), build_rules(max_iter=2),
                     backend=numpy64).record()
        assert record["stopping_via"] == via


def test_numpy_backend_only():
    problem = make_problem("synthetic", n=200, d=3, seed=0)
    with pytest.raises(InputError, match="numpy backend only"):
        run(problem, make_optimizer("scipy-lsqr"), build_rules(max_iter=3),
            backend=make_backend("tensorflow", feed="resident"))
