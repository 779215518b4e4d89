"""The first question's headline figure: for the original question's data, the best
configuration of each optimizer family on each engine, time to the target (with CI whiskers and
a mark where it did not get there) beside time per iteration, so the reader sees at once why
time per epoch misleads."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from study.figures import FAILED_MARKER, log_axis
from study.paired import typical
from study.regression import style
from study.regression.labels import data_title, headline_data, label_runs, original_data
from study.regression.summary import INSTANCE_COLUMNS, median, time_to_target


def best_choices(labelled: pd.DataFrame,
                 per: tuple[str, ...] = ("data", "family", "engine"),
                 by: str = "family") -> pd.DataFrame:
    """Per data set, family and engine (or per `per`), the configuration with the lowest
    median time to target (when none got there, the one that came closest; ties to the first
    by name), with that median `time` and `closest` suboptimality: one grouping for all of
    them (a groupby per family and engine cost seconds per figure); `by` = "algorithm" keeps
    each algorithm's own best. `labelled`: runs with label_runs' columns."""
    runs = labelled.assign(family=style.families(labelled),
                           time=time_to_target(labelled))
    keys = ["data", "family", *(["algorithm"] if by == "algorithm" else []), "engine", "config"]
    score = runs.groupby(keys).agg(
        time=("time", "median"), closest=("suboptimality", "median")).reset_index()
    score = score.sort_values([*per, "time", "closest"], kind="stable")
    return score.drop_duplicates(list(per)).reset_index(drop=True)


def headline_choices(runs: pd.DataFrame) -> pd.DataFrame:
    """Which algorithm (optimizer and hyperparameters, study.regression.labels) each engine row
    of the headline shows, so that a label never covers two: per family, the algorithm every
    engine that ran the family ran (or, where none is, one that the most ran) that reached the
    target on the most engines, then with the lowest median of its engines' best times; then,
    `apart`, every algorithm of the family that not every engine ran (GD's `diag` step, the
    original program's, exists on NumPy only), at its own best per engine.
    Columns: family, algorithm, engine, config, apart. `runs`: labelled, one data set."""
    best = best_choices(runs, ("data", "family", "algorithm", "engine"), by="algorithm")
    rows = []
    for family, part in best.groupby("family", sort=True):
        engines = part.groupby("algorithm")["engine"].agg(frozenset)
        everywhere = frozenset().union(*engines)
        widest = max(len(e) for e in engines)
        shared = engines[engines.map(len) == widest].index
        score = part[part["algorithm"].isin(shared)].groupby("algorithm")["time"].agg(
            reached=lambda t: -int(np.isfinite(t).sum()), time="median")
        chosen = score.sort_values(["reached", "time"], kind="stable").index[0]
        for row in part.itertuples():
            apart = engines[row.algorithm] != everywhere
            if row.algorithm == chosen or apart:
                rows.append({"family": family, "algorithm": row.algorithm,
                             "engine": row.engine, "config": row.config,
                             "apart": apart and row.algorithm != chosen})
    return pd.DataFrame(rows, columns=["family", "algorithm", "engine", "config", "apart"])


def best_per_family_and_engine(runs: pd.DataFrame, data: str) -> pd.DataFrame:
    """One row per (family, engine) of the algorithm `headline_choices` picks, then the rows
    apart (algorithms not every engine ran), each at its best configuration, with its CI and
    time per iteration."""
    runs = label_runs(runs[runs["status"] != "skipped"])
    runs = runs[runs["data"] == data]
    runs = runs.assign(family=style.families(runs), time=time_to_target(runs))
    rows = []
    for choice in headline_choices(runs).itertuples():
        chosen = runs[(runs["config"] == choice.config) & (runs["family"] == choice.family)]
        center = typical(chosen, INSTANCE_COLUMNS, "time")
        per_iter = chosen["seconds_per_iteration"].astype("float64").dropna()
        rows.append({
            "family": choice.family, "algorithm": choice.algorithm, "engine": choice.engine,
            "config": choice.config, "apart": choice.apart,
            "runs": len(chosen),
            "time": center.value, "low": center.low, "high": center.high,
            "per_iteration": median(per_iter),
            "per_iteration_low": float(per_iter.quantile(0.25)),  # NaN without values
            "per_iteration_high": float(per_iter.quantile(0.75)),
            "iterations": median(chosen["iterations"]),
            "statuses": ", ".join(f"{s} {n}" for s, n in chosen["status"].value_counts().items()),
            "closest": median(chosen["suboptimality"]),
        })
    rows.sort(key=lambda r: (bool(r["apart"]), r["family"], r["algorithm"],
                             style.engine_rank(r["engine"])))
    return pd.DataFrame(rows)


def headline_label(row) -> str:
    """A headline row's name: the algorithm and the engine, and for a row apart, that the
    other engines did not run it."""
    return f"{row.algorithm}  ·  {row.engine}" + ("  (only here)" if row.apart else "")


def figure_headline(runs: pd.DataFrame, tol: float | None):
    data = headline_data(runs)
    table = best_per_family_and_engine(runs, data) if data else pd.DataFrame()
    rows = max(len(table), 1)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 2.4 + 0.3 * rows), sharey=True,
                                      gridspec_kw={"width_ratios": [1.25, 1]})
    if table.empty:
        left.text(0.5, 0.5, "no runs", ha="center")
        return fig
    y = np.arange(len(table))
    finite = table[np.isfinite(table["time"])]
    top = (finite["high"].replace(np.inf, np.nan).max() if len(finite) else 1.0)
    top = top if np.isfinite(top) else finite["time"].max() if len(finite) else 1.0
    edge = top * 4
    for yi, row in zip(y, table.itertuples(), strict=True):
        c = style.color(row.family)
        if np.isfinite(row.time):
            if np.isnan(row.low):  # too few instances for an interval: the value alone
                left.plot(row.time, yi, marker=style.marker(row.engine), color=c, ms=6)
            else:
                high = row.high if np.isfinite(row.high) else edge
                left.errorbar(row.time, yi, xerr=[[row.time - row.low], [high - row.time]],
                              fmt=style.marker(row.engine), color=c, ms=6, capsize=2, lw=1)
        else:
            left.plot(edge, yi, marker=FAILED_MARKER, color=c, ms=8, mew=2)
            left.annotate(f"not reached: {row.statuses}; median subopt. {row.closest:.1e}",
                          (edge, yi), xytext=(-6, 0), textcoords="offset points",
                          ha="right", va="center", fontsize=7, color=c)
        if np.isfinite(row.per_iteration):
            right.errorbar(row.per_iteration, yi,
                           xerr=[[row.per_iteration - row.per_iteration_low],
                                 [row.per_iteration_high - row.per_iteration]],
                           fmt=style.marker(row.engine), color=c, ms=6, capsize=2, lw=1)
    left.set_yticks(y, [headline_label(row) for row in table.itertuples()], fontsize=8)
    if table["apart"].any():  # a line above the rows whose algorithm not every engine ran
        first = int(np.argmax(table["apart"].to_numpy()))
        for ax in (left, right):
            ax.axhline(first - 0.5, color="#999999", lw=0.8, ls="--")
    left.invert_yaxis()
    target = f"{tol:g}" if tol else "its own stopping rule"
    log_axis(left.xaxis)
    left.set_xlabel(f"seconds to suboptimality {target} (typical, 95% interval; log)")
    left.set_title(f"Time to converge ({FAILED_MARKER} = did not get there)", fontsize=10)
    log_axis(right.xaxis)
    right.set_xlabel("seconds per iteration (median, IQR; log)")
    right.set_title("Time per iteration (what per-epoch timing shows)", fontsize=10)
    if original_data(runs):
        subject = f"Q1, {data}"
    else:  # the data set as a heading names it (labels.data_title)
        labelled = label_runs(runs[runs["status"] != "skipped"])
        subject = data_title(labelled[labelled["data"] == data].iloc[0])
    fig.suptitle(f"{subject}: each optimizer on each engine, one algorithm per row (rows below "
                 "the dashed line: run on some engines only)" if table["apart"].any() else
                 f"{subject}: each optimizer on each engine, one algorithm per row", fontsize=11)
    fig.tight_layout()
    return fig
