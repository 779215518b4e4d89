"""The convergence report: reports/report.md and a self-contained reports/report.html.

Every sentence that carries a number is generated here from the results tables, never typed by
hand. The report is a list of blocks (heading, text, table, figure) rendered twice.
"""

from __future__ import annotations

import base64
import html
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from study.plots import label_runs
from study.summary import summarize


@dataclass
class Block:
    kind: str  # "h1" | "h2" | "h3" | "p" | "list" | "table" | "figure"
    content: object
    caption: str = ""


def fmt_seconds(value: float) -> str:
    if value is None or not np.isfinite(value):
        return "∞"
    if value >= 1:
        return f"{value:.3g} s"
    if value >= 1e-3:
        return f"{value * 1e3:.3g} ms"
    return f"{value * 1e6:.3g} µs"


def _labelled_summary(runs: pd.DataFrame) -> pd.DataFrame:
    table = summarize(runs)
    labels = label_runs(table.assign(status="converged"))
    return table.assign(config=labels["config"].to_numpy(), data=labels["data"].to_numpy())


def regression_findings(runs: pd.DataFrame) -> list[str]:
    """Per data set: the fastest configuration to the target and what GD and the original
    Adadelta did, each number read from the summary of `runs`."""
    runs = runs[runs["status"] != "skipped"]
    table = _labelled_summary(runs)
    tols = runs["stop_tol"].dropna() if "stop_tol" in runs else pd.Series(dtype=float)
    tol = tols.iloc[0] if len(tols) else None
    target = f"{tol:g}" if tol is not None else "the target"
    out = []
    for data, part in table.groupby("data", sort=True):
        iterative = part[part["optimizer"] != "closed-form"]
        solved = iterative[np.isfinite(iterative["median_seconds"])]
        if solved.empty:
            out.append(f"On {data} no iterative configuration reached {target} in the median.")
            continue
        best = solved.sort_values("median_seconds").iloc[0]
        sentence = (f"Fastest to {target} on {data}: {best['config']}, "
                    f"{fmt_seconds(best['median_seconds'])} "
                    f"[{fmt_seconds(best['ci_low'])}, {fmt_seconds(best['ci_high'])}] "
                    f"(median over {best['runs']} runs, 95% CI) in "
                    f"{best['median_iterations']:.0f} iterations")
        reference = part[part["optimizer"] == "closed-form"]
        if len(reference) and np.isfinite(reference["median_seconds"].min()):
            closed = reference.sort_values("median_seconds").iloc[0]
            sentence += (f"; the closed-form solve took {fmt_seconds(closed['median_seconds'])} "
                         f"({closed['config']})")
        out.append(sentence + ".")
        for optimizer, name in (("gd", "GD"), ("adadelta", "Adadelta")):
            rows = part[part["optimizer"] == optimizer].sort_values("median_seconds")
            if rows.empty:
                continue
            row = rows.iloc[0]
            if np.isfinite(row["median_seconds"]):
                out.append(f"  Best {name} on {data}: {row['config']} needed "
                           f"{row['median_iterations']:.0f} iterations "
                           f"({fmt_seconds(row['median_seconds'])}).")
            else:
                out.append(f"  No {name} configuration on {data} reached {target} in the "
                           f"median; the best one, {row['config']}, ended {row['statuses']} "
                           f"after {row['median_iterations']:.0f} iterations.")
    return out


def per_iteration_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Median seconds per iteration and passes over X per engine, for GD and Adadelta."""
    runs = label_runs(runs[runs["optimizer"].isin(["gd", "adadelta"])
                           & ~runs["status"].isin(["skipped", "error", "oom"])
                           & (runs["iterations"] > 0)])
    if runs.empty:
        return pd.DataFrame()
    runs = runs.assign(passes=runs["seconds_per_iteration"] / runs["read_pass_seconds"])
    return (runs.groupby(["data", "engine", "dtype"])
            .agg(ms_per_iteration=("seconds_per_iteration", lambda s: 1e3 * s.median()),
                 passes_over_X=("passes", "median"), runs=("run_id", "count"))
            .reset_index())


def times_phrase(ours: float, theirs: float, whom: str) -> str:
    """'2.6x slower than NumPy' / '1.8x faster than NumPy' from two seconds-per-iteration."""
    if ours >= theirs:
        return f"{ours / theirs:.2g}x slower than {whom}"
    return f"{theirs / ours:.2g}x faster than {whom}"


def original_regression_answer(runs: pd.DataFrame) -> list[str]:
    """Why NumPy looked 3x faster than TensorFlow: the numbers behind each flaw."""
    table = per_iteration_table(runs)
    out = []
    if table.empty:
        return ["No GD or Adadelta runs with iterations are in the results."]
    raw = table[table["data"].str.startswith("eve") & ~table["data"].str.contains(
        "standardize=True")]
    focus = raw if len(raw) else table
    data = focus["data"].iloc[0]

    def cost(engine, dtype):
        row = focus[(focus["engine"] == engine) & (focus["dtype"] == dtype)]
        return None if row.empty else row.iloc[0]

    numpy64, tf1 = cost("numpy/cpu", "float64"), cost("tf1/cpu", "float32")
    fused = cost("fused+xla/cpu", "float64")
    if fused is None:
        fused = cost("fused/cpu", "float64")
    if numpy64 is not None and tf1 is not None:
        out.append(f"Per iteration on {data}: the original TF1 pattern (feed_dict of the whole "
                   f"frame every step, float32) took {tf1['ms_per_iteration']:.3g} ms "
                   f"({tf1['passes_over_X']:.2g} passes over X), NumPy float64 "
                   f"{numpy64['ms_per_iteration']:.3g} ms ({numpy64['passes_over_X']:.2g} passes): "
                   f"TF1 was "
                   f"{times_phrase(tf1['ms_per_iteration'], numpy64['ms_per_iteration'], 'NumPy')}"
                   f" per iteration.")
    if fused is not None and numpy64 is not None:
        out.append(f"With the data resident and the whole loop compiled "
                   f"({fused['engine']}), TensorFlow took {fused['ms_per_iteration']:.3g} ms "
                   f"per iteration ({fused['passes_over_X']:.2g} passes over X): "
                   + times_phrase(fused["ms_per_iteration"], numpy64["ms_per_iteration"], "NumPy")
                   + ".")
    summary = _labelled_summary(runs[runs["status"] != "skipped"])
    on_data = summary[summary["data"] == data]
    original = on_data[(on_data["optimizer"] == "adadelta")
                       & on_data["hyperparameters"].str.contains('"learning_rate": 1.0')]
    iterative = on_data[on_data["optimizer"] != "closed-form"]
    best = iterative[np.isfinite(iterative["median_seconds"])].sort_values("median_seconds")
    if len(original):
        row = original.sort_values("median_iterations").iloc[0]
        out.append(f"Time per epoch is not time to converge: Adadelta with the original "
                   f"learning rate 1 ({row['config']}) ended {row['statuses']} after "
                   f"{row['median_iterations']:.0f} iterations on {data}.")
    if len(best):
        row = best.iloc[0]
        out.append(f"The fastest iterative configuration to the target on {data} was "
                   f"{row['config']}: "
                   f"{fmt_seconds(row['median_seconds'])} in {row['median_iterations']:.0f} "
                   f"iterations, at {fmt_seconds(row['median_seconds_per_iteration'])} each.")
    return out


def _feed_row(runs, mode, dtype, n, grappler="default"):
    rows = runs[(runs["mode"] == mode) & (runs["dtype"] == dtype) & (runs["n"] == n)
                & (runs["grappler"] == grappler) & (runs["status"] == "ok")]
    return None if rows.empty else rows.iloc[0]


def original_feedmode_answer(runs: pd.DataFrame) -> list[str]:
    """Was tf.placeholder really 4-5x faster than tf.constant? The measured answer."""
    from study.plots import main_size

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
            f"{fmt_seconds(holder['steady_median_seconds'])}. On the first call the "
            f"placeholder was {const['first_call_seconds'] / holder['first_call_seconds']:.2g}x "
            f"faster; on later calls the constant was "
            f"{holder['steady_median_seconds'] / const['steady_median_seconds']:.2g}x faster.")
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
            lambda b: "-" if not b or b != b else f"{b / 1e6:.3g} MB")
    return table


def summary_table(runs: pd.DataFrame) -> pd.DataFrame:
    table = _labelled_summary(runs[runs["status"] != "skipped"])
    return pd.DataFrame({
        "data set": table["data"], "configuration": table["config"],
        "runs": table["runs"], "converged": table["success_rate"].map(lambda r: f"{r:.0%}"),
        "median time to target [95% CI]": [
            f"{fmt_seconds(m)} [{fmt_seconds(lo)}, {fmt_seconds(hi)}]"
            for m, lo, hi in zip(table["median_seconds"], table["ci_low"], table["ci_high"],
                                 strict=True)],
        "setup": table["median_setup_seconds"].map(fmt_seconds),
        "iterations": table["median_iterations"].map(lambda x: f"{x:.0f}"),
        "per iteration": table["median_seconds_per_iteration"].map(fmt_seconds),
        "statuses": table["statuses"],
    })


def environment_table(*frames: pd.DataFrame) -> pd.DataFrame:
    rows = {}
    for frame in frames:
        for column in sorted(c for c in frame.columns if c.startswith("env_")):
            values = sorted({str(v) for v in frame[column].dropna()})
            if values:
                rows.setdefault(column[4:], set()).update(values)
    return pd.DataFrame({"item": list(rows), "value": ["; ".join(sorted(v)) for v in
                                                       rows.values()]})


# ---- rendering ---------------------------------------------------------------------------------

def _md_table(frame: pd.DataFrame) -> str:
    cells = [[str(c) for c in frame.columns]] + [[str(v) for v in row] for row in
                                                 frame.itertuples(index=False)]
    cells = [[c.replace("|", "\\|") for c in row] for row in cells]
    lines = ["| " + " | ".join(cells[0]) + " |", "|" + "---|" * len(cells[0])]
    lines += ["| " + " | ".join(row) + " |" for row in cells[1:]]
    return "\n".join(lines)


def render_markdown(blocks: list[Block], figures_relative_to: Path) -> str:
    parts = []
    for block in blocks:
        if block.kind in ("h1", "h2", "h3"):
            parts.append("#" * int(block.kind[1]) + " " + block.content)
        elif block.kind == "p":
            parts.append(block.content)
        elif block.kind == "list":
            parts.append("\n".join(f"- {item.strip()}" for item in block.content))
        elif block.kind == "table":
            parts.append(_md_table(block.content))
        elif block.kind == "figure":
            rel = os.path.relpath(Path(block.content).resolve(), figures_relative_to.resolve())
            parts.append(f"![{block.caption}]({Path(rel).as_posix()})\n\n*{block.caption}*")
    return "\n\n".join(parts) + "\n"


def render_html(blocks: list[Block], title: str) -> str:
    body = []
    for block in blocks:
        if block.kind in ("h1", "h2", "h3"):
            body.append(f"<{block.kind}>{html.escape(block.content)}</{block.kind}>")
        elif block.kind == "p":
            body.append(f"<p>{html.escape(block.content)}</p>")
        elif block.kind == "list":
            items = "".join(f"<li>{html.escape(i.strip())}</li>" for i in block.content)
            body.append(f"<ul>{items}</ul>")
        elif block.kind == "table":
            body.append(block.content.to_html(index=False, border=0, classes="results",
                                              escape=True))
        elif block.kind == "figure":
            data = base64.b64encode(Path(block.content).read_bytes()).decode()
            body.append(f'<figure><img src="data:image/png;base64,{data}" '
                        f'alt="{html.escape(block.caption)}"><figcaption>'
                        f"{html.escape(block.caption)}</figcaption></figure>")
    style = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto;line-height:1.4}"
             "table.results{border-collapse:collapse;font-size:12px}"
             "table.results td,table.results th{border-bottom:1px solid #ddd;padding:2px 6px}"
             "img{max-width:100%}figcaption{font-style:italic;font-size:13px}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
            f"</title><style>{style}</style></head><body>{''.join(body)}</body></html>\n")


def write_report(blocks: list[Block], out_dir: Path, title: str) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    md, page = out_dir / "report.md", out_dir / "report.html"
    md.write_text(render_markdown(blocks, out_dir))
    page.write_text(render_html(blocks, title))
    return md, page


def regression_blocks(runs: pd.DataFrame, figures: Path) -> list[Block]:
    captions = {
        "convergence_time": "Relative suboptimality against seconds (setup as an offset).",
        "convergence_iterations": "Relative suboptimality against iterations.",
        "time_to_target": "Seconds to the target: setup and iterations; failures hatched.",
        "cost_tradeoff": "Seconds per iteration against iterations, with equal-time lines.",
        "performance_profile": "Performance profiles over data sets and seeds.",
        "regression_feed_modes": "Seconds per iteration per engine, beside one read pass "
                                 "over X.",
    }
    blocks = [Block("h2", "Regression study: time to convergence"),
              Block("list", regression_findings(runs))]
    blocks.append(Block("h3", "Median time to target per configuration"))
    blocks.append(Block("table", summary_table(runs)))
    per_iteration = per_iteration_table(runs)
    if not per_iteration.empty:
        blocks.append(Block("h3", "Seconds per iteration and passes over X (GD, Adadelta)"))
        blocks.append(Block("table", per_iteration.round(3)))
    for name, caption in captions.items():
        path = figures / f"{name}.png"
        if path.exists():
            blocks.append(Block("figure", path, caption))
    return blocks


def stopping_sentence(runs: pd.DataFrame) -> str:
    spec = {c[5:]: runs[c].dropna().iloc[0] for c in runs.columns
            if c.startswith("stop_") and runs[c].notna().any()}
    spec = {k: v for k, v in spec.items() if v is not False}
    return "Stopping rules (any-of): " + json.dumps(spec, default=str) + "."


def build_blocks(results: Path, figures: Path) -> list[Block]:
    """The whole report from whatever study results exist under `results`."""
    regression = results / "regression" / "runs.parquet"
    frames = []
    blocks = [Block("h1", "Convergence study report"),
              Block("p", "Generated by `make reproduce` from the results tables; every number "
                         "below is computed from them.")]
    body = []
    if regression.is_file():
        runs = pd.read_parquet(regression)
        frames.append(runs)
        body += [Block("h2", "The first question: was NumPy really 3x faster than TensorFlow?"),
                 Block("list", original_regression_answer(runs))]
        body += regression_blocks(runs, figures / "regression")
        body.append(Block("p", stopping_sentence(runs)))
    else:
        body.append(Block("p", f"No regression results at {regression}."))
    feedmode = results / "feedmode" / "runs.parquet"
    if feedmode.is_file():
        feed_runs = pd.read_parquet(feedmode)
        frames.append(feed_runs)
        body += [Block("h2", "The second question: was tf.placeholder really 4-5x faster "
                             "than tf.constant?"),
                 Block("list", original_feedmode_answer(feed_runs)),
                 Block("h3", "CNN feed modes: every run"),
                 Block("table", feedmode_table(feed_runs))]
        figure = figures / "feedmode" / "feedmode.png"
        if figure.exists():
            body.append(Block("figure", figure, "First call against later calls per mode, "
                                                "GraphDef size, the Grappler ablation and "
                                                "first-call cost against N."))
    else:
        body.append(Block("p", f"No feed-mode results at {feedmode}."))
    blocks.append(Block("h2", "Environment"))
    blocks.append(Block("table", environment_table(*frames) if frames else pd.DataFrame()))
    return blocks + body


def add_arguments(parser) -> None:
    parser.add_argument("--results", default="results", help="folder holding <study>/runs.parquet")
    parser.add_argument("--figures", default="figures", help="folder holding <study>/*.png")
    parser.add_argument("--out", default="reports", help="where report.md and report.html go")


def main(args) -> int:
    blocks = build_blocks(Path(args.results), Path(args.figures))
    md, page = write_report(blocks, Path(args.out), "Convergence study report")
    print(f"report: {md} and {page}")
    return 0
