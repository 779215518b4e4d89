"""The feed-mode study's figure, drawn from its results table only."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.ticker import NullLocator

from study.feedmode.model import MODES
from study.figures import legend_outside, log_axis, save

GRAPPLER_ORDER = ("default", "no-constant-folding", "no-folding", "off")


def main_size(runs: pd.DataFrame) -> int:
    """The batch size N at which the most modes ran: the one the mode table is about."""
    ok = runs[runs["status"] == "ok"]
    counts = ok.groupby("n")["mode"].nunique()
    if not len(counts):
        return int(runs["n"].max())
    return int(counts[counts == counts.max()].index.max())


SIZES = {"graphdef_bytes": "GraphDef", "program_bytes": "StableHLO (JAX)",
         "executable_bytes": "executable / compiled code"}
# each call column (the result on the host) -> its compute-only part (the output left on the
# device) and its fetch to the host (study.feedmode.measure)
COMPUTE = {"first_call_seconds": "first_compute_seconds",
           "steady_median_seconds": "steady_compute_median_seconds"}
FETCH = {"first_call_seconds": "first_fetch_seconds",
         "steady_median_seconds": "steady_fetch_median_seconds"}
SMALL_FETCH = 0.05  # a fetch at most this share of every call: compute only is the same


def fetch_note(part: pd.DataFrame) -> str:
    """How much of a call the fetch to the host took over these runs (medians per mode)."""
    shares = pd.concat([part[FETCH[call]] / part[call] for call in FETCH])
    if shares.isna().all():
        return "no compute/fetch split in these results"
    share = shares.max()
    if share <= SMALL_FETCH:
        return f"fetch at most {share:.1%} of any call: compute only is the same"
    return f"fetch up to {share:.0%} of a call"


def fmt_bytes(size: float) -> str:
    return f"{size / 1e3:.3g} kB" if size < 1e6 else f"{size / 1e6:.3g} MB"


def with_columns(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs with every column the figures read (results from before a column existed lack
    it: no value there)."""
    missing = [c for c in (*SIZES, *COMPUTE.values(), *FETCH.values(), "compile_seconds",
                           "output_folded") if c not in runs]
    return runs.assign(**dict.fromkeys(missing, np.nan)) if missing else runs


def ordered(modes) -> list[str]:
    """Modes in MODES order (TensorFlow's, JAX's, PyTorch's), then any unknown ones."""
    present = set(modes)
    return [m for m in MODES if m in present] + sorted(present - set(MODES))


def sizes_long(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per run and size it has (MB), `what` naming the size."""
    long = runs.melt(id_vars=[c for c in ("mode", "dtype", "n", "grappler") if c in runs],
                     value_vars=list(SIZES), var_name="what", value_name="bytes")
    long = long[pd.to_numeric(long["bytes"], errors="coerce") > 0]
    return long.assign(what=long["what"].map(SIZES), MB=long["bytes"].astype(float) / 1e6)


def swept(ok: pd.DataFrame) -> pd.DataFrame:
    """float64 runs of the (mode, grappler) pairs measured at more than one N, with a label."""
    f64 = ok[ok["dtype"] == "float64"]
    sizes = f64.groupby(["mode", "grappler"])["n"].transform("nunique")
    f64 = f64[sizes > 1]
    return f64.assign(variant=f64["mode"] + np.where(f64["grappler"] == "default", "",
                                                     " (grappler " + f64["grappler"] + ")"))


def _nothing(ax, what: str) -> None:
    ax.text(0.5, 0.5, f"no {what} in these results", ha="center", va="center",
            transform=ax.transAxes, fontsize=8, color="#555555")


def _against_n(ax, drawn: bool, nothing: str, ylabel: str, title: str, ns=()) -> None:
    """A panel against N: log scales with a tick at every N swept (one plain format) and the
    legend below the panel where something was drawn, else a note."""
    if drawn:
        ax.set_xscale("log")
        ticks = sorted({int(n) for n in ns})
        ax.set_xticks(ticks, [str(n) for n in ticks])
        ax.xaxis.set_minor_locator(NullLocator())
        log_axis(ax.yaxis)
        legend_outside(ax, below=True, fontsize=7, title=None, ncol=2)
    else:
        _nothing(ax, nothing)
    ax.set_xlabel("N (images, log)")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)


def figure_feedmode(runs: pd.DataFrame):
    """CNN feed modes: first call against later calls per mode (log), what each mode builds
    (GraphDef, JAX's program and executable, torch.compile's code), the Grappler ablation of the
    constant modes, first-call cost against N, the size of what is built against N, and the
    compilation part of JAX's first call against N."""
    runs = with_columns(runs)
    ok = runs[runs["status"] == "ok"].copy()
    n_main = main_size(runs)
    fig, axes = plt.subplots(3, 2, figsize=(13, 15))
    ax = axes[0, 0]
    main = ok[(ok["n"] == n_main) & (ok["grappler"] == "default")]
    calls = {"first_call_seconds": "first call", "steady_median_seconds": "later calls (median)",
             "steady_compute_median_seconds": "later calls, compute only"}
    long = main.melt(id_vars=["mode", "dtype"], value_vars=[c for c in calls
                                                            if main[c].notna().any()],
                     var_name="call", value_name="seconds")
    long["call"] = long["call"].map(calls)
    long["bar"] = long["call"] + " " + long["dtype"]
    sns.barplot(data=long, y="mode", x="seconds", hue="bar", ax=ax, errorbar=None,
                order=ordered(long["mode"]))
    log_axis(ax.xaxis)
    ax.set_xlabel("seconds per call (log)")
    ax.set_title(f"First call and later calls per mode, N = {n_main}\n(result on the host; "
                 "compute only: the output left on the device)", fontsize=9)
    legend_outside(ax, below=True, fontsize=7, title=None, ncol=2)
    ax = axes[0, 1]
    built = sizes_long(main)
    if len(built):
        built = built.assign(bar=built["what"] + " " + built["dtype"])
        sns.barplot(data=built, y="mode", x="MB", hue="bar", ax=ax, errorbar=None,
                    order=ordered(built["mode"]))
        log_axis(ax.xaxis)
        legend_outside(ax, below=True, fontsize=7, title=None, ncol=2)
    else:
        _nothing(ax, "program sizes")
    ax.set_xlabel("MB (log)")
    ax.set_title(f"What each mode builds, N = {n_main}: GraphDef (TF), StableHLO and "
                 "executable (JAX), compiled code (torch.compile)", fontsize=9)
    ax = axes[1, 0]
    ablation = ok[(ok["n"] == n_main) & ok["mode"].isin(["numpy", "constant"])]
    if len(ablation):
        sns.barplot(data=ablation, x="mode", y="first_call_seconds", hue="grappler", ax=ax,
                    errorbar=None, hue_order=[g for g in GRAPPLER_ORDER
                                              if g in set(ablation["grappler"])])
        log_axis(ax.yaxis)
    else:
        _nothing(ax, "TF1 constant modes")
    ax.set_ylabel("first call seconds (log)")
    ax.set_title("Ablation: the constant modes' first call with graph optimisations "
                 "switched off", fontsize=9)
    legend_outside(ax, below=True, fontsize=7, title_fontsize=7, ncol=2)
    sweep = swept(ok)
    if len(sweep):
        sns.lineplot(data=sweep, x="n", y="first_call_seconds", hue="variant", marker="o",
                     ax=axes[1, 1], errorbar=None)
    _against_n(axes[1, 1], len(sweep), "mode measured at several N", "first call seconds (log)",
               "First call against N (float64)", sweep["n"])
    grown = sizes_long(sweep.drop(columns="mode").rename(columns={"variant": "mode"}))
    if len(grown):
        sns.lineplot(data=grown.assign(line=grown["mode"] + ": " + grown["what"]), x="n",
                     y="MB", hue="line", marker="o", ax=axes[2, 0], errorbar=None)
    _against_n(axes[2, 0], len(grown), "mode measured at several N", "MB (log)",
               "What is built against N (float64): an embedded input grows with N",
               grown["n"] if len(grown) else ())
    ax = axes[2, 1]
    compiled = sweep[sweep["compile_seconds"].notna()]
    if len(compiled):
        sns.lineplot(data=compiled, x="n", y="compile_seconds", hue="variant", ax=ax,
                     errorbar=None)
        folded = compiled["output_folded"].astype("boolean").fillna(False).astype(bool)
        ax.scatter(compiled.loc[folded, "n"], compiled.loc[folded, "compile_seconds"],
                   marker="o", color="#c44e52", zorder=3, label="output folded by XLA")
        ax.scatter(compiled.loc[~folded, "n"], compiled.loc[~folded, "compile_seconds"],
                   marker="o", facecolors="none", edgecolors="#333333", zorder=3,
                   label="not folded")
    _against_n(ax, len(compiled), "JAX mode measured at several N",
               "trace + lower + compile seconds (log)",
               "JAX: compilation within the first call against N (float64)", compiled["n"])
    failed = runs[runs["status"] != "ok"]
    if len(failed):
        fig.text(0.01, 0.005, "did not finish: " + "; ".join(
            f"{r.mode} {r.dtype} N={r.n} ({r.status})" for r in failed.itertuples()),
            fontsize=7, color="#c44e52")
    fig.tight_layout()
    return fig


def figure_headline(runs: pd.DataFrame):
    """Q2 at a glance: per mode of every framework, the first call against the later calls
    (medians over repeats, log), each bar in two views: dark, the computation with its output
    left on the device; light beyond it, the fetch of the output to the host (the whole bar is
    the call with its result on the host). The size of the graph (TensorFlow) or program (JAX)
    the mode builds is written beside it; a panel per dtype at the size where most modes ran,
    its title saying how much of a call the fetch took."""
    runs = with_columns(runs)
    ok = runs[runs["status"] == "ok"]
    n_main = main_size(runs)
    main = ok[(ok["n"] == n_main) & (ok["grappler"] == "default")]
    dtypes = sorted(main["dtype"].unique()) or ["(none)"]
    modes = ordered(main["mode"])
    # at least 7 in wide (the two-line title) and as tall as 6 modes (the panels at least half
    # of the figure beside the title and legend)
    fig, axes = plt.subplots(1, len(dtypes), figsize=(max(7.0, 5.5 * len(dtypes)),
                                                      2.2 + 0.6 * max(6, len(modes))),
                             squeeze=False, sharey=True)
    y = np.arange(len(modes))
    bars = (("first_call_seconds", "first_compute_seconds", -0.2, "first call",
             ("#eaa9ab", "#c44e52")),
            ("steady_median_seconds", "steady_compute_median_seconds", 0.2, "later calls",
             ("#a9bedf", "#4c72b0")))
    for ax, dtype in zip(axes[0], dtypes, strict=True):
        part = main[main["dtype"] == dtype].groupby("mode").median(numeric_only=True)
        part = part.reindex(modes)
        for call, compute, offset, label, (light, dark) in bars:
            ax.barh(y + offset, part[call], height=0.38, color=light, label=f"{label}, + fetch")
            # results from before the split: the whole call drawn dark (the title says so)
            ax.barh(y + offset, part[compute].fillna(part[call]), height=0.38, color=dark,
                    label=f"{label}, compute")
        log_axis(ax.xaxis)
        right = np.nanmax(part[["first_call_seconds", "steady_median_seconds"]].to_numpy()) \
            if part[["first_call_seconds", "steady_median_seconds"]].notna().any().any() else 1
        for yi, graph, program in zip(y, part["graphdef_bytes"], part["program_bytes"],
                                      strict=True):
            size = (f"GraphDef {fmt_bytes(graph)}" if pd.notna(graph) and graph else
                    f"program {fmt_bytes(program)}" if pd.notna(program) and program else "")
            if size:  # beside the panel, so its axis ends near the bars
                ax.text(1.01, yi, size, va="center", fontsize=7, color="#555555",
                        transform=ax.get_yaxis_transform())
        ax.set_xlim(right=right * 1.5)
        ax.set_yticks(y, modes, fontsize=8)
        ax.set_xlabel("seconds per call (log)")
        ax.set_title(f"{dtype}: {fetch_note(part)}", fontsize=8, loc="left")
    axes[0, 0].invert_yaxis()  # once: the panels share the axis
    fig.suptitle(f"Q2: first call against later calls (median) per feed mode, N = {n_main} "
                 "images\ndark: compute, the output left on the device; light beyond it: the "
                 "fetch to the host", fontsize=9)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    order = [1, 0, 3, 2]   # per call: compute, then the fetch beyond it
    fig.legend([handles[i] for i in order], [labels[i] for i in order], fontsize=8, ncol=4,
               loc="lower center", frameon=False, bbox_to_anchor=(0.5, 0.0))
    fig.tight_layout(rect=(0, 0.3 / fig.get_figheight(), 1, 1))   # 0.3 in for the legend
    return fig


def draw(results, figures: Path) -> list[Path]:
    # headline last: the Makefile treats it as made with (and so newer than) feedmode.png
    return (save(figure_feedmode(results.runs), figures, "feedmode")
            + save(figure_headline(results.runs), figures, "headline"))
