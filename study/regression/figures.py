"""The regression study's figures, drawn from its results tables only.

Each `figure_*` function takes tidy tables and returns a matplotlib Figure, so tests can read
back what was drawn; `draw` saves every figure (study.figures.save).
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, NullLocator

from optimizers import bounds
from study.figures import FAILED_MARKER, legend_outside, log_axis, panel_title, save
from study.paired import common_instances
from study.regression import prediction, style
from study.regression.headline import best_choices, figure_headline
from study.regression.labels import label_runs, target_tol, with_instances, with_keys
from study.regression.summary import DATA_COLUMNS, INSTANCE_COLUMNS, time_to_target
from study.sweep.tuning import measured_runs

READ_PASS_LABEL = "one read pass over X"
FEED_ORDER = tuple(e for e in style.ENGINE_ORDER if "+gram" not in e)  # the registry's order


def _median_band(curves: list[np.ndarray]):
    """Median and quartiles over runs at each grid point (linear interpolation, as NumPy's
    default), ignoring runs without a value there (NaN before they started); a diverged run's
    inf counts as the largest value. Vectorised: np.nanpercentile falls back to a Python loop
    over the grid when any NaN is present (2 s of every convergence figure), and its
    interpolation turns inf into NaN."""
    stack = np.sort(np.vstack(curves), axis=0)  # NaN sort last
    valid = (~np.isnan(stack)).sum(axis=0)

    def quantile(q: float) -> np.ndarray:
        position = q * np.maximum(valid - 1, 0)
        low = np.floor(position).astype(int)
        high = np.minimum(low + 1, np.maximum(valid - 1, 0))
        below = np.take_along_axis(stack, low[None, :], axis=0)[0]
        above = np.take_along_axis(stack, high[None, :], axis=0)[0]
        share = position - low
        with np.errstate(invalid="ignore"):  # inf - inf where the first branch is taken
            value = np.where((share == 0) | (below == above), below,
                             below + (above - below) * share)
        return np.where(valid > 0, value, np.nan)

    return quantile(0.5), quantile(0.25), quantile(0.75)


def _step_on_grid(x, y, grid):
    """The last recorded value at or before each grid point (NaN before the first point)."""
    index = np.searchsorted(x, grid, side="right") - 1
    return np.where(index >= 0, y[np.clip(index, 0, None)], np.nan)


def _best_configs(runs: pd.DataFrame,
                  per: tuple[str, ...] = ("data", "family", "engine")) -> pd.DataFrame:
    """Per data set, the measured rows of the best configuration of each optimizer family on
    each engine (as the headline picks them; `per` = ("data", "family"): over every engine),
    labelled, with their family: no panel carries more than one line per engine (or family)."""
    runs = runs[runs["status"] != "skipped"]
    labelled = label_runs(runs)
    keep = set(best_choices(labelled, per)[["data", "config"]].itertuples(index=False,
                                                                          name=None))
    mask = [(d, c) in keep for d, c in zip(labelled["data"], labelled["config"], strict=True)]
    best = label_runs(runs[mask])
    return best.assign(family=style.families(best))


def families_first(labelled: pd.DataFrame) -> list[str]:
    """The optimizer families, those that matter first: reached the target on the most data
    sets, then the lowest median over data sets of their best time, then by name."""
    best = best_choices(labelled, ("data", "family"))
    score = best.groupby("family")["time"].agg(
        reached=lambda t: int(np.isfinite(t).sum()),
        time=lambda t: float(np.median(t[np.isfinite(t)])) if np.isfinite(t).any() else np.inf)
    return sorted(score.index, key=lambda f: (-score.loc[f, "reached"], score.loc[f, "time"], f))


def family_panels(families: list[str], engines: list[str], count: int, width: float,
                  height: float, family_look: dict, engine_look, failed: dict):
    """`count` panels of `width` x `height` inches wrapped into at most three columns (two for
    four, a square) under a two-line title and two legends: the families by colour, then the
    engines (drawn by `engine_look(engine)`) and how a failure is marked; the panels left over
    are hidden. Returns the figure, its axes and its header (for place_header)."""
    groups = [[plt.Line2D([], [], color=style.color(f), label=f, **family_look) for f in families],
              [*(plt.Line2D([], [], color="#333333", label=e, **engine_look(e)) for e in engines),
               plt.Line2D([], [], color="#333333", ls="none", **failed)]]
    columns = 2 if count == 4 else min(count, 3)
    figure_width = width * columns + 0.8
    legends = [legend_columns([h.get_label() for h in group], figure_width - 0.4)
               for group in groups]
    lines = sum(-(-len(group) // c) for group, c in zip(groups, legends, strict=True))
    header = 0.42 + 0.17 * lines + 0.08 * (len(groups) - 1) + 0.25
    rows = -(-count // columns)
    fig, axes = plt.subplots(rows, columns, squeeze=False,
                             figsize=(figure_width, height * rows + header + 0.5))
    for ax in axes.flat[count:]:
        ax.set_visible(False)
    return fig, axes, (groups, legends, header)


def label_panel(ax, panel: int, axes, count: int, data: str, ylabel: str, xlabel: str) -> None:
    """The data set as the panel's title; the y label on the left column only, the x label
    under the lowest panel of each column."""
    ax.set_title(panel_title(data), fontsize=8)
    ax.tick_params(labelsize=7)
    if panel % axes.shape[1] == 0:
        ax.set_ylabel(ylabel, fontsize=8)
    if panel + axes.shape[1] >= count:
        ax.set_xlabel(xlabel, fontsize=8)


def legend_columns(labels, width: float, fontsize: float = 8) -> int:
    """How many legend entries of `labels` fit side by side in `width` inches."""
    entry = (max(map(len, labels), default=1) * 0.55 + 3.5) * fontsize / 72  # text + handle
    return max(1, min(len(labels), int(width // entry)))


def place_header(fig, title: str, header: tuple[list[list], list[int], float]):
    """The title, then each group's legend, placed in inches from the top so that a tall figure
    gets no more room than a short one; then the panels laid out under them. A legend fills
    column by column: its handles are reordered to read row by row. The title is kept out of
    tight_layout, which would make room for it a second time."""
    groups, columns, header = header
    height = fig.get_size_inches()[1]
    suptitle = fig.suptitle(title, fontsize=9, y=1 - 0.06 / height, in_layout=False)
    top = 0.42
    for group, ncol in zip(groups, columns, strict=True):
        row_major = [handle for column in range(ncol) for handle in group[column::ncol]]
        fig.legend(handles=row_major, loc="upper center", ncol=ncol, fontsize=8,
                   frameon=False, bbox_to_anchor=(0.5, 1 - top / height))
        top += 0.17 * -(-len(group) // ncol) + 0.08
    fig.tight_layout(rect=(0, 0, 1, 1 - header / height))
    suptitle.set_in_layout(True)  # inside the saved figure's crop


def one_y_range(axes) -> None:
    """One y range for every panel, tick labels on the left column only: what sharey=True
    draws (the range of the panels that show something), without matplotlib's links between
    the axes, whose layout cost grows with the square of the panel count (40 panels: 10 s of
    every convergence figure)."""
    drawn = [ax for ax in axes.flat if ax.has_data()] or list(axes.flat)
    low = min(ax.get_ylim()[0] for ax in drawn)
    high = max(ax.get_ylim()[1] for ax in drawn)
    for ax in axes.flat:
        ax.set_ylim(low, high)
    for ax in axes[:, 1:].flat:
        ax.tick_params(labelleft=False)


def skipped_caption(fig, runs: pd.DataFrame) -> None:
    """Configurations that never ran here are named under the figure, never drawn."""
    skipped = label_runs(runs[runs["status"] == "skipped"]) if "status" in runs else runs[:0]
    if skipped.empty:
        return
    engines = sorted(skipped["engine"].unique())
    fig.text(0.01, -0.01, f"Not run on this machine (skipped): {skipped['config'].nunique()} "
             f"configurations on {', '.join(engines)}.", fontsize=8, color="#555555",
             va="top")


def figure_convergence(runs: pd.DataFrame, traces: pd.DataFrame, *, x: str = "seconds"):
    """Suboptimality (log) against time (setup added as an offset) or iterations: a panel per
    data set, a line per optimizer family at its best configuration over every engine (the
    engine as the line style), the median over seeds with an interquartile band."""
    order = families_first(label_runs(runs[runs["status"] != "skipped"]))
    ran = _best_configs(runs, ("data", "family"))
    traces = traces.merge(ran[["run_id", "config", "data", "family", "engine", "setup_seconds",
                               "status"]], on="run_id")
    if x == "seconds":
        traces = traces.assign(x=traces["seconds"] + traces["setup_seconds"].fillna(0))
        xlabel = "seconds, setup included (log)"
    else:
        traces = traces.assign(x=traces["iteration"].astype(float))
        xlabel = "iterations (log from 1)"
    traces = traces.assign(y=traces["suboptimality"].clip(lower=1e-17))
    data_sets = sorted(traces["data"].unique()) or ["(no runs)"]
    families = [f for f in order if f in set(traces["family"])]
    engines = sorted(traces["engine"].map(style.engine_key).unique(), key=style.engine_rank)
    fig, axes, header = family_panels(
        families, engines, len(data_sets), 4.0, 3.0, {"lw": 2},
        lambda e: {"ls": style.line_style(e), "lw": 1.3},
        {"marker": FAILED_MARKER, "label": "run did not converge"})
    panels = dict(list(traces.groupby("data")))
    for panel, (ax, data) in enumerate(zip(axes.flat, data_sets, strict=False)):
        lines = panels.get(data, traces[:0]).groupby(["family", "engine", "config"])
        for (fam, engine, _config), group in sorted(lines, key=lambda g: families.index(
                g[0][0])):  # in the legend's order; those that matter on top (zorder)
            positive = group["x"][group["x"] > 0]
            low = positive.min() if x == "seconds" and len(positive) else 0.0
            grid = (np.geomspace(max(low, 1e-6), group["x"].max() * 1.0001, 200)
                    if x == "seconds" else np.concatenate(
                        [[0.0], np.geomspace(1, max(group["x"].max(), 1) * 1.0001, 199)]))
            curves = [_step_on_grid(r["x"].to_numpy(), r["y"].to_numpy(), grid)
                      for _, r in group.sort_values("x").groupby("run_id")]
            median, q1, q3 = _median_band(curves)
            c, z = style.color(fam), 3 - families.index(fam) / len(families)
            one_point = np.isfinite(median).sum() < 2  # a direct solve: a mark, not a line
            ax.plot(grid, median, color=c, ls=style.line_style(engine), lw=1.3,
                    marker="o" if one_point else None, ms=4, label=f"{fam} {engine}", zorder=z)
            ax.fill_between(grid, q1, q3, color=c, alpha=0.10, lw=0, zorder=z - 1)
            failed = group[group["status"] != "converged"]
            if len(failed):
                ends = failed.sort_values("x").groupby("run_id").tail(1)
                ax.scatter(ends["x"], ends["y"], marker=FAILED_MARKER, color=c, s=20, zorder=4)
        log_axis(ax.yaxis)
        if x == "seconds":
            log_axis(ax.xaxis)
        else:  # iteration 0 included; L-BFGS's 10 beside Adadelta's 5000
            ax.set_xscale("symlog", linthresh=1, linscale=0.3)
            ax.set_xlim(left=0)
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.0f}"))
            ax.xaxis.set_minor_locator(NullLocator())
        label_panel(ax, panel, axes, len(data_sets), data, "(f - f*) / f*", xlabel)
    one_y_range(axes)
    skipped_caption(fig, runs)
    place_header(fig, f"Convergence against {'time' if x == 'seconds' else 'iterations'}: a "
                 "panel per data set, a line per optimizer at its best configuration\n(colour: "
                 "optimizer, fastest first; line style: the engine it ran on; median over seeds, "
                 "IQR band)", header)
    return fig


def figure_time_to_target(runs: pd.DataFrame):
    """Setup and iteration seconds to the target for the best configuration of each family
    on each engine, per data set; what did not get there is marked and named."""
    keys, rows = ["data", "family", "engine", "config"], []
    for key, group in _best_configs(runs).groupby(keys):
        converged = group[group["status"] == "converged"]
        setup, loop = (converged[c].median() if len(converged) else np.nan
                       for c in ("setup_seconds", "seconds"))
        rows.append((*key, len(group), len(converged), setup, loop, ", ".join(
            f"{s} {n}" for s, n in group["status"].value_counts().items() if s != "converged")))
    table = pd.DataFrame(rows, columns=[*keys, "n", "converged", "setup", "loop", "failure"])
    table = table.sort_values(["data", "loop"], na_position="last")
    data_sets = list(dict.fromkeys(table["data"])) or ["(no runs)"]
    heights = [max(2.6, 0.26 * (table["data"] == d).sum() + 0.8) for d in data_sets]
    header = 0.3  # the legend, above the panels
    fig, axes = plt.subplots(len(data_sets), 1, figsize=(12, sum(heights) + 0.6 + header),
                             squeeze=False, gridspec_kw={"height_ratios": heights})
    for ax, data in zip(axes[:, 0], data_sets, strict=True):
        part = table[table["data"] == data].reset_index(drop=True)
        # the axis ends near the data: from a third of the shortest bar part to a little past
        # the longest bar (a panel where nothing got there takes every panel's span)
        drawn = part if part["loop"].notna().any() else table
        left = max(np.nanmin(drawn[["setup", "loop"]].to_numpy(float), initial=1.0) / 3, 1e-6)
        right = np.nanmax((left + drawn["setup"].clip(lower=0) + drawn["loop"]).to_numpy(float),
                          initial=left * 10) * 1.3
        y = np.arange(len(part))
        ok = part["converged"] > 0
        colors = [style.color(f) for f in part["family"]]
        ax.barh(y[ok], part["setup"][ok].clip(lower=left), left=left, color="#cccccc")
        ax.barh(y[ok], part["loop"][ok], left=left + part["setup"][ok].clip(lower=0),
                color=[c for c, k in zip(colors, ok, strict=True) if k])
        for yi, text, k, c in zip(y, part["failure"], ok, colors, strict=True):
            if not k:
                ax.plot(left, yi, marker=FAILED_MARKER, color=c, ms=7, mew=2, clip_on=False)
            if text:  # beside the panel, whatever its span
                ax.text(1.0, yi, f" {text}", va="center", fontsize=7, color="#c44e52",
                        transform=ax.get_yaxis_transform())
        ax.set_yticks(y, [f"{c} ({k}/{n})" for c, k, n in
                          zip(part["config"], part["converged"], part["n"], strict=True)],
                      fontsize=7)
        log_axis(ax.xaxis)
        ax.set_xlim(left, right)
        ax.invert_yaxis()
        ax.set_title(panel_title(data), fontsize=9)
    axes[-1, 0].set_xlabel("seconds to the target (log); (k/n) = runs that reached it")
    height = fig.get_size_inches()[1]
    fig.legend(handles=[
        Patch(color="#cccccc", label="setup (conversion, transfer, tracing, compilation)"),
        Patch(color="#555555", label="iterations to target (median of converged runs), in "
                                     "the optimizer's colour"),
        plt.Line2D([], [], color="#555555", marker=FAILED_MARKER, ls="none", mew=2,
                   label="no run reached the target")],
        loc="upper center", ncol=3, fontsize=7, frameon=False,
        bbox_to_anchor=(0.5, 1 - 0.05 / height))
    skipped_caption(fig, runs)
    fig.tight_layout(rect=(0, 0, 1, 1 - header / height))
    return fig


def figure_cost_tradeoff(runs: pd.DataFrame):
    """Seconds per iteration against iterations to target (log-log), with lines of equal total
    time: cheap iterations that need many against expensive ones that need few. Colour: the
    optimizer family; marker: the engine; a panel per data set."""
    ran = _best_configs(runs)
    ran = ran[ran["iterations"] > 0]
    agg = ran.groupby(["data", "family", "engine", "config"]).agg(
        iterations=("iterations", "median"), per_iteration=("seconds_per_iteration", "median"),
        converged=("status", lambda s: (s == "converged").mean())).reset_index()
    data_sets = sorted(agg["data"].unique()) or ["(no runs)"]
    families = [f for f in families_first(ran) if f in set(agg["family"])]
    engines = sorted(agg["engine"].map(style.engine_key).unique(), key=style.engine_rank)
    fig, axes, header = family_panels(
        families, engines, len(data_sets), 4.2, 3.4, {"marker": "o", "ls": "none"},
        lambda e: {"marker": style.marker(e), "ls": "none"},
        {"marker": "o", "mfc": "none", "label": "open: did not converge"})
    for panel, (ax, data) in enumerate(zip(axes.flat, data_sets, strict=False)):
        part = agg[agg["data"] == data]
        for r in part.itertuples():
            ax.scatter(r.iterations, r.per_iteration, color=style.color(r.family),
                       marker=style.marker(r.engine), s=40,
                       facecolors=style.color(r.family) if r.converged >= 0.5 else "none")
        log_axis(ax.xaxis)
        log_axis(ax.yaxis)
        if len(part):
            xs = np.geomspace(max(part["iterations"].min() / 2, 0.5),
                              part["iterations"].max() * 2, 50)
            y_low, y_high = part["per_iteration"].min() / 2, part["per_iteration"].max() * 2
            for total in 10.0 ** np.arange(-4, 4):
                ys = total / xs
                if ys.max() >= y_low and ys.min() <= y_high:
                    ax.plot(xs, ys, color="grey", lw=0.6, ls=":")
                    ax.annotate(f"{total:g} s", (xs[-1], ys[-1]), fontsize=7, color="grey")
            ax.set_ylim(y_low, y_high)
        label_panel(ax, panel, axes, len(data_sets), data, "seconds per iteration (median)",
                    "iterations (median; to target when converged)")
    place_header(fig, "Cost per iteration against iterations (dotted: equal total time)\n"
                 "(colour: optimizer, fastest first; marker: engine; each at its best "
                 "configuration)", header)
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
    parts = []
    for j, config in enumerate(times.columns):
        r = ratios[:, j]
        samples = r[rng.integers(0, len(r), (resamples, len(r)))]  # one resample a row
        boot = (samples[:, None, :] <= taus[None, :, None]).mean(axis=2)
        parts.append(pd.DataFrame({
            "config": config, "tau": taus, "share": (r[None, :] <= taus[:, None]).mean(axis=1),
            "low": np.percentile(boot, 5, axis=0), "high": np.percentile(boot, 95, axis=0)}))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def best_of_family(runs: pd.DataFrame) -> pd.DataFrame:
    """The rows of each optimizer family's best configuration over every problem: the lowest
    median time to target, then the most problems solved."""
    runs = label_runs(runs).assign(time=lambda r: time_to_target(r, "seconds"))
    runs = runs.assign(family=style.families(runs))
    score = runs.groupby(["family", "config"]).agg(
        median=("time", "median"), solved=("time", lambda t: np.isfinite(t).mean()))
    best = score.sort_values(["median", "solved"], ascending=[True, False]) \
        .groupby(level="family").head(1).index.get_level_values("config")
    return runs[runs["config"].isin(best)]


def figure_performance_profile(runs: pd.DataFrame):
    """Dolan-More profiles of each optimizer family's best configuration (one curve each)."""
    chosen = best_of_family(runs[runs["status"] != "skipped"])
    taus = np.geomspace(1, 1e4, 200)
    profile = performance_profile(chosen, taus)
    names = chosen.drop_duplicates("config").set_index("config")
    columns = legend_columns(list(names.index), 8.0, fontsize=7)  # under the panel
    rows = -(-len(names) // columns)
    fig, ax = plt.subplots(figsize=(8.5, 4.6 + 0.16 * rows))
    for config, group in profile.groupby("config"):
        fam, engine = names.loc[config, "family"], names.loc[config, "engine"]
        c = style.color(fam)
        ax.step(group["tau"], group["share"], where="post", color=c, lw=1.5,
                ls=style.line_style(engine), label=config)
        ax.fill_between(group["tau"], group["low"], group["high"], step="post", color=c,
                        alpha=0.10, lw=0)
    log_axis(ax.xaxis)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("tau: solved within tau x the best of these on the same problem (log)")
    ax.set_ylabel("share of problems solved")
    ax.set_title("Performance profiles: each optimizer's best configuration over data sets x "
                 "seeds (failures = infinite time; 90% bootstrap band)", fontsize=9)
    legend_outside(ax, below=True, fontsize=7, ncol=columns)
    skipped_caption(fig, runs)
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
    if not facets:  # a study without GD or Adadelta: say so rather than draw nothing
        fig, ax = plt.subplots(figsize=(9, 1.2))
        ax.axis("off")
        ax.text(0.5, 0.5, "no GD or Adadelta runs in this study: no engines to compare per "
                          "iteration", ha="center", va="center")
        return fig
    fig, axes = plt.subplots(len(facets), 1, figsize=(9, 3.6 * max(len(facets), 1)),
                             squeeze=False)
    present = set(runs["mode"])  # a backend added later follows the known ones
    order = [m for m in FEED_ORDER if m in present] + sorted(present - set(FEED_ORDER))
    for ax, (data, device) in zip(axes[:, 0], facets, strict=True):
        part = runs[(runs["data"] == data) & (runs["device"] == device)]
        sns.barplot(data=part, x="mode", y="seconds_per_iteration", hue="dtype", order=order,
                    estimator="median", errorbar=None, ax=ax)
        for dtype, color in zip(sorted(part["dtype"].unique()), ("k", "grey"), strict=False):
            read = part.loc[part["dtype"] == dtype, "read_pass_seconds"].median()
            if np.isfinite(read):
                ax.axhline(read, color=color, ls="--", lw=1,
                           label=f"{READ_PASS_LABEL} ({dtype})")
        log_axis(ax.yaxis)
        ax.set_ylabel("seconds per iteration (median, log)")
        ax.set_xlabel("engine")
        # a dozen engines' names side by side overlap: slanted, each ending under its bars
        ax.tick_params(axis="x", labelrotation=30, labelsize=8)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")
            label.set_rotation_mode("anchor")
        ax.set_title(f"{data} on {device}: GD and Adadelta", fontsize=9)
        legend_outside(ax, fontsize=7)
    fig.tight_layout()
    return fig


# the bounds drawn as lines: (the start of the rows' bound name, the family whose colour it
# takes, its label, the bound)
BOUND_LINES = (("gd 1/L", "gd", "GD 1/L bound", bounds.gradient_descent),
               ("nesterov", "nesterov", "Nesterov bound", bounds.nesterov),
               ("cg ", "cgls", "CG bound (Chebyshev)", bounds.conjugate_gradient))


def figure_conditioning(runs: pd.DataFrame):
    """Iterations to the target against kappa (L/mu as run), log-log: per optimizer its best
    configuration (most data sets reached, then fewest iterations), x where it stopped without
    reaching the target; the bounds of optimizers/bounds.py as dashed lines from the median
    start. None when no optimizer ran at three kappas or more (no line to draw)."""
    points = prediction.iterations_against_kappa(runs)
    if points.empty or points["kappa"].round(6).nunique() < 3:
        return None
    points = points[points["optimizer"] != "closed-form"]  # no iterations to speak of
    points = points.assign(score=np.log(points["iterations"].clip(lower=1)))
    best = (points.groupby(["line", "optimizer", "config"])
            .agg(reached=("reached", "sum"), score=("score", "sum"),
                 kappas=("kappa", "nunique")).reset_index()
            .sort_values(["reached", "score"], ascending=[False, True])
            .drop_duplicates("line"))
    best = best[best["kappas"] >= 3]  # a line needs a few kappas to say how it grows
    if best.empty:
        return None
    fig, ax = plt.subplots(figsize=(8, 5.2))
    seen = set()
    for _, choice in best.sort_values("line").iterrows():
        part = points[points["config"] == choice["config"]].sort_values("kappa")
        c = style.color(choice["optimizer"])
        ax.plot(part["kappa"], part["iterations"].clip(lower=1), color=c, lw=1.4,
                ls="-." if choice["optimizer"] in seen else "-", label=choice["config"])
        seen.add(choice["optimizer"])
        done = part[part["reached"]]
        ax.plot(done["kappa"], done["iterations"].clip(lower=1), "o", color=c, ms=5)
        missed = part[~part["reached"]]
        ax.plot(missed["kappa"], missed["iterations"].clip(lower=1), FAILED_MARKER, color=c,
                ms=8, mew=2)
    grid = np.geomspace(points["kappa"].min(), points["kappa"].max(), 60)
    eps0, tol = float(points["eps0"].median()), float(points["tol"].median())
    if np.isfinite(eps0) and np.isfinite(tol):
        drawn = set(points.loc[points["config"].isin(best["config"]), "bound"].dropna())
        for start, fam, label, bound in BOUND_LINES:
            if any(name.startswith(start) for name in drawn):
                counts = [bound(k, eps0, tol).iterations for k in grid]  # None: no bound
                ax.plot(grid, [np.nan if c is None else c for c in counts], ls="--", lw=1,
                        color=style.color(fam),
                        label=f"{label} (eps0 {eps0:.3g}, tol {tol:g})")
    ax.plot([], [], FAILED_MARKER, color="#555555", mew=2, ls="none",
            label="did not reach the target (where it stopped)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("kappa = L / mu of the Hessian as run (log)")
    ax.set_ylabel("iterations to the target (median; log)")
    ax.set_title("Iterations against conditioning: measured (points) and the bounds (dashed)",
                 fontsize=9)
    legend_outside(ax, fontsize=7)
    fig.tight_layout()
    return fig


REGRESSION_FIGURES = {
    "headline": lambda runs, traces: figure_headline(runs, target_tol(runs)),
    "convergence_time": lambda runs, traces: figure_convergence(runs, traces, x="seconds"),
    "convergence_iterations": lambda runs, traces: figure_convergence(runs, traces,
                                                                      x="iterations"),
    "time_to_target": lambda runs, traces: figure_time_to_target(runs),
    "cost_tradeoff": lambda runs, traces: figure_cost_tradeoff(runs),
    "performance_profile": lambda runs, traces: figure_performance_profile(runs),
    "regression_feed_modes": lambda runs, traces: figure_feed_modes(runs),
    "conditioning": lambda runs, traces: figure_conditioning(runs),
}


def paired_rows(runs: pd.DataFrame) -> pd.DataFrame:
    """Within each data set, only the draws (seed, init) that every configuration ran, so that
    medians drawn side by side describe the same instances."""
    runs = with_keys(with_instances(runs))
    parts = [common_instances(part, ["config_key"], INSTANCE_COLUMNS)
             for _, part in runs.groupby(DATA_COLUMNS, dropna=False, sort=False)]
    return pd.concat(parts) if parts else runs


def draw(results, figures: Path) -> list[Path]:
    """Every regression figure from a results folder (`study.results.Results`)."""
    # labelled once, on every measured run, as the report labels them
    runs = paired_rows(label_runs(measured_runs(results.runs)))
    traces = results.table("traces")
    if runs.empty:
        print("no figures: no data set has an instance (seed) that each of its configurations "
              "ran, so nothing is compared side by side", file=sys.stderr)
    written = []
    for name, make in REGRESSION_FIGURES.items():
        fig = make(runs, traces) if not runs.empty else None
        if fig is None:  # nothing to draw: no stale figure of older results stays behind
            for stale in (figures / f"{name}.png", figures / f"{name}.svg"):
                stale.unlink(missing_ok=True)
            continue
        written += save(fig, figures, name)
    return written
