import numpy as np
import pandas as pd
import pytest
from tolerances import lstsq_forward_error

from datasets import InputError, make_problem
from datasets.eve import FEATURES, LABEL, eve_frame
from datasets.problem import Problem

pytestmark = pytest.mark.numerical


def test_gradient_matches_finite_differences(well_conditioned):
    p = well_conditioned
    w = np.random.default_rng(0).standard_normal((p.d, p.k))
    g = p.grad(w)
    h = 1e-6  # central differences are exact on a quadratic: only the rounding eps f / h ~ 1e-9
    numeric = np.zeros_like(w)
    for j in range(p.d):
        e = np.zeros_like(w)
        e[j] = h
        numeric[j] = (p.loss(w + e) - p.loss(w - e)) / (2 * h)
    np.testing.assert_allclose(g, numeric, rtol=1e-6, atol=1e-8)


def test_closed_form_optimum_matches_lstsq():
    p = make_problem("eve", rows=5000, seed=3)
    expected = np.linalg.lstsq(p.X, p.y, rcond=None)[0]
    # raw eve: cond(X) 408, so lstsq is good to ~1.7e-13 (norm-wise; a small component of w
    # may be off by more relative to itself, hence no elementwise rtol)
    assert np.linalg.norm(p.w_star - expected) <= lstsq_forward_error(p, expected) * \
        np.linalg.norm(expected)
    # w* rounded to float64 leaves a gradient up to eps kappa_raw |grad(0)| = 4e-11 here
    assert np.linalg.norm(p.grad(p.w_star)) < 1e-8 * np.linalg.norm(p.grad(np.zeros_like(expected)))
    # f is stationary at w*, so the float64 loss at lstsq's w differs from f* only by its own
    # rounding, a few eps (|X||w| + |y|) / |Xw - y| ~ 1e-15 here
    assert p.f_star == pytest.approx(np.mean((p.X @ expected - p.y) ** 2), rel=1e-12)


def test_synthetic_condition_number_is_exact():
    for kappa in (10.0, 1e4):
        p = make_problem("synthetic", n=3000, d=6, kappa=kappa, seed=2)
        # X is formed from its SVD in float64, which moves sigma_min by ~eps sigma_max: kappa
        # is off by ~2 eps sqrt(kappa) (4e-14 at 1e4) and L by ~n eps (7e-13) in forming X^T X
        assert p.spectrum.kappa == pytest.approx(kappa, rel=1e-12)
        assert p.spectrum.L == pytest.approx(1.0, rel=1e-10)


def test_eve_is_deterministic_heavy_tailed_and_badly_conditioned_raw():
    a, b = eve_frame(20_000, seed=5), eve_frame(20_000, seed=5)
    pd.testing.assert_frame_equal(a, b)
    assert not a.equals(eve_frame(20_000, seed=6))
    assert list(a.columns) == [*FEATURES, LABEL]
    assert (a[list(FEATURES)] >= 0).all().all()
    assert a[LABEL].between(0, 167).all()
    jumps = a["ship_jumps"]
    assert jumps.max() > 10 * jumps.median()  # heavy tail
    assert a["ship_jumps"].mean() > 20 * a["pod_kills"].mean()  # very different scales
    assert a[list(FEATURES)].corr().min().min() > 0.2  # correlated
    raw = make_problem("eve", rows=20_000)
    standardized = make_problem("eve", rows=20_000, standardize=True)
    assert raw.spectrum.kappa > 100 * standardized.spectrum.kappa
    # same column space up to the rounding of the z-scores, a few eps |X||w| / |r| ~ 1e-15
    assert raw.f_star == pytest.approx(standardized.f_star, rel=1e-12)


def test_intercept_column_and_several_labels():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 3))
    Y = rng.standard_normal((50, 2))
    p = Problem.from_arrays(X, Y, name="t")
    assert p.X.shape == (50, 4) and p.k == 2 and np.all(p.X[:, 0] == 1)
    assert p.feature_names[0] == "intercept"
    assert p.grad(p.w_star).shape == (4, 2)


@pytest.mark.parametrize("features, message", [
    (np.array([[1.0, np.nan], [2.0, 3.0], [4, 5], [6, 8]]), "column 'x1' has 1 non-finite"),
    (np.array([[1.0, np.inf], [2.0, 3.0], [4, 5], [6, 8]]), "non-finite"),
    (np.array([[1.0, 7.0], [2.0, 7.0], [4, 7], [6, 7]]), "column 'x1' is constant"),
    (np.array([[1.0, 1.0], [2.0, 2.0], [4, 4], [6, 6]]), "are identical"),
    (np.array([[1.0, 2.0], [2.0, 4.0], [4, 8], [6, 12]]), "collinear"),
    (np.zeros((0, 2)), "zero rows"),
    (np.array([[1.0, 2.0]]), "1 rows but 3 coefficients"),
    (np.array([["a", "b"], ["c", "d"], ["e", "f"], ["g", "h"]]), "must be numeric"),
    (np.array([[True, False]] * 4), "must be numeric"),
])
def test_bad_arrays_are_rejected_with_a_named_reason(features, message):
    labels = np.arange(len(features), dtype=float)
    with pytest.raises(InputError, match=message):
        Problem.from_arrays(features, labels, name="bad")


@pytest.mark.parametrize("name, params, message", [
    ("nope", {}, "unknown dataset 'nope'; allowed: eve, synthetic, synthetic-logistic, tabular"),
    ("eve", {"kappa": 3}, "dataset 'eve' has no parameter 'kappa'"),
    ("eve", {"rows": 0}, "rows must be an integer >= 1, got 0"),
    ("synthetic", {"kappa": 0.5}, "kappa must be a finite number >= 1"),
    ("synthetic", {"n": 3, "d": 5}, "n=3 is smaller than d=5"),
])
def test_bad_dataset_parameters(name, params, message):
    with pytest.raises(InputError, match=message):
        make_problem(name, **params)


@pytest.mark.parametrize("objective", ["least-squares", "logistic"])
@pytest.mark.parametrize("start", [0.0, 3.0])
def test_iteration_magnitudes_bound_what_the_first_iteration_forms(objective, start):
    """The overflow check's bounds hold: the squared gradient norm and the curvature along the
    gradient at a start point of that size never exceed them (heavy-tailed columns of mixed
    scales, so the bound is exercised, not just the typical case)."""
    rng = np.random.default_rng(7)
    X = rng.standard_t(2, size=(400, 4)) * np.array([1.0, 1e3, 1e-2, 50.0])
    labels = ((X @ np.array([1.0, 1e-3, 5.0, 0.1]) + rng.standard_normal(400) > 0).astype(float)
              if objective == "logistic" else X @ rng.standard_normal(4) * 7)
    problem = Problem.from_arrays(X, labels, name="t", objective=objective)
    w0 = np.full((problem.d, 1), start) * np.where(rng.random((problem.d, 1)) < 0.5, -1, 1)
    g = problem.grad(w0)
    exact = {"squared gradient norm": np.log10(float(np.vdot(g, g))),
             "curvature along the gradient": np.log10(float(np.vdot(
                 g, problem.hessian_product(w0, g))))}
    bounds = problem.iteration_magnitudes(start)
    scaled = problem.start_magnitudes(w0)  # computed on scaled data: the same values
    for what, value in exact.items():
        assert value <= bounds[what]
        # lam's share (logistic: lam = 1/n) is left out of the scaled values: 1e-3 in log10
        assert scaled[what] == pytest.approx(value, abs=1e-3 if objective == "logistic" else 1e-9)


def test_heavy_tails_past_the_bound_are_judged_by_their_values():
    """float32 data whose peak-based bound overflows but whose start-point values fit (a
    single huge entry among ordinary ones) are accepted; the same data scaled up are refused."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((2000, 3))
    X[0, 1] = 1e9  # one outlier: the bound takes it for every row
    y = X @ np.array([1.0, 0.0, 2.0]) + rng.standard_normal(2000)
    problem = Problem.from_arrays(X, y, name="tails")
    assert max(problem.iteration_magnitudes().values()) > np.log10(np.finfo(np.float32).max)
    problem.check_dtype_range(np.float32)  # accepted: the values themselves fit
    with pytest.raises(InputError, match="at the start point is about 1e"):
        Problem.from_arrays(X * 1e50, y * 1e50, name="tails").check_dtype_range(np.float64)
