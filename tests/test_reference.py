"""The certified reference f*: its floor, refusals, the reference-error alarm and its cache."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from tolerances import lstsq_forward_error

import datasets.problem
from convergence_study.errors import Uncertifiable
from datasets import make_problem
from datasets.problem import Problem
from datasets.reference import Reference
from optimizers import build_rules, make_optimizer, run
from study.__main__ import main
from study.frameworks.registry import make_backend
from study.regression.measure import load_problem
from study.regression.spec import RunSpec
from study.regression.summary import format_summary, summarize
from study.sweep.grid import load_study
from study.sweep.runner import run_study

pytestmark = pytest.mark.numerical


def fit(problem, name="lbfgs", tol=1e-8, **hyperparameters):
    return run(problem, make_optimizer(name, **hyperparameters),
               build_rules(tol=tol, max_iter=2000), backend=make_backend("numpy"))


def test_a_constant_label_is_an_exact_fit_judged_against_the_floor():
    X = np.random.default_rng(0).standard_normal((200, 3))
    p = Problem.from_arrays(X, np.full(200, 3.0), name="constant")
    # an exact fit leaves residuals of a few eps |y|: f* ~ (eps |y|)^2 ~ 1e-30, the floor
    # eps |y|^2 = 2e-15
    assert p.f_star <= p.reference.floor * 1e-10
    assert p.reference.floor == pytest.approx(np.finfo(float).eps * 9.0)
    for name in ("lbfgs", "closed-form", "scipy-lbfgs"):
        result = fit(p, name)
        assert result.status == "converged", result.message
        # a rounding-level loss over the floor is ~eps; not -1, as f - f* over f* ~ 0 gave
        assert -1e-6 < result.suboptimality <= 1e-8


def test_suboptimality_is_relative_to_f_star_when_it_is_not_small(well_conditioned):
    p = well_conditioned
    assert p.reference.scale == p.f_star > p.reference.floor
    assert p.suboptimality(2 * p.f_star) == pytest.approx(1.0)


def test_the_reference_agrees_with_lstsq_and_reports_kappa_from_singular_values():
    p = make_problem("synthetic", n=3000, d=6, kappa=1e4, seed=2)
    expected = np.linalg.lstsq(p.X, p.y, rcond=None)[0]
    assert np.linalg.norm(p.w_star - expected) <= lstsq_forward_error(p, expected) * \
        np.linalg.norm(expected)
    assert p.reference.kappa_raw == pytest.approx(1e4, rel=1e-12)  # see test_problem
    assert p.reference.accuracy < 1e-14 and p.reference.rank == 6  # refined to ~eps: 2.2e-16


def test_a_tolerance_finer_than_f_star_can_vouch_for_is_refused(well_conditioned, capsys):
    with pytest.raises(Uncertifiable, match="kappa .* after column scaling.*standardize.*--tol"):
        fit(well_conditioned, tol=1e-16)
    assert main(["regress", "--dataset", "synthetic", "--rows", "500", "--tol", "1e-16"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "loosen --tol" in err


def test_rank_deficient_features_are_refused_not_solved():
    X = np.random.default_rng(1).standard_normal((50, 2))
    p = Problem(np.hstack([X, X[:, :1] * 2.0]), np.ones((50, 1)), "dependent")
    assert p.reference.rank == 2 and p.reference.accuracy == np.inf
    with pytest.raises(Uncertifiable, match="rank deficient"):
        fit(p)


def test_a_loss_below_f_star_is_a_reference_error_never_converged(well_conditioned):
    ref = well_conditioned.reference
    wrong = well_conditioned.with_reference(replace(ref, f=ref.f * 1.01))
    result = fit(wrong, "closed-form")
    assert result.status == "reference-error" and "REFERENCE ERROR" in result.message
    table = summarize(pd.DataFrame([{**result.record(), "feed": None, "xla": None}]))
    assert "!! REFERENCE ERROR in 1 run(s)" in format_summary(table)


def test_closed_form_normal_equations_fail_with_a_reason_when_cholesky_does():
    t = np.ones(5)
    t[1] += 2.0**-30  # X^T X rounds to a singular matrix; X itself has full rank
    p = Problem.from_arrays(np.column_stack([np.ones(5), t]), np.arange(5.0), name="tight",
                            intercept=False)
    result = fit(p, "closed-form", solver="normal")
    assert result.status == "failed"
    assert "solve failed" in result.message and "kappa" in result.message


def test_the_reference_round_trips_through_the_cache(tmp_path, monkeypatch):
    spec = RunSpec(study="t", dataset="synthetic", dataset_params={"n": 300, "d": 4},
                   optimizer="lbfgs", hyperparameters={}, backend="numpy", backend_options={},
                   dtype="float64", init="zeros", seed=0, repeat=0)
    first = load_problem(spec, tmp_path)
    calls = []
    monkeypatch.setattr(datasets.problem, "solve", lambda *a: calls.append(a))
    again = load_problem(spec, tmp_path)
    assert calls == []  # solved once per data set, then read back
    assert isinstance(again.reference, Reference)
    assert again.reference.to_dict() == first.reference.to_dict()
    np.testing.assert_array_equal(again.w_star, first.w_star)


def test_a_sweep_records_a_refused_run_as_uncertifiable(tmp_path):
    config = tmp_path / "s.toml"
    config.write_text('name = "u"\n[stopping]\ntol = 1e-16\nmax_iter = 100\n'
                      '[[datasets]]\nname = "synthetic"\nn = 300\n'
                      '[[optimizers]]\nname = "lbfgs"\n[[backends]]\nname = "numpy"\n')
    statuses = run_study(load_study(config), tmp_path / "res", quiet=True)
    assert statuses == {"uncertifiable": 1}
    row = pd.read_parquet(tmp_path / "res" / "runs.parquet").iloc[0]
    assert row["status"] == "uncertifiable" and "loosen --tol" in row["message"]
    assert row["kappa"] >= 1 and row["f_star_accuracy"] > 0 and row["stop_tol"] == 1e-16
    assert "uncertifiable" in format_summary(summarize(tmp_path / "res"))


def test_the_spectrum_stays_finite_where_x_t_x_cannot_resolve_mu():
    x = np.linspace(-8.8, -3.1, 82)  # Filip's range and degree: X^T X is singular in float64
    p = Problem.from_arrays(np.column_stack([x**k for k in range(1, 11)]), np.sin(x), name="f")
    # mu = L / kappa_raw and kappa = L / mu: two roundings
    assert np.isfinite(p.spectrum.kappa) and p.spectrum.kappa == pytest.approx(
        p.reference.kappa_raw, rel=1e-15)
    assert p.reference.kappa < p.reference.kappa_raw


def test_the_report_opens_with_a_reference_error(well_conditioned, tmp_path, monkeypatch):
    from study.regression import report

    monkeypatch.setattr(report, "per_iteration_table", lambda runs: pd.DataFrame())

    ref = well_conditioned.reference
    result = fit(well_conditioned.with_reference(replace(ref, f=ref.f * 1.01)), "closed-form")
    runs = pd.DataFrame([{**result.record(), "feed": None, "xla": None, "device": "cpu"}])
    blocks = report.regression_blocks(runs, tmp_path)
    assert "REFERENCE ERROR" in str(blocks[1])
