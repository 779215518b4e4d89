"""Every row and every word true (round 6): the bound and kappa arithmetic is total, the
regression figures draw whatever the statuses, and what `regress` and the report say is so."""

import json
import math
import subprocess
import sys

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from optimizers import bounds
from study.regression import figures as plots
from study.regression import prediction
from study.regression.headline import best_per_family_and_engine

KAPPAS = [None, float("nan"), -1.0, 0.0, 0.5, 1.0, 10.0, 1e16, 1e32, 1e40, 1.8e307, 1.7e308,
          float("inf")]
STARTS = [float("nan"), float("inf"), -1e-3, 0.0, 1e-300, 1.0, 1e300]


BOUNDS = ("gradient_descent", "diagonal_step", "nesterov", "heavy_ball", "conjugate_gradient",
          "lbfgs_first_phase")


@pytest.mark.parametrize("name", BOUNDS)
def test_every_bound_gives_a_number_or_says_why_not(name):
    method = getattr(bounds, name)
    for kappa in KAPPAS:
        for eps0 in STARTS:
            said = method(float("nan") if kappa is None else kappa, eps0, 1e-8)
            if said.iterations is None:
                assert said.bound.startswith("no bound: "), (kappa, eps0, said)
            else:
                assert math.isfinite(said.iterations) and said.iterations >= 0, (kappa, eps0)


def test_a_start_at_the_optimum_needs_no_iteration():
    """All-zero labels (or labels orthogonal to the columns): f(0) = f*, eps0 = 0."""
    for name in BOUNDS:
        assert getattr(bounds, name)(10.0, 0.0, 1e-8).iterations == 0


def test_krylov_and_momentum_bounds_past_kappa_1e32_are_numbers():
    """The rate was ln((sqrt(kappa) + 1)/(sqrt(kappa) - 1)), 0 once the ratio rounds to 1."""
    log = math.log(4 * 100 / 1e-8)
    assert bounds.conjugate_gradient(1e40, 100.0, 1e-8).iterations == pytest.approx(
        1e20 / 4 * log, rel=1e-6)
    assert bounds.heavy_ball(1e40, 100.0, 1e-8).iterations > 1e20
    assert bounds.nesterov(1e40, 100.0, 1e-8).iterations > 1e20


def test_an_overflowed_kappa_is_not_called_singular():
    conditioning = {"kappa_gd": float("inf"), "kappa_raw": float("inf")}
    said = bounds.predict("gd", {"step": "1/L"}, conditioning, 10.0, 1e-8)
    assert said.iterations is None and "float64's range" in said.bound
    assert "singular Hessian" not in said.bound
    unknown = bounds.predict("gd", {"step": "1/L"}, {"kappa_gd": float("nan")}, 10.0, 1e-8)
    assert "cached before it was computed" not in unknown.bound
    # a count past float64 (kappa 1.8e307 times the log) is said, not an OverflowError
    huge = bounds.predict("gd", {"step": "1/L"}, {"kappa_gd": 1.8e307}, 1e4, 1e-8)
    assert huge.iterations is None and huge.bound.startswith("no bound: ")
    assert bounds.explain("gd", huge, 1e4, 1e-8).startswith("gd: no bound: ")


def test_a_textbook_beta_that_rounds_to_one_waits_without_dividing_by_zero():
    from optimizers.momentum import MAX_PATIENCE, MomentumStep

    assert MomentumStep(1e-3, 1.0, "textbook").settling("momentum").patience == MAX_PATIENCE


def _scaled_csv(tmp_path, kind):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 3))
    y = X @ [1.0, 2.0, 3.0] + 0.1 * rng.standard_normal(60)
    if kind == "zeros":
        y = np.zeros(60)
    elif kind == "tiny":  # every column scaled by 3e-154: kappa about 1e307 as run
        X *= 3e-154
        y *= 3e-154
    elif kind == "wide":  # kappa about 1e48
        X[:, 0] *= 1e12
        X[:, 1] *= 1e-12
    path = tmp_path / f"{kind}.csv"
    pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "c": X[:, 2], "y": y}).to_csv(path, index=False)
    return path


@pytest.mark.slow
@pytest.mark.parametrize("kind, optimizer", [
    ("zeros", ["gd", "--step", "1/L"]), ("zeros", ["lbfgs"]), ("tiny", ["gd", "--step", "1/L"]),
    ("wide", ["cgls"]), ("wide", ["scipy-lsmr"]), ("wide", ["momentum"]),
    ("wide", ["nesterov"])])
def test_regress_on_extreme_conditioning_runs_and_says_its_bound(tmp_path, kind, optimizer):
    done = subprocess.run(
        [sys.executable, "-m", "study", "regress", "--dataset", "tabular",
         "--path", _scaled_csv(tmp_path, kind), "--features", "a", "b", "c", "--labels", "y",
         "--optimizer", *optimizer, "--max-iter", "200"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert "against the bound:" in done.stdout


# ---- the report reads the row's bound ----------------------------------------------------------

def _missed_rows(optimizer, bound, predicted, hyperparameters="{}", **extra):
    return pd.DataFrame([{
        "run_id": f"r{seed}", "dataset": "eve", "dataset_params": json.dumps({"rows": 100}),
        "optimizer": optimizer, "hyperparameters": hyperparameters, "backend": "numpy",
        "device": "cpu", "dtype": "float64", "init": "zeros", "seed": seed, "repeat": 0,
        "status": "max_iter", "target_reached": False, "suboptimality": 0.1,
        "iterations": 300, "seconds": 0.3, "seconds_per_iteration": 1e-3, "stop_tol": 1e-8,
        "initial_suboptimality": 100.0, "predicted_iterations": predicted, "bound": bound,
        "kappa_raw": 1e4, "hessian_L": 1.0, "hessian_mu": 1e-4, "kappa_standardized": 5e3,
        "kappa_diag_step": 5e3, "env_host": "h", **extra} for seed in range(3)])


def test_the_report_gives_a_textbook_momentum_row_the_bound_it_carries():
    """A config that names `nesterov` alone leaves '{}' in the row's hyperparameters."""
    runs = _missed_rows("nesterov", bounds.nesterov(1e4, 100.0, 1e-8).bound, 2300.0)
    text = " ".join(prediction.missed_target_sentences(runs))
    assert "none computed for this step" not in text
    assert "at kappa 1e+04" in text and "about 2300 iterations" in text


def test_one_format_for_a_bound_everywhere():
    """2.95e6 and 2.9499e6 read 3e+06 and 2.9e+06 at two significant digits."""
    assert bounds.count(2.95e6) == bounds.count(2.9500001e6) == "2.95e+06"
    assert bounds.count(2300.0) == "2300"
    runs = _missed_rows("lbfgs", bounds.lbfgs_first_phase(1e4, 100.0, 1e-8).bound, 2.95e6)
    assert "about 2.95e+06 iterations" in " ".join(prediction.missed_target_sentences(runs))


def test_a_miss_whose_loss_rose_is_said_not_monotone():
    """Adadelta down to 0.095 on the way and ended at 0.13: not 'all there is'."""
    runs = _missed_rows("adadelta", bounds.NO_BOUND, np.nan, suboptimality=0.13,
                        best_suboptimality=0.095)
    text = " ".join(prediction.missed_target_sentences(runs))
    assert "not monotone: down to 0.095 on the way, it ended at 0.13" in text
    assert "the measurements are all there is" not in text
    steady = _missed_rows("adadelta", bounds.NO_BOUND, np.nan, best_suboptimality=0.1)
    assert "all there is" in " ".join(prediction.missed_target_sentences(steady))


def test_an_underflowed_mu_leaves_the_conditioning_points_out():
    runs = _missed_rows("gd", bounds.gradient_descent(1e4, 100.0, 1e-8).bound, 2e5,
                        hessian_mu=0.0)
    assert prediction.iterations_against_kappa(runs).empty
    assert plots.figure_conditioning(runs) is None


# ---- figures draw whatever the statuses ----------------------------------------------------------

@pytest.mark.parametrize("status", ["error", "timeout", "killed", "diverged", "mixed"])
def test_headline_draws_when_the_first_data_set_has_no_measurement(status):
    from test_plots_report import make_tables

    runs, traces = make_tables()
    runs["iterations"] = runs["iterations"].astype("Int64")  # as a results table holds it
    first = runs["dataset_params"] == runs["dataset_params"].iloc[0]
    runs.loc[first, "status"] = (status if status != "mixed" else
                                 np.resize(["error", "timeout", "diverged"], first.sum()))
    runs.loc[first, "iterations"] = pd.NA
    runs.loc[first, ["seconds", "suboptimality", "seconds_per_iteration"]] = np.nan
    data = prediction.label_runs(runs.loc[first])["data"].iloc[0]
    table = best_per_family_and_engine(runs, data)
    assert table["iterations"].isna().all()
    for make in plots.REGRESSION_FIGURES.values():
        make(runs, traces)  # draws, or returns None: never raises
    plt.close("all")


# ---- what regress prints and records ---------------------------------------------------------

def test_booleans_as_people_write_them():
    from study.cli import key_values

    assert key_values(["a=false", "b=TRUE", "c=False", "d=true ", "e=1"], "--data-param") == {
        "a": False, "b": True, "c": False, "d": True, "e": 1}


@pytest.mark.slow
def test_regress_says_what_it_did_in_true_words(tmp_path):
    """intercept=false accepted; a closed-form miss is not 'stalled'; no 'nan ms/iter'; the
    kappas are named; the coefficients are printed and in the row."""
    out = tmp_path / "run.parquet"
    done = subprocess.run(
        [sys.executable, "-m", "study", "regress", "--dataset", "tabular",
         "--path", _scaled_csv(tmp_path, "wide"), "--features", "a", "b", "c", "--labels", "y",
         "--data-param", "intercept=false", "--optimizer", "closed-form", "--out", out],
        capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    said = done.stdout
    assert ": solved after 1 iteration in" in said and "stalled" not in said
    assert "'as run' of X as given" in said and "'scaled'" in said and "'standardized'" in said
    assert "coefficients of y: a " in said and "intercept" not in said.split("coefficients")[1]
    row = pd.read_parquet(out).iloc[0]
    assert row["status"] == "solved" and row["target_reached"] == False  # noqa: E712
    assert len(json.loads(row["coefficients"])) == 3
    zeros = subprocess.run(
        [sys.executable, "-m", "study", "regress", "--dataset", "tabular",
         "--path", _scaled_csv(tmp_path, "zeros"), "--features", "a", "b", "c", "--labels", "y",
         "--optimizer", "gd", "--step", "1/L"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert zeros.returncode == 0 and "nan ms/iter" not in zeros.stdout, zeros.stderr[-2000:]
    assert "after 0 iterations" in zeros.stdout


def test_the_per_iteration_ratios_say_they_are_paired_not_the_medians_quotient():
    from test_plots_report import CONFIGS, make_tables

    from study.regression.report import original_regression_answer

    runs, _ = make_tables([*CONFIGS, ("gd", {"step": "1/L"}, "tensorflow", "fused", None, 0.02,
                                      100)])
    said = original_regression_answer(runs)
    assert any("tf-fused/cpu took 2x the time per iteration of NumPy" in s for s in said)
    assert any(s.startswith("The ratios above are paired: the geometric mean") for s in said)
    plt.close("all")


def test_the_divergence_rule_is_one_importable_rule():
    from optimizers.stopping import DIVERGENCE_FACTOR, HOST_OPS, Context, Divergence

    assert Divergence().factor == DIVERGENCE_FACTOR == 1e5
    for loss in (1.0, 1e5, 1.0001e5, float("inf"), float("nan")):
        ctx = Context(1, 0.0, loss, 1.0, 1.0, 0.0, 0.0)
        diverged = not math.isfinite(loss) or loss > DIVERGENCE_FACTOR  # the rule, start 1
        assert bool(Divergence().check(HOST_OPS, ctx, ())[0]) == diverged
        assert Divergence().past(loss, 1.0) == diverged  # the same rule on host floats


@pytest.mark.slow
def test_a_sweep_on_kappa_past_1e32_records_runs_not_errors(tmp_path):
    """cgls, scipy-lsqr, momentum and nesterov were every one an `error` row at kappa 1e48."""
    config = tmp_path / "wide.toml"
    config.write_text(f"""name = "regression"
seeds = [0]
run_timeout = 60
[stopping]
tol = 1e-8
max_iter = 200
[[datasets]]
name = "tabular"
path = "{_scaled_csv(tmp_path, 'wide')}"
features = ["a", "b", "c"]
labels = ["y"]
[[optimizers]]
name = "cgls"
[[optimizers]]
name = "scipy-lsqr"
[[optimizers]]
name = "momentum"
[[optimizers]]
name = "nesterov"
[[backends]]
name = "numpy"
""")
    out = tmp_path / "results"
    done = subprocess.run([sys.executable, "-m", "study", "run", config, "--out", out, "--quiet",
                           "--no-adaptive"], capture_output=True, text=True, cwd=tmp_path,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = pd.read_parquet(out / "runs.parquet")
    assert len(rows) == 4 and not rows["status"].isin(["error"]).any(), rows["message"].tolist()
    assert rows["predicted_iterations"].gt(1e20).all()  # sqrt(kappa)/4 ln(...): numbers
