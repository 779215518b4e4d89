"""What only a logistic-regression study (configs/logistic.toml) reports beside the regression
section's findings, figures and tables: a Newton reference instead of a closed form, and line
searches whose evaluations cost as much as iterations (its section: study.regression.report)."""

from __future__ import annotations

import json

import pandas as pd

from datasets import problem_kind
from study.regression.labels import label_runs


def is_logistic(runs: pd.DataFrame) -> bool:
    """Every row's data set is a logistic-regression problem (as its declaration says)."""

    if not len(runs):
        return False
    params = runs.get("dataset_params", pd.Series("{}", index=runs.index))
    return all(problem_kind(name, json.loads(p) if isinstance(p, str) else {}).objective
               == "logistic" for name, p in zip(runs["dataset"], params, strict=True))


def evaluation_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per data set and configuration: median iterations and loss/gradient evaluations (a line
    search's trial points included), and which step rule ran."""
    runs = runs[runs["status"] != "skipped"]
    labels = label_runs(runs)
    frame = runs.assign(config=labels["config"].to_numpy(), data=labels["data"].to_numpy(),
                        rule=[step_rule(row) for _, row in runs.iterrows()],
                        reached=runs["target_reached"].map({True: 1.0, False: 0.0}))
    table = frame.groupby(["data", "config"], sort=True).agg(
        rule=("rule", "first"), runs=("run_id", "size"),
        iterations=("iterations", "median"), nfev=("nfev", "median"),
        ngev=("ngev", "median"), converged=("reached", "mean")).reset_index()
    return pd.DataFrame({
        "data set": table["data"], "configuration": table["config"], "step rule": table["rule"],
        "runs": table["runs"], "converged": table["converged"].map(lambda r: f"{r:.0%}"),
        "iterations": table["iterations"].map(lambda x: f"{x:.0f}"),
        "loss evaluations": table["nfev"].map(lambda x: f"{x:.0f}"),
        "gradient evaluations": table["ngev"].map(lambda x: f"{x:.0f}"),
    })


def step_rule(row) -> str:
    """How the optimizer of a row chooses its step."""
    if row["optimizer"] == "gd":
        return f"step {row.get('hp_step')}"
    if row["optimizer"] == "lbfgs":
        return f"{row.get('hp_line_search')} line search"
    if row["optimizer"] == "scipy-lbfgs":
        return "SciPy's own (More-Thuente)"
    return "its own rule"


def reference_sentence(runs: pd.DataFrame) -> str:
    """What f* is worth here: the Newton reference's accuracy and conditioning per data set."""
    labels = label_runs(runs)
    parts = []
    for data, part in runs.assign(data=labels["data"].to_numpy()).groupby("data", sort=True):
        parts.append(f"{data}: f* = {part['f_star'].iloc[0]:.12g} (relative accuracy "
                     f"{part['f_star_accuracy'].max():.1g}), Hessian kappa at w* "
                     f"{part['kappa'].iloc[0]:.3g}")
    return ("f* is Newton's method in float64 run until its decrement is at machine level, "
            "certified with an extended-precision loss and gradient (datasets/logistic.py); "
            + "; ".join(parts) + ".")
