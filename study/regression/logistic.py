"""The report section of a logistic-regression study (configs/logistic.toml): the regression
section's findings, figures and tables, plus what only this problem has: a Newton reference
instead of a closed form, and line searches whose evaluations cost as much as iterations."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from study.regression.labels import label_runs
from study.report.blocks import Block, fmt_seconds


def is_logistic(runs: pd.DataFrame) -> bool:
    """Every row's data set is a logistic-regression problem."""
    objective = runs.get("data_objective", pd.Series(index=runs.index, dtype=object))
    return bool(len(runs)) and bool(((runs["dataset"] == "synthetic-logistic")
                                     | (objective == "logistic")).all())


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


def section(results, figures: Path) -> list[Block]:
    from study.regression.report import regression_blocks, stopping_sentence

    runs = results.runs
    wall = runs[(runs["status"] != "skipped") & runs["optimizer"].eq("lbfgs")]
    blocks = [Block("h2", "Logistic regression: L-BFGS with a strong-Wolfe line search"),
              Block("p", reference_sentence(runs[runs["status"] != "skipped"])),
              Block("p", "L-BFGS uses the strong-Wolfe line search of Nocedal and Wright "
                         "(Algorithms 3.5 and 3.6, cubic interpolation, c1 = 1e-4, c2 = 0.9), "
                         "the same code in the NumPy loop and inside the fused tf.while_loop; "
                         "GD uses 1/L from the global bound lambda_max(X^T X)/4n + lam, or "
                         "Armijo backtracking. Evaluation counts include every trial point.")]
    if len(wall):
        ratio = (wall["nfev"] - 1) / wall["iterations"].where(wall["iterations"] > 0)
        blocks.append(Block("p", f"L-BFGS needed {ratio.median():.2f} loss-and-gradient "
                                 f"evaluations per iteration in the median (over {len(wall)} "
                                 f"runs; {fmt_seconds(wall['seconds'].median())} median loop)."))
    blocks += regression_blocks(runs, figures, title="Logistic regression: time to convergence",
                                study=results.folder.name)
    blocks.append(Block("h3", "Iterations and evaluations"))
    blocks.append(Block("table", evaluation_table(runs), "every configuration"))
    blocks.append(Block("p", stopping_sentence(runs)))
    return blocks
