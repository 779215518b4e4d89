"""L2-regularized logistic regression and ridge least squares: the objective on the NumPy
backend against finite differences, the certified references against SciPy, the strong-Wolfe
L-BFGS and Armijo GD against SciPy's L-BFGS-B, labels, refusals and near-separable data.
(The TensorFlow side is in test_logistic_tensorflow.py.)"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.optimize

from convergence_study.errors import Uncertifiable
from datasets import InputError, make_problem
from datasets.problem import Problem
from optimizers import build_rules, make_optimizer, run
from optimizers.objective import make_objective, problem_data
from study.frameworks.registry import make_backend

pytestmark = pytest.mark.numerical


def logistic(**params):
    return make_problem("synthetic-logistic", **{"n": 600, "d": 5, **params})


PROBLEMS = {
    "logistic-k10": dict(kappa=10.0, seed=1),
    "logistic-k1e3-lam1e-5": dict(kappa=1e3, lam=1e-5, seed=2),
    "logistic-overlap0.05": dict(kappa=30.0, overlap=0.05, seed=3),
}


SHORT, FINE = build_rules(tol=1e-8, max_iter=100), build_rules(tol=1e-10, max_iter=100)


def ridge(lam=0.05):
    return make_problem("synthetic", n=400, d=4, kappa=50.0, seed=4, lam=lam)


def objective_of(problem, backend):
    data = problem_data(backend, problem, backend.formulation)
    return make_objective(backend, data, backend.formulation, problem.objective)


def finite_difference_check(objective, w, v, h=1e-5):
    """Central differences along v: of f against g.v, and of g against H v (relative). Their
    error is the truncation h^2 |f^(3)| / 6 and the rounding eps |f| / h, relative to |g.v|:
    ~1e-10, up to 7e-9 near w*, where g.v is small; callers allow 1e-6."""
    f_plus, g_plus = objective.value_and_grad(w + h * v)
    f_minus, g_minus = objective.value_and_grad(w - h * v)
    _, g = objective.value_and_grad(w)
    slope = float(np.vdot(np.asarray(g), v))
    slope_error = abs((float(f_plus) - float(f_minus)) / (2 * h) - slope) / abs(slope)
    Hv = np.asarray(objective.hessian_product(v, w))
    fd = (np.asarray(g_plus) - np.asarray(g_minus)) / (2 * h)
    hvp_error = np.linalg.norm(fd - Hv) / np.linalg.norm(Hv)
    curvature = float(objective.curvature(v, w))
    return slope_error, hvp_error, abs(curvature - float(np.vdot(v, Hv))) / abs(curvature)


def test_the_synthetic_generator_controls_conditioning_and_overlap():
    broad, narrow = logistic(kappa=10.0, overlap=1.0, seed=0), logistic(kappa=10.0, overlap=0.02,
                                                                         seed=0)
    assert set(np.unique(broad.y)) == {-1.0, 1.0}
    assert 0.3 < np.mean(broad.y > 0) < 0.7
    cov = np.linalg.eigvalsh(np.cov(logistic(n=20_000, kappa=100.0).X.T))
    # sampling, not rounding: each extreme eigenvalue of a 20 000-draw covariance is off by
    # ~sqrt(2 / n) = 1% (more at the ends of the spectrum); 20% still tells 100 from 10 or 1000
    assert cov[-1] / cov[0] == pytest.approx(100.0, rel=0.2)
    # less overlap: the classes are more nearly separable, f* lower, w* longer
    assert narrow.f_star < broad.f_star / 3
    assert np.linalg.norm(narrow.w_star) > 3 * np.linalg.norm(broad.w_star)
    assert broad.params["lam"] == pytest.approx(1 / 600)


@pytest.mark.parametrize("name", list(PROBLEMS))
@pytest.mark.parametrize("formulation", ["data"])
def test_gradient_and_hessian_products_match_finite_differences_numpy(name, formulation):
    problem = logistic(**PROBLEMS[name])
    backend = make_backend("numpy", "float64", formulation=formulation)
    rng = np.random.default_rng(0)
    for w in (problem.w_star + 0.1 * rng.standard_normal((problem.d, 1)),
              rng.standard_normal((problem.d, 1))):
        errors = finite_difference_check(objective_of(problem, backend), w,
                                         rng.standard_normal((problem.d, 1)))
        assert max(errors) < 1e-6, errors
    w = rng.standard_normal((problem.d, 1))
    objective = objective_of(problem, backend)
    f, g = objective.value_and_grad(w)
    # one formula through two code paths: n = 600 terms round by <= n eps = 1.3e-13 in all
    assert float(f) == pytest.approx(problem.loss(w), rel=1e-13)
    np.testing.assert_allclose(g, problem.grad(w), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("formulation", ["data", "gram"])
def test_ridge_least_squares_gradient_and_hessian_products_match_finite_differences(formulation):
    problem = ridge()
    backend = make_backend("numpy", "float64", formulation=formulation)
    rng = np.random.default_rng(1)
    w, v = rng.standard_normal((problem.d, 1)), rng.standard_normal((problem.d, 1))
    assert max(finite_difference_check(objective_of(problem, backend), w, v)) < 1e-6
    f, g = objective_of(problem, backend).value_and_grad(w)
    # the Gram form cancels w'Gw - 2b'w + y'y/n down to f and G w - b down to g: eps times
    # f(0) / f or |G||w| / |g| (~1e2 here) on top of the data form's n eps
    assert float(f) == pytest.approx(problem.loss(w), rel=1e-12)
    np.testing.assert_allclose(g, problem.grad(w), rtol=1e-10)


def test_the_ridge_reference_solves_the_regularized_normal_equations():
    problem = ridge(lam=0.3)
    X, y, n = problem.X, problem.y, problem.n
    w = np.linalg.solve(2 / n * X.T @ X + 0.3 * np.eye(problem.d), 2 / n * X.T @ y)
    # the normal equations of a Hessian of condition 4 (lam 0.3): good to a few n eps kappa
    # (4e-13), as are its eigenvalues; f is stationary at w*, so f(w) is off by its rounding
    np.testing.assert_allclose(problem.w_star, w, rtol=1e-11)
    assert problem.f_star == pytest.approx(problem.loss(w), rel=1e-13)
    assert problem.reference.accuracy < 1e-14  # refinement reaches a few eps: 2.2e-16 here
    eig = np.linalg.eigvalsh(2 / n * X.T @ X + 0.3 * np.eye(problem.d))
    assert problem.reference.kappa_raw == pytest.approx(eig[-1] / eig[0], rel=1e-11)
    assert problem.spectrum.L == pytest.approx(eig[-1], rel=1e-11)
    plain = make_problem("synthetic", n=400, d=4, kappa=50.0, seed=4)
    assert problem.f_star > plain.f_star and "lam" not in plain.params


def scipy_tightest(problem):
    """SciPy's L-BFGS-B at its tightest: no ftol or gtol; it stops when its line search can no
    longer decrease f in float64."""
    def fun(x):
        w = x.reshape(problem.d, 1)
        return problem.loss(w), problem.grad(w).ravel()

    return scipy.optimize.minimize(fun, np.zeros(problem.d), jac=True, method="L-BFGS-B",
                                   options={"maxiter": 100_000, "maxfun": 100_000, "ftol": 0.0,
                                            "gtol": 0.0, "maxcor": 30})


@pytest.mark.parametrize("name", list(PROBLEMS))
def test_newton_f_star_agrees_with_scipy_lbfgsb_at_its_tightest(name):
    problem = logistic(**PROBLEMS[name])
    ref = problem.reference
    assert ref.method == "newton" and ref.accuracy < 1e-14 and ref.refusal(1e-10) is None
    result = scipy_tightest(problem)
    # SciPy stops when float64 can no longer see f fall: a few eps kappa at worst (2e-13 at
    # kappa 1e3; 1e-16 measured); 1e-10 leaves room and is far below what a wrong f* moves
    assert abs(result.fun - ref.f) / ref.f < 1e-10
    # never below a certified f* (compared without float64's rounding of the loss)
    assert problem.loss_extended(result.x[:, None]) >= ref.f - ref.accuracy * ref.scale
    # f* is the loss at w* in extended precision; float64 sums 600 positive terms: ~log2(n) eps
    assert problem.loss(ref.w) == pytest.approx(ref.f, rel=1e-14)


def test_newton_f_star_on_eve_late_week_agrees_with_scipy():
    problem = make_problem("eve", rows=3000, objective="logistic", standardize=True)
    assert problem.label_names == ("late_week",)
    assert abs(scipy_tightest(problem).fun - problem.f_star) / problem.f_star < 1e-10  # as above


@pytest.mark.parametrize("name", list(PROBLEMS))
def test_wolfe_lbfgs_reaches_scipys_f_star(name, capsys):
    problem = logistic(**PROBLEMS[name])
    rules = build_rules(tol=1e-10, max_iter=2000)
    ours = run(problem, make_optimizer("lbfgs"), rules, backend=make_backend("numpy"))
    theirs = run(problem, make_optimizer("scipy-lbfgs"), rules, backend=make_backend("numpy"))
    assert ours.status == theirs.status == "converged", (ours.message, theirs.message)
    assert ours.hyperparameters["line_search"] == "wolfe"
    # both within 1e-10 of f*, hence of each other, give or take the loss's rounding
    assert abs(ours.final_loss - theirs.final_loss) / theirs.final_loss < 1e-10 + 1e-12
    assert ours.nfev == ours.ngev > ours.iterations  # line-search evaluations are counted
    with capsys.disabled():
        print(f"\n{name}: lbfgs-wolfe {ours.iterations} it / {ours.nfev} ev; scipy L-BFGS-B "
              f"{theirs.iterations} it / {theirs.nfev} ev")


def test_armijo_gd_converges_and_counts_its_evaluations():
    problem = logistic(kappa=10.0, seed=1)
    result = run(problem, make_optimizer("gd", step="armijo"), build_rules(tol=1e-8,
                 max_iter=5000), backend=make_backend("numpy"))
    assert result.status == "converged" and result.suboptimality <= 1e-8
    assert result.nfev == result.ngev > result.iterations
    fixed = run(problem, make_optimizer("gd", step="1/L"), build_rules(tol=1e-8, max_iter=5000),
                backend=make_backend("numpy"))
    assert fixed.status == "converged" and fixed.nfev == fixed.iterations + 1
    # on least squares the exact search stays the default, recorded as such
    exact = run(ridge(), make_optimizer("lbfgs"), FINE,
                backend=make_backend("numpy"))
    assert exact.status == "converged" and exact.hyperparameters["line_search"] == "exact"
    assert exact.nhvp == exact.iterations
    wolfe = run(ridge(), make_optimizer("lbfgs", line_search="wolfe"), FINE,
                backend=make_backend("numpy"))
    assert wolfe.status == "converged" and wolfe.nhvp == 0


def test_near_separable_data_with_tiny_lam_is_handled_without_overflow():
    problem = logistic(kappa=10.0, overlap=1e-3, lam=1e-9, seed=5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an overflow in exp would be a RuntimeWarning
        ref = problem.reference
        assert np.isfinite(ref.f) and np.linalg.norm(ref.w) > 100  # margins in the thousands
        margins = problem.y * (problem.X @ ref.w)
        assert np.abs(margins).max() > 100 and np.isfinite(problem.loss(ref.w))
        outcomes = []
        for name, hp in (("lbfgs", {}), ("gd", {"step": "armijo"})):
            try:
                result = run(problem, make_optimizer(name, **hp),
                             build_rules(tol=1e-8, max_iter=300), backend=make_backend("numpy"))
            except Uncertifiable as refusal:  # honest: f* cannot vouch for 1e-8 here
                outcomes.append(("uncertifiable", str(refusal)))
                continue
            assert np.isfinite(result.final_loss)
            assert result.status in ("converged", "max_iter"), result.message
            outcomes.append((result.status, result.suboptimality))
    assert outcomes


def test_separable_classes_without_a_penalty_are_refused_with_the_reason():
    X = np.linspace(-1, 1, 40)[:, None]
    problem = Problem.from_arrays(X, np.where(X[:, 0] > 0, 1, 0), name="separable",
                                  objective="logistic", lam=0.0)
    assert problem.reference.accuracy == np.inf
    with pytest.raises(Uncertifiable, match="Newton.*separable.*raise lam"):
        run(problem, make_optimizer("lbfgs"), SHORT,
            backend=make_backend("numpy"))


def test_labels_zero_one_are_mapped_and_other_labels_named():
    X = np.random.default_rng(0).standard_normal((30, 2))
    zero_one = Problem.from_arrays(X, np.arange(30) % 2, name="t", objective="logistic")
    plus_minus = Problem.from_arrays(X, np.where(np.arange(30) % 2, 1, -1), name="t",
                                     objective="logistic")
    np.testing.assert_array_equal(zero_one.y, plus_minus.y)
    assert zero_one.params["lam"] == pytest.approx(1 / 30)
    with pytest.raises(InputError, match=r"label column 'y0' must be binary .* 3 values: 0, 1, 2"):
        Problem.from_arrays(X, np.arange(30) % 3, name="t", objective="logistic")
    with pytest.raises(InputError, match="only the value 1"):
        Problem.from_arrays(X, np.ones(30), name="t", objective="logistic")
    with pytest.raises(InputError, match="lam must be a finite number >= 0"):
        Problem.from_arrays(X, np.ones(30), name="t", lam=-1.0)


def test_tabular_binary_label_column(tmp_path):
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.standard_normal(50), "b": rng.standard_normal(50),
                          "clicked": rng.integers(0, 2, 50), "grade": rng.integers(1, 6, 50)})
    path = tmp_path / "d.csv"
    frame.to_csv(path, index=False)
    problem = make_problem("tabular", path=path, features=["a", "b"], labels=["clicked"],
                           objective="logistic")
    assert problem.objective == "logistic" and set(np.unique(problem.y)) == {-1.0, 1.0}
    with pytest.raises(InputError, match=r"label column 'grade' must be binary .* found 5 "
                                         r"values: 1, 2, 3, 4, 5"):
        make_problem("tabular", path=path, features=["a", "b"], labels=["grade"],
                     objective="logistic")


def test_least_squares_only_methods_refuse_logistic_problems():
    problem = logistic(kappa=10.0)
    for name in ("closed-form", "cgls", "scipy-lsqr"):
        with pytest.raises(InputError, match="least squares only"):
            run(problem, make_optimizer(name), SHORT,
                backend=make_backend("numpy"))
    with pytest.raises(InputError, match="ridge"):
        run(ridge(), make_optimizer("closed-form"), SHORT,
            backend=make_backend("numpy"))
    with pytest.raises(InputError, match="exact line search needs a quadratic"):
        run(problem, make_optimizer("lbfgs", line_search="exact"), SHORT,
            backend=make_backend("numpy"))
    with pytest.raises(InputError, match="no 'gram' formulation"):
        run(problem, make_optimizer("lbfgs"), SHORT,
            backend=make_backend("numpy", formulation="gram"))


def test_the_logistic_reference_round_trips_through_the_cache(tmp_path):
    from study.regression.measure import load_problem
    from study.regression.spec import RunSpec

    spec = RunSpec("s", "synthetic-logistic", {"n": 300, "d": 3}, "lbfgs", {}, "numpy", {},
                   "float64", "zeros", 0, 0)
    first, again = load_problem(spec, tmp_path), load_problem(spec, tmp_path)
    assert again.objective == "logistic" and again.lam == pytest.approx(1 / 300)
    assert again.reference.to_dict() == first.reference.to_dict()
    assert again.reference.method == "newton"


def test_the_logistic_report_section_says_how_f_star_and_the_steps_were_made(tmp_path):
    from test_plots_report import make_tables

    from study.regression import labels, report

    runs, _ = make_tables()
    runs = runs.assign(dataset="synthetic-logistic", nfev=runs["iterations"] * 2 + 1,
                       ngev=runs["iterations"] * 2 + 1, f_star=0.5, f_star_accuracy=1e-17,
                       kappa=12.0, study="logistic",
                       hp_line_search=np.where(runs["optimizer"] == "lbfgs", "wolfe", None),
                       hp_step=np.where(runs["optimizer"] == "gd", "armijo", None))
    assert labels.is_logistic(runs) and not labels.is_logistic(make_tables()[0])
    results = type("Results", (), {"runs": runs, "folder": tmp_path / "logistic"})()
    text = "\n".join(str(block.content) for block in report.section(results, tmp_path))
    assert "Newton's method" in text and "f* = 0.5 (relative accuracy 1e-17)" in text
    assert "L-BFGS needed 2.00 loss-and-gradient evaluations per iteration" in text
    table = report.evaluation_table(runs)
    lbfgs = table[table["configuration"].str.startswith("lbfgs")].iloc[0]
    assert lbfgs["step rule"] == "wolfe line search" and lbfgs["loss evaluations"] == "17"
    assert set(table[table["configuration"].str.startswith("gd")]["step rule"]) == {"step armijo"}


@pytest.mark.parametrize("args, message", [
    (["--labels", "grade"], "label column 'grade' must be binary"),
    (["--labels", "clicked", "--optimizer", "closed-form"], "least squares only"),
    (["--labels", "clicked", "--formulation", "gram"], "no 'gram' formulation"),
])
def test_bad_logistic_input_on_the_command_line_exits_2_with_one_line(tmp_path, capsys, args,
                                                                      message):
    from study.__main__ import main

    rng = np.random.default_rng(0)
    data = tmp_path / "data"
    data.mkdir()
    pd.DataFrame({"a": rng.standard_normal(40), "clicked": rng.integers(0, 2, 40),
                  "grade": rng.integers(1, 4, 40)}).to_csv(data / "d.csv", index=False)
    out = tmp_path / "out" / "run.parquet"
    code = main(["regress", "--dataset", "tabular", "--path", str(data / "d.csv"),
                 "--features", "a", "--data-param", "objective=logistic", *args,
                 "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not out.parent.exists() or not list(out.parent.iterdir())


MIXED = """
name = "mixed"
[[datasets]]
name = "synthetic"
n = 300
[[datasets]]
name = "synthetic-logistic"
n = 300
[[optimizers]]
name = "lbfgs"
[[optimizers]]
name = "METHOD"
[[backends]]
name = "numpy"
formulation = ["data", "gram"]
"""


GRAM_OUT = '[[exclude]]\ndataset = "synthetic-logistic"\nformulation = "gram"\n'


@pytest.mark.parametrize("method, exclude, named, fix", [
    ("gd", "", "no 'gram' formulation", GRAM_OUT),
    ('lbfgs"\nline_search = "exact', GRAM_OUT,
     "exact line search needs a quadratic objective",
     '[[exclude]]\ndataset = "synthetic-logistic"\nline_search = "exact"\n'),
    ("closed-form", GRAM_OUT, "closed-form solves least squares only",
     '[[exclude]]\ndataset = "synthetic-logistic"\noptimizer = "closed-form"\n'),
])
def test_a_grid_pairing_logistic_data_with_what_cannot_solve_it_is_refused_before_running(
        method, exclude, named, fix):
    import tomllib

    from study.sweep.grid import ConfigError, parse_study

    text = MIXED.replace("METHOD", method)
    with pytest.raises(ConfigError, match=named):
        parse_study(tomllib.loads(text + exclude), "mixed.toml")
    specs = parse_study(tomllib.loads(text + exclude + fix), "mixed.toml").specs
    assert {(s.dataset, s.backend_options.get("formulation")) for s in specs} >= {
        ("synthetic", "gram"), ("synthetic-logistic", "data")}


def test_ridge_data_with_a_plain_least_squares_method_is_refused_before_running():
    """The same checks as a run's, so every pair a run would refuse is refused by the config."""
    import tomllib

    from study.sweep.grid import ConfigError, parse_study

    text = MIXED.replace('name = "synthetic-logistic"\nn = 300', 'name = "synthetic"\nn = 200\n'
                         'lam = 0.1').replace("METHOD", "scipy-lsqr").replace(
        'formulation = ["data", "gram"]', "")
    with pytest.raises(ConfigError, match="plain least squares only"):
        parse_study(tomllib.loads(text), "ridge.toml")
