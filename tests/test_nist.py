"""NIST StRD linear least squares: the certified reference f* against the exact optimum.

Truth is the exact least-squares optimum of the float64 data as stored, solved here in rational
arithmetic (Python's fractions). The CSVs hold each polynomial power rounded once to float64,
so on Filip even the exact optimum agrees with NIST's certified values to only ~7.9 digits: the
data set that limit, not the solver. The files live outside the project and are never copied in.
"""

import json
import math
import os
from fractions import Fraction
from functools import cache
from pathlib import Path

import pandas as pd
import pytest

from datasets import make_problem
from study.__main__ import main

NIST = Path(os.environ.get("CONVERGENCE_STUDY_NIST",
                           Path(__file__).resolve().parents[2] / "shared" / "nist"))
pytestmark = [pytest.mark.numerical, pytest.mark.skipif(
    not (NIST / "certified.json").is_file(),
    reason=f"NIST StRD data not found at {NIST} (outside the project)")]
SETS = ("Norris", "Pontius", "NoInt1", "NoInt2", "Filip", "Longley",
        "Wampler1", "Wampler2", "Wampler3", "Wampler4", "Wampler5")
METHODS = {"closed-form-lstsq": ["closed-form", "--solver", "lstsq"],
           "closed-form-normal": ["closed-form", "--solver", "normal"],
           "lbfgs": ["lbfgs"], "scipy-lbfgs": ["scipy-lbfgs"]}
HONEST = ("stalled", "max_iter", "timeout", "diverged", "failed")


@cache
def certified() -> dict:
    return json.loads((NIST / "certified.json").read_text())


def arguments(name: str) -> list[str]:
    entry = certified()[name]
    args = ["--dataset", "tabular", "--path", str(NIST / f"{name}.csv"),
            "--features", *entry["features"], "--labels", "y"]
    return args + ([] if entry["intercept"] else ["--data-param", "intercept=False"])


@cache
def problem(name: str):
    entry = certified()[name]
    return make_problem("tabular", path=str(NIST / f"{name}.csv"), features=entry["features"],
                        labels=["y"], intercept=entry["intercept"])


@cache
def exact(name: str) -> tuple[list[Fraction], Fraction]:
    """The exact optimum (w, f) of the stored float64 data: normal equations in rationals."""
    p = problem(name)
    X = [[Fraction(float(v)) for v in row] for row in p.X]
    y = [Fraction(float(v)) for v in p.y[:, 0]]
    d = p.d
    rows = [[sum(r[a] * r[b] for r in X) for b in range(d)]
            + [sum(r[a] * t for r, t in zip(X, y, strict=True))] for a in range(d)]
    for c in range(d):
        pivot = next(i for i in range(c, d) if rows[i][c] != 0)
        rows[c], rows[pivot] = rows[pivot], rows[c]
        for i in range(d):
            if i != c and rows[i][c] != 0:
                t = rows[i][c] / rows[c][c]
                rows[i] = [u - t * v for u, v in zip(rows[i], rows[c], strict=True)]
    w = [rows[i][d] / rows[i][i] for i in range(d)]
    f = sum((sum(a * b for a, b in zip(r, w, strict=True)) - t) ** 2
            for r, t in zip(X, y, strict=True)) / len(X)
    return w, f


def digits(value, truth, floor=0.0) -> float:
    """Correct significant digits of value against truth (relative to max(|truth|, floor))."""
    error = abs(Fraction(value) - Fraction(truth))
    scale = max(abs(Fraction(truth)), Fraction(floor))
    return math.inf if error == 0 else -math.log10(error / scale)


def loss_digits(name: str, loss: float) -> float:
    return digits(loss, exact(name)[1], problem(name).reference.floor)


def coefficient_error(name: str, w) -> float:
    """||w - exact|| / ||exact||, as the reference's w_accuracy estimates it."""
    truth = exact(name)[0]
    error = sum((Fraction(float(a)) - b) ** 2 for a, b in zip(w[:, 0], truth, strict=True))
    return math.sqrt(error / sum(b * b for b in truth))


@pytest.mark.parametrize("name", SETS)
def test_reference_matches_the_exact_optimum_or_is_refused(name, capsys):
    ref = problem(name).reference
    if ref.refusal(1e-8) is not None:
        assert main(["regress", *arguments(name)]) == 2
        assert "kappa" in capsys.readouterr().err
        return
    # The certificate holds: f* and w* within their own accuracy estimates (x10, for an
    # estimate: the error was 0.006 to 1.0 of them here). Those are ~1e-16 for f* (at least 14
    # digits) and up to 1.6e-10 for w* (Wampler5, Filip), none near the 1e-10 a 1e-8 target
    # needs; no digit count from one machine's run.
    assert 10 ** -loss_digits(name, ref.f) <= 10 * ref.accuracy
    assert coefficient_error(name, ref.w) <= 10 * ref.w_accuracy
    assert ref.accuracy <= 1e-10 and ref.kappa <= ref.kappa_raw


@pytest.mark.parametrize("name", SETS)
def test_reference_against_nist_certified_values(name):
    """What the stored data allow: 7.5 loss digits on Filip, 10 elsewhere. The exact (rational)
    optimum of the float64 files agrees with NIST's values to 7.9 digits on Filip and 13.5 or
    more elsewhere, a property of the files, not of a machine; f* adds its accuracy (~1e-16)."""
    ref = problem(name).reference
    entry = certified()[name]
    assert digits(ref.f, entry["mse_loss"], ref.floor) >= (7.5 if name == "Filip" else 10)


@pytest.mark.slow
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", SETS)
def test_every_method_is_converged_honest_or_refused(name, method, tmp_path, capsys):
    out = tmp_path / "run.parquet"
    code = main(["regress", *arguments(name), "--optimizer", *METHODS[method],
                 "--max-iter", "3000", "--out", str(out)])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if code == 2:
        assert "kappa" in err and len(err.strip().splitlines()) == 1
        return
    assert code == 0, err
    row = pd.read_parquet(out).iloc[0]
    for column in ("kappa", "kappa_raw", "f_star_accuracy", "suboptimality_floor"):
        assert math.isfinite(row[column])
    if row["status"] == "converged":  # within 1e-8 of f*: 8 digits, less rounding and f*'s own
        assert loss_digits(name, row["final_loss"]) >= 7
    elif row["status"] == "solved":  # a direct solve that missed the target says so
        assert method.startswith("closed-form") and "misses the target" in row["message"]
    else:
        assert row["status"] in HONEST, row["message"]


def test_filip_normal_equations_fail_with_a_reason(capsys):
    assert main(["regress", *arguments("Filip"), "--optimizer", "closed-form",
                 "--solver", "normal"]) == 0
    out = capsys.readouterr().out
    assert "failed" in out and "solve failed" in out and "kappa" in out
