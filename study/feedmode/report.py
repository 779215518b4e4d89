"""The feed-mode study's section of the report. Every question is answered on the call with
its result on the host and, where the fetch is more than a small part of a call (a GPU's copy
across the bus), on the computation alone as well (the two views: study.feedmode.measure).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from study.feedmode.figures import COMPUTE, FETCH, SMALL_FETCH, fmt_bytes, main_size, with_columns
from study.feedmode.model import IMAGE, MODES, modes_of
from study.frameworks.registry import FRAMEWORKS
from study.paired import compare
from study.report.blocks import Block, figure_block, fmt_seconds

# What a comparison of two modes holds fixed (the rest of their configuration: a mode's runs
# with another number of calls are another configuration, never its repeats); the repeats are
# measurements of it.
INSTANCE_COLUMNS = ["n", "dtype", "seed", "device", "calls", "check_n"]


def _feed_rows(runs, mode, dtype, n, grappler="default"):
    return runs[(runs["mode"] == mode) & (runs["dtype"] == dtype) & (runs["n"] == n)
                & (runs["grappler"] == grappler) & (runs["status"] == "ok")]


def _feed_row(runs, mode, dtype, n, grappler="default"):
    """The medians over a mode's repeats (None when it has no finished run)."""
    rows = _feed_rows(runs, mode, dtype, n, grappler)
    return None if rows.empty else rows.median(numeric_only=True)


def mode_comparison(runs, a: str, b: str, dtype: str, n: int, value: str):
    """Mode a against mode b on one quantity, paired on the instance, over the repeats."""
    return compare(_feed_rows(runs, a, dtype, n), _feed_rows(runs, b, dtype, n),
                   INSTANCE_COLUMNS, value)


def mode_phrase(runs, a: str, b: str, dtype: str, n: int, value: str, quantity: str) -> str:
    return mode_comparison(runs, a, b, dtype, n, value).phrase(a, b, quantity)


def fetch_share(rows) -> float:
    """The largest share of a call (first or later, medians) that the fetch to the host took
    over the given rows; NaN where a row has no split (results from before it was measured)."""
    shares = [row[FETCH[call]] / row[call] for row in rows for call in FETCH]
    return float("nan") if not shares or any(pd.isna(shares)) else max(shares)


def compute_view(runs, rows: dict, pairs, dtype: str, n: int) -> str:
    """The compute-only view of the comparisons `pairs` ((a, b, call column, words)) of the modes
    in `rows` (mode -> medians): one sentence that it agrees where the fetch is small, else the
    compute-only comparisons ("" for results without the split)."""
    share = fetch_share(rows.values())
    if np.isnan(share):
        return ""
    device = "/".join(sorted(set(_feed_rows(runs, next(iter(rows)), dtype, n)["device"]
                                 .dropna()))) or "device"
    if share <= SMALL_FETCH:
        return (f"Compute only (the output left on the {device}) gives the same answer: the "
                f"fetch to the host took at most {share:.1%} of a call (medians).")
    return (f"Compute only (the output left on the {device}; the fetch to the host took up to "
            f"{share:.0%} of a call): " + "; ".join(
                f"{mode} first call {fmt_seconds(row['first_compute_seconds'])}, later calls "
                f"{fmt_seconds(row['steady_compute_median_seconds'])}"
                for mode, row in rows.items()) + " (medians)." + "".join(
                f" {mode_phrase(runs, a, b, dtype, n, COMPUTE[value], words)}."
                for a, b, value, words in pairs))


def original_feedmode_answer(runs: pd.DataFrame) -> list[str]:
    """Was tf.placeholder really 4-5x faster than tf.constant? The measured answer."""

    runs = with_columns(runs)
    n = main_size(runs)
    out = []
    for dtype in sorted(runs["dtype"].unique()):
        const, holder = (_feed_row(runs, m, dtype, n) for m in ("constant", "placeholder"))
        if const is None or holder is None:
            continue
        pairs = [("constant", "placeholder", QUANTITIES[words], words)
                 for words in ("first-call time", "time per call")]
        first, later = (mode_phrase(runs, a, b, dtype, n, value, words)
                        for a, b, value, words in pairs)
        compute = compute_view(runs, {"constant": const, "placeholder": holder}, pairs, dtype, n)
        out.append(f"N = {n}, {dtype}: tf.constant's {_calls(const, ' took', ' and')}; the "
                   f"placeholder's {_calls(holder, and_=' and')} (medians over repeats). First "
                   f"call: {first}; later calls: {later}." + (" " + compute if compute else ""))
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
            out.append(f"  TF2's tf.function with the data as an argument: {_calls(arg)}.")
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


QUANTITIES = {"time per call": "steady_median_seconds", "first-call time": "first_call_seconds"}


def framework_pairs() -> dict[str, list[tuple]]:
    """framework -> [(mode, the mode it is compared with, quantity, words)], from the pairs its
    modes declare in the registry (TensorFlow's are the original question's, answered above)."""
    pairs: dict[str, list[tuple]] = {}
    for name, mode in MODES.items():
        if mode.against is not None:
            other, words = mode.against
            pairs.setdefault(mode.framework, []).append((name, other, QUANTITIES[words], words))
    return pairs


def _calls(row, took: str = "", and_: str = ",") -> str:
    """'first call 1.2 s (compilation 0.9 s), later calls 3 ms' of a mode's medians."""
    compile_part = (f" (compilation {fmt_seconds(row['compile_seconds'])})"
                    if pd.notna(row.get("compile_seconds")) else "")
    return (f"first call{took} {fmt_seconds(row['first_call_seconds'])}{compile_part}{and_} "
            f"later calls {fmt_seconds(row['steady_median_seconds'])}")


def frameworks_answer(runs: pd.DataFrame) -> list[str]:
    """The same question on the other frameworks, at the size of the mode table: each mode's first
    and later calls (medians over repeats), and the pairs that matter, paired over repeats."""
    runs = with_columns(runs)
    n = main_size(runs)
    out = []
    for framework, pairs in framework_pairs().items():
        for dtype in sorted(runs["dtype"].unique()):
            rows = {m: _feed_row(runs, m, dtype, n) for m in modes_of(framework)}
            rows = {m: r for m, r in rows.items() if r is not None}
            if not rows:
                continue
            line = f"{FRAMEWORKS[framework].title}, N = {n}, {dtype}: " + "; ".join(
                f"{mode} {_calls(row)}" for mode, row in rows.items()) + " (medians)."
            pairs_here = [(a, b, value, words) for a, b, value, words in pairs
                          if a in rows and b in rows]
            compared = [mode_phrase(runs, a, b, dtype, n, value, words)
                        for a, b, value, words in pairs_here]
            compute = compute_view(runs, rows, pairs_here, dtype, n)
            out.append(line + ("" if not compared else " " + "; ".join(compared) + ".")
                       + (" " + compute if compute else ""))
    return out


def jax_constant_answer(runs: pd.DataFrame) -> list[str]:
    """Does the installed JAX still embed a closed-over array in the compiled program, and what
    does it cost against N? Read from jax-constant's rows (medians per N)."""
    runs = with_columns(runs)
    out = []
    for dtype in sorted(runs["dtype"].unique()):
        rows = runs[(runs["mode"] == "jax-constant") & (runs["dtype"] == dtype)
                    & (runs["status"] == "ok")]
        if rows.empty:
            continue
        by_n = rows.groupby("n").median(numeric_only=True).sort_index()
        folded = rows.groupby("n")["output_folded"].agg(lambda v: bool(v.fillna(False).all()))
        parts = [f"{fmt_seconds(r['first_call_seconds'])} at N = {n} (compilation "
                 f"{fmt_seconds(r['compile_seconds'])}, StableHLO {fmt_bytes(r['program_bytes'])}"
                 f", executable {fmt_bytes(r['executable_bytes'])}"
                 f"{', output folded' if folded[n] else ''})" for n, r in by_n.iterrows()]
        out.append(f"JAX's jitted function closing over the array (jax-constant, {dtype}): "
                   f"first call " + "; ".join(parts) + ".")
        if len(by_n) > 1:
            lo, hi = by_n.index[0], by_n.index[-1]
            per_image = (by_n.loc[hi, "program_bytes"] - by_n.loc[lo, "program_bytes"]) / (
                hi - lo)
            image = IMAGE * IMAGE * np.dtype(dtype).itemsize
            verdict = ("the installed JAX embeds the closed-over array in the program as a "
                       "constant" if per_image >= 0.9 * image else
                       "the installed JAX does not embed the closed-over array")
            growth = by_n.loc[hi, "first_call_seconds"] / by_n.loc[lo, "first_call_seconds"]
            out.append(f"  Its program grows by {per_image:.0f} bytes per image between N = {lo}"
                       f" and N = {hi}, against {image} bytes per input image: {verdict}; its "
                       f"first call grew {growth:.3g}x for {hi / lo:.3g}x the images.")
        if folded.any():
            still = [int(n) for n in folded.index if folded[n]]
            not_folded = [int(n) for n in folded.index if not folded[n]]
            out.append("  XLA evaluated the whole network at compile time (the compiled program "
                       f"returns a constant) at N = {', '.join(map(str, still))}"
                       + (f", not at N = {', '.join(map(str, not_folded))}" if not_folded
                          else "") + ".")
        resident = runs[(runs["mode"] == "jax-resident") & (runs["dtype"] == dtype)
                        & (runs["status"] == "ok") & runs["n"].isin(by_n.index)]
        if len(resident):
            first = resident.groupby("n")["first_call_seconds"].median().sort_index()
            out.append("  jax-resident's first call at the same N: " + "; ".join(
                f"{fmt_seconds(v)} at N = {n}" for n, v in first.items()) + ".")
    return out


def _size(size) -> str:
    return "–" if pd.isna(size) or not size else fmt_bytes(size)


# the table of every run: column -> (its heading, how a value is written; None: as it is)
TABLE = {
    "mode": ("mode", None), "grappler": ("grappler", None), "dtype": ("dtype", None),
    "n": ("n", None), "status": ("status", None),
    "build_seconds": ("graph build", fmt_seconds), "session_seconds": ("session", fmt_seconds),
    "first_call_seconds": ("first call", fmt_seconds),
    "first_compute_seconds": ("first call, compute only", fmt_seconds),
    "compile_seconds": ("of which compilation (JAX)", fmt_seconds),
    "steady_median_seconds": ("later calls (median)", fmt_seconds),
    "steady_compute_median_seconds": ("later calls, compute only", fmt_seconds),
    "steady_fetch_median_seconds": ("later calls, fetch to host", fmt_seconds),
    "total_calls_seconds": ("all calls", fmt_seconds),
    "graphdef_bytes": ("GraphDef", _size), "program_bytes": ("StableHLO (JAX)", _size),
    "executable_bytes": ("compiled code", _size),
    "peak_memory_mb": ("peak memory (net)", lambda m: "–" if pd.isna(m) else
                       f"{m:.0f} MB" if m < 1024 else f"{m / 1024:.3g} GB"),
    "check_max_abs_error": ("max error vs NumPy", lambda e: "–" if pd.isna(e) else f"{e:.1e}"),
}


def feedmode_table(runs: pd.DataFrame) -> pd.DataFrame:
    table = runs[[c for c in TABLE if c in runs]].sort_values(["n", "dtype", "mode", "grappler"])
    for column in table.columns:
        if TABLE[column][1] is not None:
            table[column] = table[column].map(TABLE[column][1])
    return table.rename(columns={column: TABLE[column][0] for column in table.columns})


def section(results, figures: Path) -> list[Block]:
    runs = results.runs
    blocks = [Block("h2", "The second question: was tf.placeholder really 4-5x faster than "
                          "tf.constant?", anchor=f"{results.folder.name}-q2")]
    blocks += figure_block(figures / "headline.png", "First call against later calls per feed "
                           "mode: dark, the computation with its output left on the device; "
                           "light beyond it, the fetch to the host. Beside each, the size of the "
                           "graph or program the mode builds.")
    blocks.append(Block("list", original_feedmode_answer(runs)))
    others = frameworks_answer(runs) + jax_constant_answer(runs)
    if others:
        present = {MODES[m].framework for m in runs["mode"].unique() if m in MODES}
        titles = [FRAMEWORKS[f].title for f in framework_pairs() if f in present] or ["others"]
        named = ", ".join(titles[:-1]) + (" and " if len(titles) > 1 else "") + titles[-1]
        blocks += [Block("h3", f"The same question on {named}"), Block("list", others)]
    blocks += figure_block(figures / "feedmode.png", "First call against later calls per mode "
                           "(and the later calls' compute only), what each mode builds, the "
                           "Grappler ablation, and against N: first-call cost, what is built, "
                           "and JAX's compilation.")
    blocks += [Block("h3", "CNN feed modes: every run"),
               Block("table", feedmode_table(runs), "every run")]
    return blocks
