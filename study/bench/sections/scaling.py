"""Section `scaling`: synthetic problems (kappa 10), n from 1e4 to 1e7 rows at d = 5, and d from
5 to 512 at a fixed n; seconds per iteration and seconds to relative suboptimality 1e-8, with
the fitted log-log slope per method (`<out>/slopes.parquet`). A point that would not fit in the
memory available now is a 'skipped' row, not a swapping machine."""

from __future__ import annotations

import pandas as pd

from convergence_study.errors import failure_line
from datasets import make_problem
from study import interrupts
from study.bench.plan import TARGET_TOL, Plan
from study.bench.runs import describe, progress, run_once, shown
from study.bench.sections.iterations import measure_iterations
from study.bench.timing import loglog_slope, read_passes


def enough_memory(n: int, d: int, copies: int = 8) -> tuple[bool, str]:
    """Whether `copies` float64 copies of an n x d matrix fit in the memory available now."""
    import psutil

    needed = copies * n * (d + 1) * 8
    available = psutil.virtual_memory().available
    return needed < available, (f"needs about {needed / 2**30:.1f} GiB, "
                                f"{available / 2**30:.1f} GiB available")


def measure_point(problem, method, *, iterations: int, repeats: int, read_repeats: int,
                  time_budget: float) -> dict:
    """One scaling point: seconds per iteration (fixed iterations, repeated, interleaved with
    read passes) and one run to relative suboptimality 1e-8 under a time budget."""
    optimizer, label, formulation = method
    X = problem.X
    row = measure_iterations(problem, optimizer, label, formulation, "float64",
                             iterations=iterations, repeats=repeats,
                             read=lambda: read_passes(X, read_repeats))
    row["method"] = f"{optimizer} {label} {formulation}"
    if row["status"] != "ok":
        return row
    try:
        result = run_once(problem, optimizer, label, "float64", formulation, tol=TARGET_TOL,
                          max_iter=1_000_000, time_budget=time_budget)
    except Exception as exc:  # noqa: BLE001
        interrupts.check()  # an error an interrupt caused is the interrupt, not a row
        return {**row, "target_status": "error", "target_message": failure_line(exc)}
    reached = bool(result.target_reached)
    return {**row, "target_status": result.status, "target_iterations": result.iterations,
            "seconds_to_target": result.seconds if reached else float("nan"),
            "setup_to_target": result.setup_seconds,
            "total_to_target": result.seconds + result.setup_seconds if reached
            else float("nan")}


def bench_scaling(plan: Plan) -> tuple[pd.DataFrame, pd.DataFrame]:
    rows = []
    sweeps = [("n", n, 5) for n in plan.scaling_n] + \
             [("d", plan.scaling_d_rows, d) for d in plan.scaling_d]
    for sweep, n, d in sweeps:
        fits, why = enough_memory(n, d)
        if not fits:
            rows += [{"sweep": sweep, "n": n, "d": d, "method": " ".join(m), "optimizer": m[0],
                      **describe(m[1]), "formulation": m[2], "status": "skipped",
                      "message": f"not enough memory: {why}"} for m in plan.scaling_methods]
            progress(f"[scaling {sweep}] n={n} d={d}: skipped, {why}")
            continue
        problem = make_problem("synthetic", n=n, d=d, kappa=10.0)
        problem.reference  # noqa: B018 -- the float64 reference, before any clock
        for method in plan.scaling_methods:
            row = measure_point(problem, method, iterations=plan.scaling_iterations,
                                repeats=plan.scaling_repeats, read_repeats=plan.read_repeats,
                                time_budget=plan.scaling_time_budget)
            rows.append({"sweep": sweep, **row})
            progress(f"[scaling {sweep}] n={n} d={d} {row['method']}: "
                     f"{shown(row, 'seconds_per_iteration', ' s/iter')}")
        del problem
    table = pd.DataFrame(rows)
    return table, slopes(table)


SLOPE_METRICS = ("seconds_per_iteration", "seconds_to_target", "total_to_target")


def slopes(table: pd.DataFrame) -> pd.DataFrame:
    """The fitted log-log slope of each metric against n (or d) per method and sweep."""
    rows = []
    if table.empty:
        return pd.DataFrame(rows)
    for (sweep, method), part in table.groupby(["sweep", "method"], sort=False):
        axis = "n" if sweep == "n" else "d"
        ok = part[part["status"] == "ok"]
        for metric in SLOPE_METRICS:
            values = ok[metric] if metric in ok else pd.Series(dtype=float)
            slope, points = loglog_slope(ok[axis], values)
            rows.append({"sweep": sweep, "against": axis, "method": method, "metric": metric,
                         "slope": slope, "points": points,
                         "range": f"{axis}={ok[axis].min()}..{ok[axis].max()}" if len(ok)
                         else ""})
    return pd.DataFrame(rows)
