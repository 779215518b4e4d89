"""The report's "why it took that long": every configuration that did not reach the target set
against its method's classical bound (optimizers/bounds.py), read from the rows' conditioning
and prediction columns. Sentences of predictions, said to be predictions; rows written before
those columns existed get none and still report."""

from __future__ import annotations

import numpy as np
import pandas as pd

from datasets.reference import KAPPA_NAMES
from optimizers import bounds
from study.regression.labels import json_column, label_runs
from study.regression.summary import converged, median
from study.sweep.tuning import measured_runs

NEEDED = ("predicted_iterations", "bound", "initial_suboptimality", "kappa_raw")
INTRO = ("Each run beside what its method's classical bound predicts from the problem's "
         "condition number kappa, its starting suboptimality and the target, before any run "
         "(optimizers/bounds.py: GD with step 1/L needs about kappa ln(eps0/eps) iterations, "
         "Nesterov sqrt(kappa) ln(2 eps0/eps), CG and LSQR sqrt(kappa)/4 ln(4 eps0/eps); "
         "L-BFGS has no rate bound, only GD's as a ceiling; Adadelta and Adam none). These "
         "are predictions, not measurements; a run is flagged slower than its bound past "
         f"{bounds.SLOWER_FACTOR:g}x its iterations. The {KAPPA_NAMES}.")


def _median(group: pd.DataFrame, column: str) -> float:
    return median(group[column]) if column in group else float("nan")


def _configurations(runs: pd.DataFrame, left_out: tuple[str, ...]):
    """(data set, configuration) -> its measured rows with predictions, the statuses `left_out`
    aside; none where no row has a prediction."""
    runs = measured_runs(runs)
    runs = runs[~runs["status"].isin(left_out)]
    if runs.empty or not all(c in runs for c in NEEDED) or runs["bound"].isna().all():
        return []
    return label_runs(runs).groupby(["data", "config"], sort=True)


def missed_target_sentences(runs: pd.DataFrame) -> list[str]:
    """One sentence per (data set, configuration) whose runs did not reach the target in the
    median: kappa, the bound's iterations and their time at the measured seconds per
    iteration, and what standardizing or the diagonal step would make of them."""
    if "stop_tol" not in runs:
        return []
    out = []
    for (data, config), group in _configurations(runs, ("skipped", "uncertifiable")):
        if converged(group).mean() >= 0.5 or group["stop_tol"].isna().all():
            continue
        tol = float(group["stop_tol"].dropna().iloc[0])
        ended = (f"ended {', '.join(f'{s}={n}' for s, n in group['status'].value_counts().items())}"
                 f" after {_median(group, 'iterations'):.0f} iterations at suboptimality "
                 f"{_median(group, 'suboptimality'):.3g} (median)")
        head = f"{config} on {data} did not reach {tol:g}: it {ended}. " + _rose(group)
        bound = group["bound"].dropna()
        if group["predicted_iterations"].isna().all():
            why = bound.iloc[0] if len(bound) else "no bound"
            out.append(head + f"No such bound applies to {group['optimizer'].iloc[0]} ({why})" + (
                "." if _rose(group) else ": the measurements are all there is."))
            continue
        prediction = _read(group)
        if prediction.iterations is None:
            out.append(head + f"No bound predicts it ({prediction.bound}).")
            continue
        out.append(head + "Prediction: " + bounds.explain(
            "", prediction, _median(group, "initial_suboptimality"), tol,
            kappa_standardized=_median(group, "kappa_standardized"),
            kappa_diag_step=_median(group, "kappa_diag_step"),
            standardized=bool(json_column(group.iloc[0], "dataset_params").get("standardize")),
            seconds_per_iteration=_median(group, "seconds_per_iteration")))
    return out


# A final suboptimality this many times the best on the way is a loss that rose (not noise)
ROSE = 1.1


def _rose(group: pd.DataFrame) -> str:
    """What a non-monotone run's rows say (best_suboptimality above the final one), or ''."""
    best, final = _median(group, "best_suboptimality"), _median(group, "suboptimality")
    if not best * ROSE < final:
        return ""
    return (f"Its suboptimality is not monotone: down to {best:.3g} on the way, it ended at "
            f"{final:.3g} (medians), so more iterations need not bring it closer. ")


def slower_sentences(runs: pd.DataFrame) -> list[str]:
    """The runs that took more than SLOWER_FACTOR times their bound: findings, each named."""
    if "slower_than_bound" not in runs:
        return []
    slow = runs[runs["slower_than_bound"].astype(object).eq(True)]
    if slow.empty:
        return []
    labelled = label_runs(slow)
    return [f"{config} on {data}: {len(group)} run(s) took more than "
            f"{bounds.SLOWER_FACTOR:g}x the iterations of their bound (median "
            f"{_median(group, 'iterations'):.0f} against "
            f"{bounds.count(_median(group, 'predicted_iterations'))}): a finding (a bug, a bad "
            "step or rounding), not a property of the method."
            for (data, config), group in labelled.groupby(["data", "config"], sort=True)]


def _kappa(group: pd.DataFrame, column: str) -> float:
    """The median kappa a bound read (`bounds.READS`): kappa_gd is the rows' L/mu."""
    if column != "kappa_gd":
        return _median(group, column)
    L, mu = _median(group, "hessian_L"), _median(group, "hessian_mu")
    return L / mu if mu > 0 else (float("inf") if L > 0 else float("nan"))


def _read(group: pd.DataFrame) -> bounds.Prediction:
    """The rows' own prediction (their bound and median predicted iterations, at the median
    kappa that bound reads), not one chosen again: a row's hyperparameters hold only what its
    config named (a textbook step left to its default is not there)."""
    name = group["bound"].dropna()
    method = bounds.named(name.iloc[0]) if len(name) else None
    iterations = _median(group, "predicted_iterations")
    if method is None or not np.isfinite(iterations):
        return bounds.Prediction(None, name.iloc[0] if len(name) else "no bound recorded")
    return bounds.Prediction(iterations, name.iloc[0],
                             kappa=_kappa(group, bounds.READS.get(method, "kappa_gd")),
                             method=method)


def iterations_against_kappa(runs: pd.DataFrame) -> pd.DataFrame:
    """The figure's points: per data set and configuration with a kappa and a target, the
    median iterations, whether the target was reached in the median, and the median eps0;
    `line` is the optimizer with its step (GD's steps have different bounds, or none)."""
    if "stop_tol" in runs:
        runs = runs[runs["stop_tol"].notna()]  # a run without a target has no iterations to it
    rows = []
    for (data, config), group in _configurations(runs, ("skipped", "uncertifiable", "failed")):
        kappa = _kappa(group, "kappa_gd")
        if not np.isfinite(kappa):
            continue
        step = json_column(group.iloc[0], "hyperparameters").get("step")
        rows.append({"data": data, "config": config, "optimizer": group["optimizer"].iloc[0],
                     "line": group["optimizer"].iloc[0] + (f" step {step}" if step else ""),
                     "method": group["method"].iloc[0], "kappa": kappa,
                     "iterations": _median(group, "iterations"),
                     "reached": bool(converged(group).mean() >= 0.5),
                     "eps0": _median(group, "initial_suboptimality"),
                     "tol": _median(group, "stop_tol") if "stop_tol" in group else np.nan,
                     "bound": group["bound"].dropna().iloc[0] if group["bound"].notna().any()
                     else None})
    return pd.DataFrame(rows)
