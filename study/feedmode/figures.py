"""The feed-mode study's figure, drawn from its results table only."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.ticker import NullLocator

from study.figures import legend_outside, log_axis, save

GRAPPLER_ORDER = ("default", "no-constant-folding", "no-folding", "off")


def main_size(runs: pd.DataFrame) -> int:
    """The batch size N at which the most modes ran: the one the mode table is about."""
    ok = runs[runs["status"] == "ok"]
    counts = ok.groupby("n")["mode"].nunique()
    if not len(counts):
        return int(runs["n"].max())
    return int(counts[counts == counts.max()].index.max())


def figure_feedmode(runs: pd.DataFrame):
    """CNN feed modes: first call against steady state per mode (log), the GraphDef each TF1
    mode builds, the Grappler ablation of the constant modes, and first-call cost against N."""
    ok = runs[runs["status"] == "ok"].copy()
    n_main = main_size(runs)
    fig, axes = plt.subplots(2, 2, figsize=(13, 10))
    ax = axes[0, 0]
    main = ok[(ok["n"] == n_main) & (ok["grappler"] == "default")]
    long = main.melt(id_vars=["mode", "dtype"], value_vars=["first_call_seconds",
                                                            "steady_median_seconds"],
                     var_name="call", value_name="seconds")
    long["call"] = long["call"].map({"first_call_seconds": "first call",
                                     "steady_median_seconds": "later calls (median)"})
    long["bar"] = long["call"] + " " + long["dtype"]
    sns.barplot(data=long, y="mode", x="seconds", hue="bar", ax=ax, errorbar=None)
    log_axis(ax.xaxis)
    ax.set_xlabel("seconds per call (log)")
    ax.set_title(f"First call and later calls per mode, N = {n_main}", fontsize=9)
    legend_outside(ax, below=True, fontsize=7, title=None, ncol=2)
    ax = axes[0, 1]
    graph = main[main["graphdef_bytes"].notna() & (main["graphdef_bytes"] > 0)]
    sns.barplot(data=graph.assign(MB=graph["graphdef_bytes"] / 1e6), y="mode", x="MB",
                hue="dtype", ax=ax, errorbar=None)
    log_axis(ax.xaxis)
    ax.set_xlabel("serialized GraphDef (MB, log)")
    ax.set_title(f"Graph size of the TF1 modes, N = {n_main}", fontsize=9)
    legend_outside(ax, below=True, fontsize=7, title_fontsize=7, ncol=2)
    ax = axes[1, 0]
    ablation = ok[(ok["n"] == n_main) & ok["mode"].isin(["numpy", "constant"])]
    sns.barplot(data=ablation, x="mode", y="first_call_seconds", hue="grappler", ax=ax,
                errorbar=None, hue_order=[g for g in GRAPPLER_ORDER
                                          if g in set(ablation["grappler"])])
    log_axis(ax.yaxis)
    ax.set_ylabel("first call seconds (log)")
    ax.set_title("Ablation: the constant modes' first call with graph optimisations "
                 "switched off", fontsize=9)
    legend_outside(ax, below=True, fontsize=7, title_fontsize=7, ncol=2)
    ax = axes[1, 1]
    sweep = ok[ok["mode"].isin(["constant", "placeholder"]) & (ok["dtype"] == "float64")]
    sweep = sweep.assign(variant=sweep["mode"] + " (grappler " + sweep["grappler"] + ")")
    sns.lineplot(data=sweep, x="n", y="first_call_seconds", hue="variant", marker="o", ax=ax,
                 errorbar=None)
    log_axis(ax.yaxis)
    ax.set_xscale("log")  # a tick at every N swept, in one plain format
    swept = sorted({int(n) for n in runs.loc[runs["mode"].isin(["constant", "placeholder"])
                                              & (runs["dtype"] == "float64"), "n"]})
    ax.set_xticks(swept, [str(n) for n in swept])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("N (images, log)")
    ax.set_ylabel("first call seconds (log)")
    ax.set_title("First call against N (float64)", fontsize=9)
    legend_outside(ax, below=True, fontsize=7, title_fontsize=7, ncol=2)
    failed = runs[runs["status"] != "ok"]
    if len(failed):
        fig.text(0.01, 0.005, "did not finish: " + "; ".join(
            f"{r.mode} {r.dtype} N={r.n} ({r.status})" for r in failed.itertuples()),
            fontsize=7, color="#c44e52")
    fig.tight_layout()
    return fig


def figure_headline(runs: pd.DataFrame):
    """Q2 at a glance: per mode, the first call against the later calls (medians over repeats,
    log), with the size of the graph each TF1 mode builds written beside it; a panel per
    dtype at the size where most modes ran."""
    import numpy as np

    ok = runs[runs["status"] == "ok"]
    n_main = main_size(runs)
    main = ok[(ok["n"] == n_main) & (ok["grappler"] == "default")]
    dtypes = sorted(main["dtype"].unique()) or ["(none)"]
    modes = list(dict.fromkeys(m for m in MODE_ORDER if m in set(main["mode"])))
    modes += sorted(set(main["mode"]) - set(modes))
    fig, axes = plt.subplots(1, len(dtypes), figsize=(5.5 * len(dtypes), 2.2 + 0.45 * max(
        len(modes), 1)), squeeze=False, sharey=True)
    y = np.arange(len(modes))
    for ax, dtype in zip(axes[0], dtypes, strict=True):
        part = main[main["dtype"] == dtype].groupby("mode").median(numeric_only=True)
        part = part.reindex(modes)
        ax.barh(y - 0.2, part["first_call_seconds"], height=0.38, color="#c44e52",
                label="first call")
        ax.barh(y + 0.2, part["steady_median_seconds"], height=0.38, color="#4c72b0",
                label="later calls (median)")
        log_axis(ax.xaxis)
        right = np.nanmax(part[["first_call_seconds", "steady_median_seconds"]].to_numpy()) \
            if part[["first_call_seconds", "steady_median_seconds"]].notna().any().any() else 1
        for yi, graph in zip(y, part["graphdef_bytes"], strict=True):
            if pd.notna(graph) and graph:  # beside the panel, so its axis ends near the bars
                ax.text(1.0, yi, f" GraphDef {graph / 1e6:.3g} MB", va="center", fontsize=7,
                        color="#555555", transform=ax.get_yaxis_transform())
        ax.set_xlim(right=right * 1.5)
        ax.set_yticks(y, modes, fontsize=8)
        ax.set_xlabel("seconds per call (log)")
        ax.set_title(dtype, fontsize=9, loc="left")
    axes[0, 0].invert_yaxis()  # once: the panels share the axis
    fig.suptitle(f"Q2: first call against later calls per feed mode, N = {n_main} images",
                 fontsize=10)
    axes[0, -1].legend(fontsize=8, loc="lower left", bbox_to_anchor=(0.55, 1.0), ncol=2,
                       frameon=False, borderaxespad=0.2)
    fig.tight_layout()
    return fig


MODE_ORDER = ("numpy", "constant", "placeholder", "variable", "eager-numpy", "eager-tensor",
              "function-arg", "function-const", "function-numpy", "function-xla", "fused")


def draw(results, figures: Path) -> list[Path]:
    # headline last: the Makefile treats it as made with (and so newer than) feedmode.png
    return (save(figure_feedmode(results.runs), figures, "feedmode")
            + save(figure_headline(results.runs), figures, "headline"))
