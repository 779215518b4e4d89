"""The bench's output: `bench.txt` (every section's table as fixed-width text, under a heading
that says what was divided by what) and one `<section>.parquet` per table, each written under a
temporary name and renamed, so a reader never sees a partial file."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from study.bench.plan import (
    HARNESS_GOAL,
    LOOP_GOAL,
    PASSES,
    PEER_GOALS,
    TARGET_TOL,
    TRACE_GOAL,
    Plan,
)
from study.output import parquet_writer, text_writer, write_files_atomic

INTEGER_COLUMNS = ("n", "d", "iterations", "target_iterations", "points", "max_iter",
                   "peer_iterations")


def _fmt(value, spec: str = ".3g") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if spec == "d":
        return str(int(value))
    if isinstance(value, (int, float, np.integer, np.floating)):
        return format(value, spec)
    return str(value)


def _numeric(text: str) -> bool:
    if text in ("", "-"):
        return True
    try:
        float(text)
    except ValueError:
        return False
    return True


LABEL_COLUMNS = ("optimizer", "backend", "feed", "xla", "formulation", "dtype", "mode", "method",
                 "check", "sweep", "n", "d", "variant", "host_reads")


def _cell(row, key: str) -> str:
    return _fmt(row[key], "d" if key in INTEGER_COLUMNS else ".3g")


def text_table(frame: pd.DataFrame, columns: list[tuple[str, str]]) -> str:
    """Columns (key, header) as fixed-width text; rows that did not run show their labels and
    their status and message instead of figures."""
    if frame.empty:
        return "  (nothing measured)"
    present = [(k, h) for k, h in columns if k in frame.columns]
    cells = [[h for _, h in present]]
    notes = {}
    for _, row in frame.iterrows():
        if row.get("status", "ok") != "ok":
            cells.append([_cell(row, k) if k in LABEL_COLUMNS else "" for k, _ in present])
            notes[len(cells) - 1] = f"{row['status']}: {row.get('message', '')}"
            continue
        cells.append([_cell(row, k) for k, _ in present])
    widths = [max(len(r[i]) for r in cells) for i in range(len(present))]
    numeric = [all(_numeric(r[i]) for r in cells[1:]) for i in range(len(present))]
    lines = []
    for index, r in enumerate(cells):
        line = "  " + "  ".join(c.rjust(w) if numeric[i] else c.ljust(w)
                                for i, (c, w) in enumerate(zip(r, widths, strict=True)))
        if index in notes:
            line = line.rstrip() + "  " + notes[index]
        lines.append(line.rstrip())
    return "\n".join(lines)


def passes_summary(frame: pd.DataFrame) -> str:
    """Passes per iteration (median), one small table per formulation: backends down,
    optimizer and dtype across; configurations that did not run are left out."""
    rows = frame[frame["status"] == "ok"] if "status" in frame else frame
    if rows.empty or "passes_per_iteration" not in rows:
        return "  (no configuration ran)"
    parts = []
    for formulation, part in rows.groupby("formulation", sort=False):
        table = part.pivot_table(index="backend", columns=["dtype", "optimizer"],
                                 values="passes_per_iteration", aggfunc="median", sort=False)
        table.columns = [f"{optimizer} {dtype}" for dtype, optimizer in table.columns]
        table = table.reset_index().rename(columns={"backend": f"formulation {formulation}"})
        parts.append(text_table(table, [(c, c) for c in table.columns]))
    return "\n".join(parts) + "\n  in detail:"


def render(tables: dict, plan: Plan, seconds: float, device: str = "cpu") -> str:
    parts = [f"convergence-study bench ({plan.name}, {device}; every figure a "
             f"ratio of timings taken side by side in this process; bench took {seconds:.0f} s)"]
    if "iterations" in tables:
        frame = tables["iterations"]
        reads = frame.groupby("dtype")["read_pass_seconds"].median() if "read_pass_seconds" \
            in frame else {}
        unit = ", ".join(f"{k} {v * 1e3:.3g} ms" for k, v in dict(reads).items())
        parts.append(f"\n== passes over X per iteration: eve n={plan.rows}, d={frame['d'].max()}, "
                     f"{plan.data_iterations} (data) / {plan.gram_iterations} (gram) iterations "
                     f"per run, median of {plan.repeats} runs; one read pass X.sum(): {unit} "
                     "(one thread; 'all-core passes' divide by the pass split across every "
                     "core)")
        parts.append(passes_summary(frame))
        parts.append(text_table(frame, [
            ("optimizer", "optimizer"), ("backend", "backend"), ("formulation", "form"),
            ("dtype", "dtype"), ("passes_per_iteration", "passes/iter"),
            ("passes_per_iteration_best", "fastest"),
            ("passes_per_iteration_all_cores", "all-core passes"),
            ("seconds_per_iteration", "s/iter"), ("setup_seconds", "setup s")]))
    if "overhead" in tables:
        parts.append(f"\n== overhead: GD 1/L, ours over a minimal loop (goal harness <= "
                     f"{HARNESS_GOAL}, trace <= {TRACE_GOAL}); dtype {plan.dtypes[0]}")
        parts.append(text_table(tables["overhead"], [
            ("check", "check"), ("backend", "backend"), ("formulation", "form"),
            ("ratio", "ratio"), ("ratio_best", "fastest"), ("goal", "goal"),
            ("meets_goal", "meets"),
            ("seconds", "ours s/iter"), ("baseline_seconds", "baseline s/iter"),
            ("what", "what")]))
    if "scaling" in tables:
        parts.append("\n== scaling: synthetic kappa=10, float64; seconds per iteration, passes "
                     "per iteration, and seconds to 1e-8 (loop; setup apart)")
        parts.append(text_table(tables["scaling"], [
            ("sweep", "sweep"), ("n", "n"), ("d", "d"), ("method", "method"),
            ("seconds_per_iteration", "s/iter"), ("passes_per_iteration", "passes/iter"),
            ("target_iterations", "iters to 1e-8"), ("seconds_to_target", "s to 1e-8"),
            ("setup_to_target", "setup s"), ("target_status", "status")]))
        parts.append("\n  fitted log-log slopes (1 = linear)")
        parts.append(text_table(tables["slopes"], [
            ("against", "against"), ("method", "method"), ("metric", "metric"),
            ("slope", "slope"), ("points", "points"), ("range", "range")]))
    if "feedmode" in tables:
        parts.append(f"\n== CNN feed modes: steady seconds per call over the memory floor (read "
                     f"the input once + write the output once), N={plan.feed_n}")
        parts.append(text_table(tables["feedmode"], [
            ("mode", "mode"), ("dtype", "dtype"), ("steady_over_floor", "x floor"),
            ("steady_over_floor_best", "fastest"),
            ("first_over_steady", "first/steady"), ("steady_seconds", "steady s"),
            ("floor_seconds", "floor s")]))
    if "target" in tables:
        parts.append(f"\n== time to relative suboptimality {TARGET_TOL:g} over the "
                     f"normal-equations solve: eve n={plan.rows}, float64, median of "
                     f"{plan.target_repeats}; 'total' adds setup (conversion, Gram pass, "
                     f"tracing) on both sides")
        parts.append(text_table(tables["target"], [
            ("optimizer", "method"), ("backend", "backend"), ("formulation", "form"),
            ("over_normal", "loop/normal"), ("total_over_normal_total", "total/total"),
            ("iterations", "iters"), ("seconds_to_target", "loop s"),
            ("total_seconds", "total s"), ("reference_seconds", "normal s"),
            ("run_status", "status"), ("best", "best")]))
    if "harness" in tables:
        parts.append(f"\n== harness against a hand-written loop: GD 1/L, eve, on the {device}; "
                     f"ours s/iter over the hand loop's, same device, same layout, same host "
                     f"reads (the loss once per iteration; once per chunk in fused modes), "
                     f"timed side by side, median of {plan.harness_repeats} (goal <= "
                     f"{LOOP_GOAL})")
        parts.append(text_table(tables["harness"], [
            ("backend", "engine"), ("dtype", "dtype"), ("n", "n"), ("iterations", "iters"),
            ("host_reads", "host reads"), ("ratio", "ratio"), ("ratio_best", "fastest"),
            ("meets_goal", "meets"), ("seconds", "ours s/iter"),
            ("hand_seconds", "hand s/iter")]))
    if "bandwidth" in tables:
        frame = tables["bandwidth"]
        passes = ", ".join(f"{k} {v}" for k, v in PASSES.items())
        parts.append(f"\n== fraction of the copy bandwidth on the {device}: bytes of X an "
                     f"iteration reads (passes: {passes}) per second over a measured copy of "
                     f"an X-sized float64 array (y = x * s), per framework; median of "
                     f"{plan.bandwidth_repeats} runs of {plan.bandwidth_iterations} iterations")
        columns = [("backend", "engine"), ("optimizer", "optimizer"), ("dtype", "dtype"),
                   ("n", "n"), ("variant", "variant"), ("fraction_of_copy", "of copy bw"),
                   ("seconds_per_iteration", "s/iter"), ("copy_gb_per_s", "copy GB/s")]
        check = frame["check"] if "check" in frame else pd.Series("mode", index=frame.index)
        parts.append(text_table(frame[check == "mode"], [c for c in columns
                                                         if c[0] != "variant"]))
        if (check != "mode").any():  # a twin's own probes (JAX's, issue 32 item 4)
            parts.append("\n  float32 against float64 on JAX (issue 32 item 4): GD fused with "
                         "the default and the 'highest' matmul precision, and a hand-written "
                         "fused loop with the gradient's reduction laid out three ways")
            parts.append(text_table(frame[check != "mode"], columns))
    if "peer" in tables:
        parts.append(f"\n== peer: NumPy float64, ours over SciPy's L-BFGS-B on the same objective "
                     f"and over the hand-written GD loop (synthetic, kappa {plan.peer_kappa:g}), "
                     f"timed side by side, median of {plan.peer_repeats}; the sweep row: seconds "
                     f"per run of a fresh `run` of trivial runs beyond their own measured time "
                     f"(goals: {', '.join(f'{k} <= {v:g}' for k, v in PEER_GOALS.items())})")
        parts.append(text_table(tables["peer"], [
            ("method", "method"), ("objective", "objective"), ("n", "n"), ("d", "d"),
            ("check", "check"), ("peer", "over"), ("ratio", "ratio"), ("ratio_best", "fastest"),
            ("meets_goal", "meets"), ("iterations", "iters"), ("peer_iterations", "peer iters"),
            ("seconds", "ours s"), ("peer_seconds", "peer s")]))
    return "\n".join(parts) + "\n"


def write_outputs(tables: dict[str, pd.DataFrame], text: str, out: Path) -> None:
    """`<out>/<name>.parquet` for every table and `<out>/bench.txt`, all or none."""
    writes = {out / f"{name}.parquet": parquet_writer(frame) for name, frame in tables.items()}
    write_files_atomic({**writes, out / "bench.txt": text_writer(text)})
