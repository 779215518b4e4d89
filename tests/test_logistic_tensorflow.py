"""Logistic regression and ridge on the TensorFlow backend: the objective against finite
differences (eager, compiled, XLA, either data layout), and the strong-Wolfe L-BFGS and Armijo GD
giving NumPy's iterates and evaluation counts in every feed mode."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
tf = pytest.importorskip("tensorflow")

from test_logistic import finite_difference_check, logistic, ridge  # noqa: E402
from tolerances import twin  # noqa: E402

from convergence_study.errors import InputError  # noqa: E402
from optimizers import build_rules, make_optimizer, run  # noqa: E402
from optimizers.objective import make_objective, problem_data  # noqa: E402
from study.frameworks.registry import make_backend  # noqa: E402
from study.frameworks.tensorflow.backend import TensorflowOps  # noqa: E402

MODES = [("fused", False), ("fused", True), ("resident", False)]  # feed: resident's path
MODE_IDS = ["fused", "fused-xla", "resident"]


class Compiled:
    """An objective whose methods run inside tf.function (optionally XLA-compiled)."""

    def __init__(self, ops, problem, formulation, xla):
        data = problem_data(ops, problem, formulation)

        def build():
            return make_objective(ops, data, formulation, problem.objective)

        compile_ = tf.function if not xla else (lambda f: tf.function(f, jit_compile=True))
        self.value_and_grad = compile_(lambda w: build().value_and_grad(w))
        self.hessian_product = compile_(lambda v, w: build().hessian_product(v, w))
        self.curvature = compile_(lambda v, w: build().curvature(v, w))


@pytest.mark.numerical
@pytest.mark.parametrize("layout", ["columns", "rows"])
@pytest.mark.parametrize("how", ["eager", "function", "xla"])
@pytest.mark.parametrize("kind", ["logistic", "ridge-data", "ridge-gram"])
def test_gradient_and_hessian_products_match_finite_differences_tensorflow(layout, how, kind):
    problem = logistic(kappa=100.0, seed=1) if kind == "logistic" else ridge()
    formulation = "gram" if kind == "ridge-gram" else "data"
    ops = TensorflowOps("float64", layout=layout)
    if how == "eager":
        objective = make_objective(ops, problem_data(ops, problem, formulation), formulation,
                                   problem.objective)
    else:
        objective = Compiled(ops, problem, formulation, xla=how == "xla")
    rng = np.random.default_rng(2)
    w = tf.constant(rng.standard_normal((problem.d, 1)))
    v = tf.constant(rng.standard_normal((problem.d, 1)))
    assert max(finite_difference_check(objective, w, v)) < 1e-6  # see test_logistic
    # the same sums in TensorFlow's order: the loss's n = 600 terms round by <= n eps = 1.3e-13;
    # a gradient entry may cancel, so 1e-10 of it (and 1e-15 absolute for a near-zero one)
    f, g = objective.value_and_grad(w)
    assert float(f) == pytest.approx(problem.loss(w.numpy()), rel=1e-12)
    np.testing.assert_allclose(g.numpy(), problem.grad(w.numpy()), rtol=1e-10, atol=1e-15)
    np.testing.assert_allclose(objective.hessian_product(v, w).numpy(),
                               problem.hessian_product(w.numpy(), v.numpy()), rtol=1e-10)


@pytest.mark.numerical
def test_softplus_and_sigmoid_do_not_overflow_for_huge_margins():
    ops = TensorflowOps("float64")
    problem = logistic(kappa=10.0)
    objective = make_objective(ops, problem_data(ops, problem), "data", "logistic")
    w = tf.constant(1e6 * problem.w_star)  # margins of order 1e6
    f, g = objective.value_and_grad(w)
    assert np.isfinite(f.numpy()) and np.all(np.isfinite(g.numpy()))
    assert float(f) == pytest.approx(problem.loss(w.numpy()), rel=1e-12)


@pytest.fixture(scope="module")
def harder():
    """L-BFGS needs about 40 iterations here: 30 of them are all before convergence."""
    return logistic(n=600, d=8, kappa=1e3, lam=1e-6, seed=2)


@pytest.mark.numerical
@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
@pytest.mark.parametrize("name, hp", [("lbfgs", {}), ("gd", {"step": "armijo"})],
                         ids=["lbfgs-wolfe", "gd-armijo"])
def test_tensorflow_gives_numpys_iterates_and_counts_for_30_iterations(harder, mode, name, hp):
    rules = build_rules(tol=None, max_iter=30)
    reference = run(harder, make_optimizer(name, **hp), rules, backend=make_backend("numpy"))
    feed, xla = mode
    result = run(harder, make_optimizer(name, **hp), rules,
                 backend=make_backend("tensorflow", "float64", feed=feed, xla=xla))
    assert result.iterations == reference.iterations == 30
    assert reference.suboptimality > 1e-10  # still converging: the comparison means something
    relative = np.max(np.abs(result.w - reference.w)) / np.max(np.abs(reference.w))
    bound = twin(30, harder.reference.kappa_raw)  # Hessian's condition at w*: 1.2e3; 4e-11
    assert relative < bound
    # the loss moves by |g||dw| / f <= 7 |dw| / |w| on these iterates, and its 600 positive
    # terms add no cancellation: 10x the iterates' bound (1e-12 before, below that bound)
    np.testing.assert_allclose(result.trace["loss"], reference.trace["loss"], rtol=10 * bound)
    assert (result.nfev, result.ngev, result.nhvp) == (reference.nfev, reference.ngev,
                                                       reference.nhvp)
    assert result.nfev > 31


def test_fused_wolfe_lbfgs_converges_in_float32_and_float64(harder):
    # float32 resolves the loss to eps32 = 1.2e-7 (relative): 1e-4 is well above it
    for dtype, tol in (("float64", 1e-10), ("float32", 1e-4)):
        result = run(harder, make_optimizer("lbfgs"), build_rules(tol=tol, max_iter=500),
                     backend=make_backend("tensorflow", dtype))
        assert result.status == "converged", (dtype, result.message)


def test_tf1_refuses_logistic_and_ridge():
    for problem in (logistic(kappa=10.0), ridge()):
        with pytest.raises(InputError, match="original least-squares program"):
            run(problem, make_optimizer("gd", step="1/L"), build_rules(tol=1e-8, max_iter=10),
                backend=make_backend("tensorflow", "float32", feed="tf1"))
