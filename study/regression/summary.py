"""Per-configuration summaries: the typical time to target over instances with its 95% interval
(study.paired: a geometric mean with a t interval; the median where some run failed), and each
configuration against its data set's fastest, paired on the instances both ran.

A run that did not converge counts as infinite time, never as a missing row, so a method that
fails half the time cannot look fast.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from study.paired import compare, typical
from study.regression.labels import label_runs, with_instances, with_keys
from study.sweep.tuning import measured_runs

ALARMS = {"reference-error": "reference_errors", "uncertifiable": "uncertifiable"}
# what a summary row shows of its configuration; runs are grouped by their spec's whole
# configuration (`config_key`, study.sweep.grid.configurations)
CONFIG_COLUMNS = ("dataset", "dataset_params", "optimizer", "hyperparameters", "tuning",
                  "backend", "device", "feed", "xla", "formulation", "dtype", "init", "stopping")
DATA_COLUMNS = ["dataset", "dataset_params"]
# What a comparison holds fixed within one data set: the draw (seed) and the starting point;
# `instance_seed` (labels.with_instances) is the seed where it draws another one, so that the
# seeds of a file data set from zeros count as repeats of one instance.
INSTANCE_COLUMNS = ["dataset", "dataset_params", "instance_seed", "init"]
READ_COLUMNS = ("config_key", "run_id", "seed", "repeat", "status", "target_reached", "noisy",
                "time_to_target", "total_to_target", "setup_seconds", "iterations",
                "predicted_iterations", "seconds_per_iteration")


def time_to_target(runs: pd.DataFrame, column: str = "seconds") -> pd.Series:
    """Seconds to the target for converged runs, infinity for every other status."""
    return runs[column].where(converged(runs), np.inf).astype(float)


def converged(runs: pd.DataFrame) -> pd.Series:
    """Status converged, and the float64 check of the target agrees where one was made."""
    ok = runs["status"] == "converged"
    if "target_reached" in runs:
        ok &= runs["target_reached"].astype(object).fillna(True).astype(bool)
    return ok


def summarize(runs) -> pd.DataFrame:
    """One row per configuration, from a runs table or a results folder (tuning runs, on
    another seed with a short budget, left out)."""
    if isinstance(runs, (str, Path)):
        runs = pd.read_parquet(Path(runs) / "runs.parquet")
    runs = with_instances(measured_runs(runs).copy())
    if runs.empty:
        return pd.DataFrame()
    runs = runs.assign(**{c: np.nan for c in ("seconds", "setup_seconds", "iterations",
                                              "seconds_per_iteration", "predicted_iterations")
                          if c not in runs})  # predicted: the bound's (rows before issue 44: none)
    runs["time_to_target"] = time_to_target(runs)
    runs["total_to_target"] = time_to_target(
        runs.assign(total=runs["seconds"] + runs["setup_seconds"]), "total")
    runs = with_keys(runs)
    shown = [c for c in CONFIG_COLUMNS if c in runs]
    # the columns read below and by study.paired: a group of a few rows copied with all ~160
    # of a row's columns is most of this function's time (1.9 -> 1.2 s for a 300-run study)
    runs = runs[list(dict.fromkeys(c for c in (*shown, *READ_COLUMNS, *INSTANCE_COLUMNS)
                                   if c in runs))]
    rows, groups = [], []
    for key, group in runs.groupby("config_key", sort=True):
        groups.append(group)
        center = typical(group, INSTANCE_COLUMNS, "time_to_target")
        ok = converged(group)
        rows.append({
            **group[shown].head(1).to_dict("records")[0], "config_key": key,
            "runs": len(group),
            "success_rate": float(ok.mean()),
            "median_seconds": float(np.median(group["time_to_target"])),
            "typical_seconds": center.value, "ci_low": center.low, "ci_high": center.high,
            "ci_method": center.method,
            "min_seconds": float(np.min(group["time_to_target"])),
            "noisy_runs": int(group["noisy"].fillna(False).astype(bool).sum())
            if "noisy" in group else 0,
            "median_total_seconds": float(np.median(group["total_to_target"])),
            "median_setup_seconds": median(group["setup_seconds"]),
            "median_iterations": median(group["iterations"]),
            "median_predicted_iterations": median(group["predicted_iterations"]),
            "median_seconds_per_iteration": median(group["seconds_per_iteration"]),
            "statuses": ", ".join(f"{s}={n}" for s, n in group["status"].value_counts().items()),
            "instances": int(group[[c for c in INSTANCE_COLUMNS if c in group]]
                             .drop_duplicates().shape[0]),
            **{column: int((group["status"] == status).sum())
               for status, column in ALARMS.items()},
        })
    table = pd.DataFrame(rows)
    table = pd.concat([table, against_best(table, groups)], axis=1)
    return table.sort_values(["dataset", "dataset_params", "typical_seconds", "ci_high"],
                             ignore_index=True)


def against_best(table: pd.DataFrame, groups: list[pd.DataFrame]) -> pd.DataFrame:
    """Each configuration's time to target over its data set's fastest (lowest typical time,
    then lowest upper bound), paired on their common instances."""
    out = pd.DataFrame(index=table.index, columns=["vs_best", "vs_best_low", "vs_best_high",
                                                   "vs_best_instances", "vs_best_text"])
    instance = [c for c in INSTANCE_COLUMNS if c in groups[0]] if groups else []
    for _, part in table.groupby(DATA_COLUMNS, dropna=False, sort=False):
        best = part.sort_values(["typical_seconds", "ci_high"]).index[0]
        for i in part.index:
            if i == best:
                fastest = ("fastest" if np.isfinite(table.loc[i, "typical_seconds"]) else
                           "none reached the target")
                out.loc[i] = [1.0, 1.0, 1.0, table.loc[i, "instances"], fastest]
                continue
            c = compare(groups[i], groups[best], instance, "time_to_target")
            statuses = set(groups[i]["status"])
            text = ("not run here (skipped)" if statuses == {"skipped"} else
                    "did not reach the target" if np.isinf(c.ratio) else
                    "none reached the target" if np.isinf(table.loc[best, "typical_seconds"])
                    else c.cell())
            out.loc[i] = [c.ratio, c.low, c.high, c.instances, text]
    return out.astype({"vs_best": float, "vs_best_low": float, "vs_best_high": float})


def median(values: pd.Series) -> float:
    """Median of a column whose rows may all be missing (runs refused or failed early, NA in a
    nullable column): NaN then, never float(pd.NA)'s TypeError."""
    return float(values.astype("float64").median())


def format_summary(table: pd.DataFrame) -> str:
    """A compact text table for the terminal, then a loud line for each alarm status."""
    if table.empty:
        return "(no runs)"
    return "\n".join([_format_table(table), *alarm_lines(table)])


def alarm_lines(table: pd.DataFrame) -> list[str]:
    """Runs whose f* was contradicted, or too coarse to judge them: never silent."""
    lines = []
    errors = int(table.get("reference_errors", pd.Series(dtype=int)).sum())
    if errors:
        lines.append(f"!! REFERENCE ERROR in {errors} run(s): a final loss fell below the "
                     "certified f* by more than its accuracy, so f* is wrong and these "
                     "configurations cannot be judged; see the runs' messages")
    refused = int(table.get("uncertifiable", pd.Series(dtype=int)).sum())
    if refused:
        lines.append(f"note: {refused} run(s) uncertifiable: f* is not accurate enough for "
                     "their tol (counted as not converged); standardize or loosen tol")
    return lines


def _format_table(table: pd.DataFrame) -> str:
    def number(x, spec: str = ".3g"):
        return "-" if np.isnan(x) else format(x, spec)  # inf as "inf"

    labels = label_runs(table)
    view = pd.DataFrame({
        "dataset": labels["data"], "method": labels["method"],
        "backend": table["backend"] + "/" + table["device"].astype(object).fillna("cpu")
        + table["feed"].map(lambda f: f"/{f}" if isinstance(f, str) else "")
        + table["xla"].map(lambda x: "+xla" if x is True else "")
        + (table["formulation"].map(lambda f: "+gram" if f == "gram" else "")
           if "formulation" in table else ""),
        "dtype": table["dtype"],
        "ok": table["success_rate"].map(lambda r: f"{r:.0%}"),
        "typical s [95% CI]": [f"{number(m)} [{number(lo)}, {number(hi)}]" for m, lo, hi in
                               zip(table["typical_seconds"], table["ci_low"], table["ci_high"],
                                   strict=True)],
        "min s": table["min_seconds"].map(number),
        "noisy": table["noisy_runs"],
        "iters": table["median_iterations"].map(lambda x: number(x, ".0f")),
        "ms/iter": (table["median_seconds_per_iteration"] * 1e3).map(number),
        "vs fastest (paired) [95% CI]": table["vs_best_text"],
        "statuses": table["statuses"],
    })
    return view.to_string(index=False)

