import dataclasses
import math

import numpy as np
import pytest
from tolerances import distance_to_w_star, twin

from datasets import InputError, make_problem
from optimizers import OPTIMIZERS, PREFIXES, build_rules, make_optimizer, run
from optimizers.base import Optimizer
from optimizers.gd import GDState
from optimizers.objective import make_objective, prepare_data
from study.frameworks.registry import make_backend

pytestmark = pytest.mark.numerical


def iterates(problem, optimizer, steps, backend):
    """The optimizer's own init/update, stepped by hand: the iterates the driver would produce."""
    objective = make_objective(backend, prepare_data(backend, problem.X, problem.y))
    params = optimizer.setup(problem, objective, backend)
    state = optimizer.init(objective, backend, params,
                           backend.asarray(np.zeros((problem.d, problem.k))))
    out = [state.w]
    for _ in range(steps):
        state = optimizer.update(objective, backend, params, state)
        out.append(state.w)
    return out


@pytest.mark.parametrize("name, hyperparameters", [
    ("gd", {"step": "1/L"}),
    ("lbfgs", {}),
    ("scipy-lbfgs", {}),
    ("adadelta", {"learning_rate": 0.1}),
    ("closed-form", {}),
    ("closed-form", {"solver": "normal"}),
])
def test_reaches_relative_suboptimality_1e8(well_conditioned, numpy64, name, hyperparameters):
    result = run(well_conditioned, make_optimizer(name, **hyperparameters),
                 build_rules(tol=1e-8, max_iter=30_000), backend=numpy64)
    assert result.status == "converged", result.message
    assert result.suboptimality <= 1e-8
    assert np.linalg.norm(result.w - well_conditioned.w_star) <= distance_to_w_star(
        well_conditioned, 1e-8)


def test_original_learning_rate_one_adadelta_does_not_reach_the_target_on_eve(numpy64):
    """A finding the toolkit must be able to show: the original setting crawls on raw eve."""
    problem = make_problem("eve", rows=10_000)
    result = run(problem, make_optimizer("adadelta", learning_rate=1.0),
                 build_rules(tol=1e-8, max_iter=3000), backend=numpy64)
    assert result.status == "max_iter"
    assert result.suboptimality > 0.1
    assert result.trace["loss"].iloc[-1] < result.trace["loss"].iloc[0]


def original_numpy_program(features, labels, iterations):
    """A direct transcription of the original question's NumPy loop (features with intercept)."""
    features_array = np.asarray(features)
    betas = np.zeros(features_array.shape[1])
    history = [betas.copy()]
    for _ in range(iterations):
        predictions = np.dot(features_array, betas)
        errors = predictions - labels
        gradient = 2 * np.dot(errors, features_array)
        gradient_two = 2 * np.sum(features_array ** 2, axis=0)
        betas -= (gradient / gradient_two) / len(betas)
        _rmse = np.sqrt(np.mean((np.dot(features_array, betas) - labels) ** 2))
        history.append(betas.copy())
    return history


def test_diagonal_gd_reproduces_the_original_numpy_program(numpy64):
    problem = make_problem("eve", rows=3000, seed=4)
    expected = original_numpy_program(problem.X, problem.y[:, 0], 20)
    ours = iterates(problem, make_optimizer("gd", step="diag"), 20, numpy64)
    # Jacobi-scaled GD contracts in the norm weighted by the column norms s, where two orders
    # of sums drift apart by twin(k, kappa of the column-scaled X, 171), not elementwise (an
    # rtol of 1e-12 used 0.09 of itself under one BLAS kernel, 0.006 under another)
    s = np.linalg.norm(problem.X, axis=0)
    for step, (a, b) in enumerate(zip(ours, expected, strict=True)):
        assert np.linalg.norm(s * (a[:, 0] - b)) <= twin(step, problem.reference.kappa) * \
            np.linalg.norm(s * b), f"step {step}"
    assert not np.allclose(ours[20], ours[19])  # it actually moved


def test_adadelta_matches_a_hand_computation_of_the_published_update(numpy64):
    rng = np.random.default_rng(3)
    features, labels = rng.standard_normal((40, 2)), rng.standard_normal(40)
    from datasets.problem import Problem

    problem = Problem.from_arrays(features, labels, name="tiny")
    lr, rho, eps = 0.7, 0.9, 1e-6
    ours = iterates(problem, make_optimizer("adadelta", learning_rate=lr, rho=rho, epsilon=eps),
                    5, numpy64)
    X, y = problem.X.tolist(), labels.tolist()
    w = [0.0, 0.0, 0.0]
    accum, accum_update = [0.0] * 3, [0.0] * 3
    for step in range(5):
        residuals = [sum(xj * wj for xj, wj in zip(row, w, strict=True)) - yi
                     for row, yi in zip(X, y, strict=True)]
        grad = [2.0 / len(X) * sum(r * row[j] for r, row in zip(residuals, X, strict=True))
                for j in range(3)]
        for j in range(3):
            accum[j] = rho * accum[j] + (1 - rho) * grad[j] ** 2
            update = math.sqrt(accum_update[j] + eps) / math.sqrt(accum[j] + eps) * grad[j]
            accum_update[j] = rho * accum_update[j] + (1 - rho) * update ** 2
            w[j] -= lr * update
        # 5 steps of 40-term sums on a well-conditioned 40 x 3 problem: ~5 * 40 eps ~ 5e-14
        np.testing.assert_allclose(ours[step + 1][:, 0], w, rtol=1e-12, err_msg=f"step {step}")


def test_adadelta_epsilon_is_explicit_and_changes_the_result(numpy64):
    problem = make_problem("eve", rows=2000)
    rules = build_rules(tol=1e-8, max_iter=100)
    tf1 = run(problem, make_optimizer("adadelta", epsilon=1e-8), rules, backend=numpy64)
    keras = run(problem, make_optimizer("adadelta", epsilon=1e-7), rules, backend=numpy64)
    assert tf1.hyperparameters["epsilon"] == 1e-8 and keras.record()["hp_epsilon"] == 1e-7
    # the two epsilons move the loss after 100 steps by ~25%; rounding (~1e-13) cannot
    assert tf1.final_loss != pytest.approx(keras.final_loss, rel=1e-3)


@pytest.mark.parametrize("kappa", [10.0, 1e4])
def test_own_lbfgs_and_scipy_agree(numpy64, kappa):
    problem = make_problem("synthetic", n=3000, d=20, kappa=kappa, seed=7)
    rules = build_rules(tol=1e-8, max_iter=5000)
    ours = run(problem, make_optimizer("lbfgs"), rules, backend=numpy64)
    scipy = run(problem, make_optimizer("scipy-lbfgs"), rules, backend=numpy64)
    assert ours.status == scipy.status == "converged"
    # Both stop within 1e-8 of f* (relative), hence that close to f* and to each other, give or
    # take the float64 rounding of the loss, which may fall below f*: a few eps (|X||w| + |y|)
    # / |Xw - y| ~ 1e-14 here (rel=1e-8 alone failed by such rounding: 0.94 of it was used)
    assert ours.final_loss == pytest.approx(scipy.final_loss, rel=1e-8 + 1e-12)
    assert ours.final_loss == pytest.approx(problem.f_star, rel=1e-8 + 1e-12)
    # On a quadratic, the exact line search makes our L-BFGS as good as conjugate gradients:
    # never more than 2x SciPy's iterations, and far fewer when the problem is ill conditioned
    # (15 against 17 and 28 against 256 here: rounding moves a count by one or two, not 2x).
    assert ours.iterations <= 2 * scipy.iterations
    if kappa == 10.0:
        assert scipy.iterations <= 2 * ours.iterations


def test_lbfgs_with_history_one_still_converges(numpy64, well_conditioned):
    result = run(well_conditioned, make_optimizer("lbfgs", history=1),
                 build_rules(tol=1e-10, max_iter=1000), backend=numpy64)
    assert result.status == "converged"


def test_float32_runs_stay_float32():
    backend = make_backend("numpy", "float32")
    problem = make_problem("synthetic", n=500, d=4, seed=0)
    w = iterates(problem, make_optimizer("gd"), 3, backend)[-1]
    assert w.dtype == np.float32
    result = run(problem, make_optimizer("lbfgs"), build_rules(tol=1e-4, max_iter=50),
                 backend=backend)
    assert result.dtype == "float32" and result.status == "converged"


def test_random_normal_init_is_seeded(well_conditioned, numpy64):
    rules = build_rules(max_iter=3)
    a = run(well_conditioned, make_optimizer("gd"), rules, backend=numpy64, init="normal", seed=1)
    b = run(well_conditioned, make_optimizer("gd"), rules, backend=numpy64, init="normal", seed=1)
    c = run(well_conditioned, make_optimizer("gd"), rules, backend=numpy64, init="normal", seed=2)
    np.testing.assert_array_equal(a.w, b.w)
    assert not np.allclose(a.w, c.w)


def test_evaluations_are_counted_apart(well_conditioned, numpy64):
    result = run(well_conditioned, make_optimizer("lbfgs"), build_rules(max_iter=4),
                 backend=numpy64)
    assert (result.iterations, result.nfev, result.ngev, result.nhvp) == (4, 5, 5, 4)


@pytest.mark.parametrize("name, hyperparameters, message", [
    ("sgd", {}, "unknown optimizer 'sgd'; allowed: gd, adadelta"),
    ("gd", {"step": "fixed"}, "needs a learning_rate"),
    ("gd", {"step": "fixed", "learning_rate": -1.0}, "learning_rate must be a finite number > 0"),
    ("gd", {"step": "fixed", "learning_rate": 0.0}, "learning_rate must be"),
    ("gd", {"step": "2/L"}, "unknown step '2/L'; allowed: fixed, 1/L, diag"),
    ("gd", {"momentum": 0.9}, "no hyperparameter 'momentum'; allowed: step, learning_rate"),
    ("adadelta", {"rho": 1.5}, "rho must be in"),
    ("adadelta", {"epsilon": 0}, "epsilon must be"),
    ("lbfgs", {"history": 0}, "history must be an integer >= 1"),
    ("closed-form", {"solver": "qr"}, "unknown solver 'qr'"),
])
def test_bad_hyperparameters(name, hyperparameters, message):
    with pytest.raises(InputError, match=message):
        make_optimizer(name, **hyperparameters)


def test_unknown_backend_and_dtype():
    with pytest.raises(InputError,
                       match="unknown backend 'mxnet'; allowed: numpy, tensorflow, jax, torch"):
        make_backend("mxnet")
    with pytest.raises(InputError, match="unknown dtype 'float16'"):
        make_backend("numpy", "float16")


def test_float32_convergence_claim_is_checked_in_float64():
    """In float32 the loss cannot resolve 1e-8 on an ill-conditioned problem: the rule fires on
    rounding, and the float64 check of the final iterate turns the claim into `stalled`."""
    problem = make_problem("synthetic", n=5000, d=20, kappa=1e4, noise=1e-3)
    result = run(problem, make_optimizer("lbfgs"), build_rules(tol=1e-8, max_iter=500),
                 backend=make_backend("numpy", "float32"))
    assert result.suboptimality > 1e-8 and result.target_reached is False
    assert result.status == "stalled"
    assert "float64 suboptimality of the final iterate" in result.message
    exact = run(problem, make_optimizer("lbfgs"), build_rules(tol=1e-8, max_iter=500),
                backend=make_backend("numpy", "float64"))
    assert exact.status == "converged" and exact.target_reached is True


@pytest.mark.parametrize("name, hyperparameters", [
    ("gd", {"step": "1/L"}), ("gd", {"step": "diag"}), ("adadelta", {"learning_rate": 0.1}),
    ("lbfgs", {}), ("scipy-lbfgs", {})])
def test_gram_formulation_gives_the_same_iterates_and_optimum(well_conditioned, name,
                                                              hyperparameters):
    rules = build_rules(tol=1e-8, max_iter=30_000)
    data = run(well_conditioned, make_optimizer(name, **hyperparameters), rules,
               backend=make_backend("numpy", "float64", formulation="data"))
    gram = run(well_conditioned, make_optimizer(name, **hyperparameters), rules,
               backend=make_backend("numpy", "float64", formulation="gram"))
    assert gram.status == data.status == "converged"
    assert gram.extra["formulation"] == "gram" and data.record()["formulation"] == "data"
    assert np.linalg.norm(gram.w - well_conditioned.w_star) <= distance_to_w_star(
        well_conditioned, 1e-8)
    # the two formulations round differently, which moves the crossing of the target by an
    # iteration or two at most (the slack), never by a whole phase of the run
    assert abs(gram.iterations - data.iterations) <= max(2, 0.01 * data.iterations)
    # X^T X w - 2 X^T y + y^T y / n cancels down to f: rounding ~ eps f(0) / f, under 1e-14
    # over the first 5 iterates here; 1e-10 leaves room for another kernel's order of sums
    first = gram.trace["loss"].iloc[:5].to_numpy()
    np.testing.assert_allclose(first, data.trace["loss"].iloc[:5].to_numpy(), rtol=1e-10)


def test_unknown_formulation():
    with pytest.raises(InputError, match="unknown formulation 'sparse' for numpy; allowed: data"):
        make_backend("numpy", formulation="sparse")


@pytest.mark.parametrize("name", ["gd", "scipy-lbfgs"])
def test_outcome_names_the_rule_that_ended_the_run(name):
    """The driver's float64 re-check keys on the rule object, not on the message's wording."""
    from optimizers.driver import initial_point
    from optimizers.stopping import GradientNorm, MaxIter, Suboptimality

    problem = make_problem("synthetic", n=500, d=4, kappa=10.0, seed=1)
    backend = make_backend("numpy", "float64")
    w0 = initial_point(problem, "zeros", 0)
    for rules, kind in ((build_rules(tol=1e-6, max_iter=10_000), Suboptimality),
                        (build_rules(grad_tol=1e-6, max_iter=10_000), GradientNorm),
                        (build_rules(max_iter=2), MaxIter)):
        optimizer = make_optimizer(name)
        outcome = (optimizer.minimize(problem, rules, backend, w0) if name == "scipy-lbfgs"
                   else backend.minimize(problem, optimizer, rules, w0))
        assert isinstance(outcome.rule, kind), (kind, outcome.message)
        assert outcome.status == outcome.rule.status


def two_loop_direction(g, S, Y, rho):
    """Nocedal and Wright's Algorithm 7.4, written out plainly: the reference for L-BFGS's
    compact-form direction (empty slots, rho = 0, contribute nothing)."""
    q, alphas = g.copy(), []
    for i in reversed(range(len(rho))):
        alphas.append(rho[i] * np.vdot(S[i], q))
        q = q - alphas[-1] * Y[i]
    alphas.reverse()
    yy = np.vdot(Y[-1], Y[-1])
    r = (np.vdot(S[-1], Y[-1]) / yy if yy > 0 else 1.0) * q
    for i in range(len(rho)):
        r = r + (alphas[i] - rho[i] * np.vdot(Y[i], r)) * S[i]
    return -r


@pytest.mark.parametrize("dtype, rtol", [("float64", 1e-10), ("float32", 1e-3)])
@pytest.mark.parametrize("filled", [0, 1, 4, 10])
def test_lbfgs_direction_equals_the_two_loop_recursion(filled, dtype, rtol):
    from optimizers.lbfgs import LBFGS, LBFGSState

    rng = np.random.default_rng(filled)
    m, d, k = 10, 5, 2
    A = rng.normal(size=(d * k, d * k))
    H = A @ A.T + 0.1 * np.eye(d * k)  # an SPD Hessian: every stored pair has s.y > 0
    S, Y, rho = np.zeros((m, d, k)), np.zeros((m, d, k)), np.zeros(m)
    for i in range(m - filled, m):  # newest last, empty slots first, as the queue keeps them
        S[i] = rng.normal(size=(d, k))
        Y[i] = (H @ S[i].reshape(-1)).reshape(d, k)
        rho[i] = 1 / np.vdot(S[i], Y[i])
    g = rng.normal(size=(d, k))
    ops = make_backend("numpy", dtype)
    state = LBFGSState(None, None, *(ops.asarray(v) for v in (g, S, Y, rho)))
    got = LBFGS(history=m).direction(ops, state)
    # two ways to apply the same m = 10 updates to a Hessian of cond <= 284: ~m eps kappa,
    # 6e-13 in float64 (rtol 1e-10) and 3.4e-4 in float32 (eps 1.2e-7; rtol 1e-3)
    assert got.dtype == np.dtype(dtype) and got.shape == (d, k)
    np.testing.assert_allclose(got, two_loop_direction(g, S, Y, rho), rtol=rtol,
                               atol=rtol * np.abs(g).max())


def test_numpy_triangular_solve_and_its_singular_case():
    ops = make_backend("numpy", "float64")
    R = np.triu(np.arange(1.0, 10.0).reshape(3, 3))
    b = np.array([[1.0], [2.0], [3.0]])
    # a 3 x 3 triangular solve is backward stable: the residual is a few eps |R||x|
    np.testing.assert_allclose(R @ ops.solve_triangular(R, b, lower=False), b, rtol=1e-12)
    np.testing.assert_allclose(R.T @ ops.solve_triangular(R.T, b, lower=True), b, rtol=1e-12)
    R[1, 1] = 0.0
    assert np.isnan(ops.solve_triangular(R, b, lower=False)).all()


class PlainStep(Optimizer):
    """A user's optimizer stating only what it must (x <- x - g / 4L on least squares): the
    optional hooks come from the base class's defaults, never from hasattr checks."""

    name, evaluations = "plain", {"nfev": 1, "ngev": 1, "nhvp": 0}

    def hyperparameters(self) -> dict:
        return {}

    def setup(self, problem, objective, ops):
        return ops.scalar(0.25 / problem.curvature_bounds()[1])

    def init(self, objective, ops, params, w0):
        f, g = objective.value_and_grad(w0)
        return GDState(w0, f, g)

    def update(self, objective, ops, params, state):
        w = state.w - params * state.g
        return GDState(w, *objective.value_and_grad(w))


def test_an_optimizer_stating_only_what_it_must_runs_with_the_base_hooks(well_conditioned,
                                                                         numpy64):
    result = run(well_conditioned, PlainStep(), build_rules(tol=1e-6, max_iter=100_000),
                 backend=numpy64)
    assert result.status == "converged", result.message
    assert (result.nfev, result.ngev) == (result.iterations + 1, result.iterations + 1)


def test_every_shipped_optimizer_derives_from_the_base_and_frozen_ones_stay_frozen():
    for name, cls in OPTIMIZERS.items():
        assert issubclass(cls, Optimizer), name
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, name
    assert all(issubclass(cls, Optimizer) for cls in PREFIXES.values())


@pytest.mark.parametrize("objective, formulation, lam", [
    ("least-squares", "data", 0.0), ("least-squares", "data", 0.3),
    ("least-squares", "gram", 0.0), ("least-squares", "gram", 0.3), ("logistic", "data", 0.1)])
def test_an_objective_rebound_to_other_data_is_the_one_made_from_them(objective, formulation,
                                                                      lam):
    """`rebound` (a feed's step keeps its objective's constants and takes the fresh copy's
    arrays) gives what the objective made from those arrays gives, bit for bit."""
    from optimizers.objective import rebound

    backend = make_backend("numpy")
    rng = np.random.default_rng(3)
    X, w = rng.standard_normal((40, 3)), rng.standard_normal((3, 1))
    labels = np.sign(rng.standard_normal((40, 1)))
    first, second = (prepare_data(backend, X * scale, labels if objective == "logistic"
                                  else labels + scale, formulation, objective, lam * scale)
                     for scale in (1.0, 2.0))
    made = make_objective(backend, second, formulation, objective)
    bound = rebound(make_objective(backend, first, formulation, objective), second)
    assert type(bound) is type(made) and bound is not made

    def flat(value):
        return np.concatenate([np.ravel(v) for v in
                               (value if isinstance(value, tuple) else (value,))])

    for method, args in (("value_and_grad", (w,)), ("hessian_product", (w, w)),
                         ("curvature", (w, w)), ("hessian_diagonal", ())):
        assert np.array_equal(flat(getattr(bound, method)(*args)),
                              flat(getattr(made, method)(*args))), method
