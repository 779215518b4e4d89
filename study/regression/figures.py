"""The regression study's figures, drawn from its results tables only.

Each `figure_*` function takes tidy tables and returns a matplotlib Figure, so tests can read
back what was drawn; `draw` saves every figure (study.figures.save).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from study.figures import FAILED_MARKER, save
from study.paired import common_instances
from study.regression.labels import label_runs
from study.regression.summary import CONFIG_COLUMNS, DATA_COLUMNS, INSTANCE_COLUMNS, time_to_target

READ_PASS_LABEL = "one read pass over X"
FEED_ORDER = ("numpy", "tf1", "feed", "resident", "fused", "fused+xla")


def _median_band(curves: list[np.ndarray]):
    stack = np.vstack(curves)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # grid points before any run started
        return (np.nanmedian(stack, axis=0), np.nanpercentile(stack, 25, axis=0),
                np.nanpercentile(stack, 75, axis=0))


def _step_on_grid(x, y, grid):
    """The last recorded value at or before each grid point (NaN before the first point)."""
    index = np.searchsorted(x, grid, side="right") - 1
    out = np.where(index >= 0, y[np.clip(index, 0, None)], np.nan)
    return out


def figure_convergence(runs: pd.DataFrame, traces: pd.DataFrame, *, x: str = "seconds"):
    """Suboptimality (log) against time (setup added as an offset) or iterations; the median
    over seeds with an interquartile band, one line per configuration, a facet per data set."""
    runs = label_runs(runs[runs["status"] != "skipped"])
    traces = traces.merge(runs[["run_id", "config", "data", "setup_seconds", "status"]],
                          on="run_id")
    if x == "seconds":
        traces = traces.assign(x=traces["seconds"] + traces["setup_seconds"].fillna(0))
        xlabel = "seconds (setup included as an offset)"
    else:
        traces = traces.assign(x=traces["iteration"].astype(float))
        xlabel = "iterations"
    traces = traces.assign(y=traces["suboptimality"].clip(lower=1e-17))
    data_sets = sorted(traces["data"].unique())
    fig, axes = plt.subplots(1, max(len(data_sets), 1), figsize=(6 * max(len(data_sets), 1), 4.8),
                             squeeze=False, sharey=True)
    palette = dict(zip(sorted(runs["config"].unique()),
                       sns.color_palette("husl", runs["config"].nunique()), strict=True))
    for ax, data in zip(axes[0], data_sets, strict=False):
        subset = traces[traces["data"] == data]
        for config, group in subset.groupby("config"):
            positive = group["x"][group["x"] > 0]
            low = positive.min() if x == "seconds" and len(positive) else 0.0
            grid = (np.geomspace(max(low, 1e-6), group["x"].max() * 1.0001, 200)
                    if x == "seconds" else np.linspace(0, group["x"].max(), 200))
            curves = [_step_on_grid(run["x"].to_numpy(), run["y"].to_numpy(), grid)
                      for _, run in group.sort_values("x").groupby("run_id")]
            median, q1, q3 = _median_band(curves)
            color = palette[config]
            ax.plot(grid, median, label=config, color=color, lw=1.4)
            ax.fill_between(grid, q1, q3, color=color, alpha=0.15, lw=0)
            failed = group[group["status"] != "converged"]
            if len(failed):
                ends = failed.sort_values("x").groupby("run_id").tail(1)
                ax.scatter(ends["x"], ends["y"], marker=FAILED_MARKER, color=color, s=30,
                           zorder=3)
        ax.set_yscale("log")
        ax.set_xscale("log" if x == "seconds" else "linear")
        ax.set_title(data, fontsize=9)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("relative suboptimality (f - f*) / f*")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=3,
               fontsize=7, frameon=False)
    fig.suptitle(f"Convergence against {'time' if x == 'seconds' else 'iterations'} "
                 f"(median over seeds, IQR band; {FAILED_MARKER} = run did not converge)")
    fig.tight_layout()
    return fig


def figure_time_to_target(runs: pd.DataFrame):
    """Setup and iteration seconds to the target per configuration; failures drawn as such."""
    runs = label_runs(runs)
    rows = []
    for (data, config), group in runs.groupby(["data", "config"]):
        converged = group[group["status"] == "converged"]
        statuses = group["status"].value_counts()
        rows.append({"data": data, "config": config, "n": len(group),
                     "converged": len(converged),
                     "setup": converged["setup_seconds"].median() if len(converged) else np.nan,
                     "loop": converged["seconds"].median() if len(converged) else np.nan,
                     "failure": ", ".join(f"{s}×{n}" for s, n in statuses.items()
                                          if s != "converged")})
    table = pd.DataFrame(rows).sort_values(["data", "loop"], na_position="last")
    data_sets = list(dict.fromkeys(table["data"]))
    heights = [max(2.0, 0.28 * (table["data"] == d).sum() + 1) for d in data_sets]
    fig, axes = plt.subplots(len(data_sets), 1, figsize=(10, sum(heights)), squeeze=False,
                             gridspec_kw={"height_ratios": heights})
    for ax, data in zip(axes[:, 0], data_sets, strict=True):
        part = table[table["data"] == data].reset_index(drop=True)
        finite = (part["setup"] + part["loop"]).dropna()
        right = finite.max() * 3 if len(finite) else 1.0
        left = max(min(part["setup"].min(), part["loop"].min()) / 3, 1e-6) if len(finite) \
            else 1e-6
        y = np.arange(len(part))
        ok = part["converged"] > 0
        ax.barh(y[ok], part["setup"][ok].clip(lower=left), left=left, color="#bbbbbb",
                label="setup (transfer, tracing, compilation)")
        ax.barh(y[ok], part["loop"][ok], left=left + part["setup"][ok].clip(lower=0),
                color="#3b75af", label="iterations to target (median of converged)")
        failed = ~ok
        ax.barh(y[failed], right - left, left=left, color="none", edgecolor="#c44e52",
                hatch="///", label="no run reached the target")
        for yi, text in zip(y, part["failure"], strict=True):
            if text:
                ax.text(right, yi, f"  {text}", va="center", fontsize=7, color="#c44e52")
        ax.set_yticks(y, [f"{c} ({k}/{n})" for c, k, n in
                          zip(part["config"], part["converged"], part["n"], strict=True)],
                      fontsize=7)
        ax.set_xscale("log")
        ax.set_xlim(left, right)
        ax.invert_yaxis()
        ax.set_title(data, fontsize=9)
        ax.set_xlabel("seconds to relative suboptimality target (log)")
    axes[0, 0].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig


def figure_cost_tradeoff(runs: pd.DataFrame):
    """Seconds per iteration against iterations to target (log-log), with lines of equal total
    time: cheap iterations that need many against expensive ones that need few."""
    runs = label_runs(runs[runs["status"] != "skipped"])
    runs = runs[runs["iterations"] > 0]
    agg = runs.groupby(["data", "config"]).agg(
        iterations=("iterations", "median"), per_iteration=("seconds_per_iteration", "median"),
        converged=("status", lambda s: (s == "converged").mean())).reset_index()
    fig, ax = plt.subplots(figsize=(8, 6))
    markers = dict(zip(sorted(agg["data"].unique()), "osD^vP*", strict=False))
    ok = agg["converged"] >= 0.5
    sns.scatterplot(data=agg[ok], x="iterations", y="per_iteration", hue="config",
                    style="data", markers=markers, ax=ax, s=60, legend="brief")
    if (~ok).any():
        ax.scatter(agg.loc[~ok, "iterations"], agg.loc[~ok, "per_iteration"],
                   marker=FAILED_MARKER, color="#c44e52", s=50,
                   label="did not converge (iterations at stop)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    xs = np.geomspace(max(agg["iterations"].min() / 2, 0.5), agg["iterations"].max() * 2, 50)
    y_low, y_high = agg["per_iteration"].min() / 2, agg["per_iteration"].max() * 2
    for total in 10.0 ** np.arange(-4, 4):
        ys = total / xs
        if ys.max() >= y_low and ys.min() <= y_high:
            ax.plot(xs, ys, color="grey", lw=0.6, ls=":")
            ax.annotate(f"{total:g} s", (xs[-1], ys[-1]), fontsize=7, color="grey")
    ax.set_ylim(y_low, y_high)
    ax.set_xlabel("iterations (median; to target when converged)")
    ax.set_ylabel("seconds per iteration (median)")
    ax.set_title("Cost per iteration against iterations (dotted: equal total time)")
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig


def performance_profile(runs: pd.DataFrame, taus: np.ndarray, *, resamples: int = 200,
                        seed: int = 0) -> pd.DataFrame:
    """Dolan-More profiles: for each configuration, the share of problems (data set x seed x
    repeat) it solves within tau times the best time; failures count as infinite time."""
    runs = label_runs(runs).assign(time=lambda r: time_to_target(r, "seconds"))
    problem_keys = ["data", "seed", "repeat"] if "repeat" in runs else ["data", "seed"]
    times = runs.pivot_table(index=problem_keys, columns="config", values="time",
                             aggfunc="median")
    times = times.fillna(np.inf)  # a configuration absent on a problem did not solve it
    best = times.min(axis=1)
    solvable = np.isfinite(best)
    ratios = times[solvable].div(best[solvable], axis=0).to_numpy()
    rng = np.random.default_rng(seed)
    rows = []
    for j, config in enumerate(times.columns):
        r = ratios[:, j]
        profile = (r[None, :] <= taus[:, None]).mean(axis=1)
        boot = []
        for _ in range(resamples):
            sample = r[rng.integers(0, len(r), len(r))]
            boot.append((sample[None, :] <= taus[:, None]).mean(axis=1))
        boot = np.array(boot)
        for k, tau in enumerate(taus):
            rows.append({"config": config, "tau": tau, "share": profile[k],
                         "low": np.percentile(boot[:, k], 5),
                         "high": np.percentile(boot[:, k], 95)})
    return pd.DataFrame(rows)


def figure_performance_profile(runs: pd.DataFrame):
    runs = runs[runs["status"] != "skipped"]
    taus = np.geomspace(1, 1e4, 200)
    profile = performance_profile(runs, taus)
    fig, ax = plt.subplots(figsize=(8, 5))
    palette = sns.color_palette("husl", profile["config"].nunique())
    for color, (config, group) in zip(palette, profile.groupby("config"), strict=True):
        ax.step(group["tau"], group["share"], where="post", label=config, color=color, lw=1.3)
        ax.fill_between(group["tau"], group["low"], group["high"], step="post", color=color,
                        alpha=0.12, lw=0)
    ax.set_xscale("log")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("tau: time within tau x the best configuration's on the same problem (log)")
    ax.set_ylabel("share of problems solved")
    ax.set_title("Performance profiles over data sets x seeds (failures = infinite time; "
                 "90% bootstrap band)", fontsize=9)
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig


def figure_feed_modes(runs: pd.DataFrame):
    """Seconds per iteration of each engine (NumPy, tf1, feed, resident, fused, fused+XLA) per
    device and dtype, for GD and Adadelta, beside one read pass over X in the same process."""
    runs = label_runs(runs[runs["optimizer"].isin(["gd", "adadelta"])
                           & (runs["status"] != "skipped") & (runs["iterations"] > 0)])
    runs = runs.assign(mode=runs["engine"].str.split("/").str[0],
                       device=runs["device"].fillna("cpu"))
    compared = runs.groupby(["data", "device"])["mode"].nunique()
    facets = sorted(compared[compared > 1].index) or sorted(compared.index)
    fig, axes = plt.subplots(len(facets), 1, figsize=(9, 3.6 * max(len(facets), 1)),
                             squeeze=False)
    order = [m for m in FEED_ORDER if m in set(runs["mode"])]
    for ax, (data, device) in zip(axes[:, 0], facets, strict=True):
        part = runs[(runs["data"] == data) & (runs["device"] == device)]
        sns.barplot(data=part, x="mode", y="seconds_per_iteration", hue="dtype", order=order,
                    estimator="median", errorbar=None, ax=ax)
        for dtype, color in zip(sorted(part["dtype"].unique()), ("k", "grey"), strict=False):
            read = part.loc[part["dtype"] == dtype, "read_pass_seconds"].median()
            if np.isfinite(read):
                ax.axhline(read, color=color, ls="--", lw=1,
                           label=f"{READ_PASS_LABEL} ({dtype})")
        ax.set_yscale("log")
        ax.set_ylabel("seconds per iteration (median, log)")
        ax.set_xlabel("engine")
        ax.set_title(f"{data} on {device}: GD and Adadelta", fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


REGRESSION_FIGURES = {
    "convergence_time": lambda runs, traces: figure_convergence(runs, traces, x="seconds"),
    "convergence_iterations": lambda runs, traces: figure_convergence(runs, traces,
                                                                      x="iterations"),
    "time_to_target": lambda runs, traces: figure_time_to_target(runs),
    "cost_tradeoff": lambda runs, traces: figure_cost_tradeoff(runs),
    "performance_profile": lambda runs, traces: figure_performance_profile(runs),
    "regression_feed_modes": lambda runs, traces: figure_feed_modes(runs),
}


def paired_rows(runs: pd.DataFrame) -> pd.DataFrame:
    """Within each data set, only the draws (seed, init) that every configuration ran, so that
    medians drawn side by side describe the same instances."""
    config = [c for c in CONFIG_COLUMNS if c in runs]
    parts = [common_instances(part, config, INSTANCE_COLUMNS)
             for _, part in runs.groupby(DATA_COLUMNS, dropna=False, sort=False)]
    return pd.concat(parts) if parts else runs


def draw(results, figures: Path) -> list[Path]:
    """Every regression figure from a results folder (`study.results.Results`)."""
    runs, traces = paired_rows(results.runs), results.table("traces")
    written = []
    for name, make in REGRESSION_FIGURES.items():
        written += save(make(runs, traces), figures, name)
    return written
