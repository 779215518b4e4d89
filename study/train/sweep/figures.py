"""The train study's figures: the headline (time to the validation target per optimizer and
framework, with intervals over seeds) and the validation metric against training time, a line
style and marker per framework (its adapter's STYLE)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from convergence_study.errors import InputError
from study.figures import legend_outside, log_axis, save
from study.train.frameworks import adapter
from study.train.sweep.report import problem_title
from study.train.sweep.summary import keyed, measured, summarize

PLAIN = ("-", "o")  # a framework whose adapter is not registered here (results drawn elsewhere)


def style(framework: str) -> tuple[str, str]:
    """(line style, marker) of a framework's runs."""
    try:
        return adapter(framework).STYLE
    except InputError:
        return PLAIN


def _problems(table: pd.DataFrame) -> list[tuple[str, str]]:
    return sorted({(m, d) for m, d in zip(table["model"], table["data"], strict=True)})


def figure_headline(runs: pd.DataFrame):
    table, named_runs = summarize(runs), measured(runs)
    problems = _problems(table)
    heights = [max(2.0, 0.32 * len(table[(table["model"] == m) & (table["data"] == d)]) + 1)
               for m, d in problems] or [2.0]
    fig, axes = plt.subplots(len(problems) or 1, 1, figsize=(8, sum(heights)),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    for ax, (model, data) in zip(axes[:, 0], problems, strict=False):
        part = table[(table["model"] == model) & (table["data"] == data)]
        part = part.sort_values(["to_target", "configuration"], ascending=[False, True])
        finite = part["to_target"][np.isfinite(part["to_target"])]
        right = finite.max() * 3 if len(finite) else 1.0
        for y, row in enumerate(part.to_dict("records")):
            colour = f"C{sorted(set(table['optimizer'])).index(row['optimizer']) % 10}"
            if np.isfinite(row["to_target"]):
                low = row["low"] if np.isfinite(row["low"]) else row["to_target"]
                high = row["high"] if np.isfinite(row["high"]) else row["to_target"]
                ax.plot([low, high], [y, y], color=colour, lw=2, alpha=0.6)
                ax.plot(row["to_target"], y, linestyle="none", marker=style(row["backend"])[1],
                        color=colour)
            else:
                ax.plot(right, y, "x", color=colour)
        ax.set_yticks(range(len(part)))
        ax.set_yticklabels([f"{c}  ({r}/{n})" for c, r, n in
                            zip(part["configuration"], part["reached"], part["runs"],
                                strict=True)], fontsize=8)
        log_axis(ax.xaxis)
        ax.set_xlabel("training seconds to the target (x: not reached; reached/seeds)")
        ax.set_title(problem_title(named_runs, model, data), fontsize=10)
    fig.tight_layout()
    return fig


def figure_convergence(runs: pd.DataFrame, traces: pd.DataFrame):
    ok = keyed(measured(runs))
    ok = ok[ok["seed"] == ok["seed"].min()]
    problems = _problems(ok)
    fig, axes = plt.subplots(1, len(problems) or 1, figsize=(6.5 * max(len(problems), 1), 4.2),
                             squeeze=False)
    optimizers = sorted(set(ok["optimizer"]))
    for ax, (model, data) in zip(axes[0], problems, strict=False):
        part = ok[(ok["model"] == model) & (ok["data"] == data)]
        metric = part["target_metric"].iloc[0]
        column = "val_loss" if metric == "val_loss" else "val_metric"
        for row in part.to_dict("records"):
            trace = traces[traces["run_id"] == row["run_id"]].sort_values("step")
            trace = trace[trace["step"] > 0]  # the initial point has 0 training seconds
            colour = f"C{optimizers.index(row['optimizer']) % 10}"
            line, marker = style(row["backend"])
            ax.plot(trace["seconds"], trace[column], linestyle=line,
                    color=colour, lw=1.3, marker=marker, ms=3,
                    label=row["configuration"])
        target = pd.to_numeric(part["target_value"]).dropna()
        if len(target):
            ax.axhline(target.median(), color="black", ls="--", lw=0.8, label="target")
        log_axis(ax.xaxis)
        if metric == "val_loss":
            log_axis(ax.yaxis)
        ax.set_xlabel("training seconds (setup and evaluation excluded)")
        ax.set_ylabel(metric)
        ax.set_title(problem_title(ok, model, data), fontsize=10)
        handles, labels = ax.get_legend_handles_labels()
        unique = dict(zip(labels, handles, strict=True))
        legend_outside(ax, fontsize=7, handles=list(unique.values()), labels=list(unique))
    fig.tight_layout()
    return fig


def draw(results, figures: Path) -> list[Path]:
    # headline last: the Makefile treats it as made with (and so newer than) the others
    return (save(figure_convergence(results.runs, results.table("traces")), figures,
                 "convergence")
            + save(figure_headline(results.runs), figures, "headline"))
