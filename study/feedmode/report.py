"""The feed-mode study's section of the report."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from study.feedmode.figures import main_size
from study.paired import compare
from study.report.blocks import Block, fmt_seconds

# What a comparison of two modes holds fixed; the repeats are measurements of it.
INSTANCE_COLUMNS = ["n", "dtype", "seed", "device"]


def _feed_rows(runs, mode, dtype, n, grappler="default"):
    return runs[(runs["mode"] == mode) & (runs["dtype"] == dtype) & (runs["n"] == n)
                & (runs["grappler"] == grappler) & (runs["status"] == "ok")]


def _feed_row(runs, mode, dtype, n, grappler="default"):
    """The medians over a mode's repeats (None when it has no finished run)."""
    rows = _feed_rows(runs, mode, dtype, n, grappler)
    if rows.empty:
        return None
    return rows.median(numeric_only=True)


def mode_comparison(runs, a: str, b: str, dtype: str, n: int, value: str):
    """Mode a against mode b on one quantity, paired on the instance, over the repeats."""
    return compare(_feed_rows(runs, a, dtype, n), _feed_rows(runs, b, dtype, n),
                   INSTANCE_COLUMNS, value)


def mode_phrase(runs, a: str, b: str, dtype: str, n: int, value: str, quantity: str) -> str:
    return mode_comparison(runs, a, b, dtype, n, value).phrase(a, b, quantity)


def original_feedmode_answer(runs: pd.DataFrame) -> list[str]:
    """Was tf.placeholder really 4-5x faster than tf.constant? The measured answer."""

    n = main_size(runs)
    out = []
    for dtype in sorted(runs["dtype"].unique()):
        const, holder = (_feed_row(runs, m, dtype, n) for m in ("constant", "placeholder"))
        if const is None or holder is None:
            continue
        out.append(
            f"N = {n}, {dtype}: tf.constant's first call took "
            f"{fmt_seconds(const['first_call_seconds'])} and later calls "
            f"{fmt_seconds(const['steady_median_seconds'])}; the placeholder's first call "
            f"{fmt_seconds(holder['first_call_seconds'])} and later calls "
            f"{fmt_seconds(holder['steady_median_seconds'])} (medians over repeats). First "
            "call: " + mode_phrase(runs, "constant", "placeholder", dtype, n,
                                   "first_call_seconds", "first-call time")
            + "; later calls: " + mode_phrase(runs, "constant", "placeholder", dtype, n,
                                              "steady_median_seconds", "time per call") + ".")
        if const["graphdef_bytes"] and holder["graphdef_bytes"]:
            out.append(f"  The constant's graph embeds the input: a "
                       f"{const['graphdef_bytes'] / 1e6:.3g} MB GraphDef against "
                       f"{holder['graphdef_bytes'] / 1e6:.3g} MB for the placeholder.")
        for variant, words in (("no-folding", "constant folding off (Grappler's and the classic "
                                               "optimizer's)"),
                               ("off", "all graph optimisations off")):
            off = _feed_row(runs, "constant", dtype, n, variant)
            if off is None:
                continue
            out.append(f"  With {words}, the constant's first call took "
                       f"{fmt_seconds(off['first_call_seconds'])} (later calls "
                       f"{fmt_seconds(off['steady_median_seconds'])}).")
        arg = _feed_row(runs, "function-arg", dtype, n)
        if arg is not None:
            out.append(f"  TF2's tf.function with the data as an argument: first call "
                       f"{fmt_seconds(arg['first_call_seconds'])}, later calls "
                       f"{fmt_seconds(arg['steady_median_seconds'])}.")
    sweep = runs[(runs["mode"] == "constant") & (runs["grappler"] == "default")
                 & (runs["status"] == "ok")].sort_values("n")
    if sweep["n"].nunique() > 1:
        lo, hi = sweep.iloc[0], sweep.iloc[-1]
        out.append(f"The constant's first call grew from {fmt_seconds(lo['first_call_seconds'])}"
                   f" at N = {lo['n']} to {fmt_seconds(hi['first_call_seconds'])} at "
                   f"N = {hi['n']} ({lo['dtype']}).")
    failed = runs[runs["status"] != "ok"]
    if len(failed):
        out.append("Did not finish: " + "; ".join(
            f"{r.mode} {r.dtype} N={r.n} grappler={r.grappler} ({r.status})"
            for r in failed.itertuples()) + ".")
    return out or ["The feed-mode results hold no constant/placeholder pair at one N."]


def feedmode_table(runs: pd.DataFrame) -> pd.DataFrame:
    columns = ["mode", "grappler", "dtype", "n", "status", "build_seconds", "session_seconds",
               "first_call_seconds", "steady_median_seconds", "total_calls_seconds",
               "graphdef_bytes", "peak_memory_mb", "check_max_abs_error"]
    table = runs[[c for c in columns if c in runs]].sort_values(["n", "dtype", "mode",
                                                                 "grappler"])
    for column in ("build_seconds", "session_seconds", "first_call_seconds",
                   "steady_median_seconds", "total_calls_seconds"):
        if column in table:
            table[column] = table[column].map(fmt_seconds)
    if "graphdef_bytes" in table:
        table["graphdef_bytes"] = table["graphdef_bytes"].map(
            lambda b: "–" if pd.isna(b) or not b else f"{b / 1e6:.3g} MB")
    if "peak_memory_mb" in table:
        table["peak_memory_mb"] = table["peak_memory_mb"].map(
            lambda m: "–" if pd.isna(m) else f"{m:.0f} MB" if m < 1024 else f"{m / 1024:.3g} GB")
    if "check_max_abs_error" in table:
        table["check_max_abs_error"] = table["check_max_abs_error"].map(
            lambda e: "–" if pd.isna(e) else f"{e:.1e}")
    return table.rename(columns={
        "build_seconds": "graph build", "session_seconds": "session", "first_call_seconds":
        "first call", "steady_median_seconds": "later calls (median)", "total_calls_seconds":
        "all calls", "graphdef_bytes": "GraphDef", "peak_memory_mb": "peak memory (net)",
        "check_max_abs_error": "max error vs NumPy"})


def section(results, figures: Path) -> list[Block]:
    runs = results.runs
    blocks = [Block("h2", "The second question: was tf.placeholder really 4-5x faster than "
                          "tf.constant?", anchor=f"{results.folder.name}-q2")]
    headline = figures / "headline.png"
    if headline.exists():
        blocks.append(Block("figure", headline, "First call against later calls per feed mode, "
                                                "with the size of the graph each TF1 mode "
                                                "builds."))
    blocks.append(Block("list", original_feedmode_answer(runs)))
    figure = figures / "feedmode.png"
    if figure.exists():
        blocks.append(Block("figure", figure, "First call against later calls per mode, "
                                              "GraphDef size, the Grappler ablation and "
                                              "first-call cost against N."))
    blocks += [Block("h3", "CNN feed modes: every run"),
               Block("table", feedmode_table(runs), "every run")]
    return blocks
