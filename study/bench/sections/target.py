"""Section `target`: seconds to relative suboptimality 1e-8 of the candidate methods divided by
the normal-equations solve (`closed-form`, solver `normal`), interleaved run by run. It also
divides the totals (setup + loop), since setup is where the direct solves spend their time."""

from __future__ import annotations

import numpy as np
import pandas as pd

from optimizers import build_rules, make_optimizer, run
from study import interrupts
from study.bench.plan import TARGET_TOL, Plan
from study.bench.runs import describe, failed_row, progress, run_once, shown
from study.bench.timing import median, ratio, samples
from study.frameworks.registry import make_backend


def median_total(results) -> float:
    """The median over runs of loop seconds + setup seconds (summed run by run)."""
    return median([r.seconds + r.setup_seconds for r in results])


def bench_target(plan: Plan, problem) -> pd.DataFrame:
    """Every candidate and the normal-equations solve, interleaved run by run (float64)."""

    def closed_form(solver: str):
        return run(problem, make_optimizer("closed-form", solver=solver),
                   build_rules(tol=TARGET_TOL, max_iter=1), backend=make_backend("numpy"))

    candidates = list(plan.target_candidates) + [("closed-form-lstsq", "numpy", "data")]
    results: dict = {c: [] for c in candidates}  # each candidate's runs
    failures: dict = {}
    ref = []
    for _ in range(plan.target_repeats):
        ref.append(closed_form("normal"))
        interrupts.check()
        for candidate in candidates:
            if candidate in failures:
                continue
            optimizer, label, formulation = candidate
            try:
                if optimizer == "closed-form-lstsq":
                    result = closed_form("lstsq")
                else:
                    result = run_once(problem, optimizer, label, "float64", formulation,
                                      tol=TARGET_TOL, max_iter=10_000)
            except Exception as exc:  # noqa: BLE001
                interrupts.check()  # an error an interrupt caused is the interrupt
                failures[candidate] = exc
                continue
            results[candidate].append(result)
    ref_seconds = median([r.seconds for r in ref])
    ref_total = median_total(ref)
    rows = []
    for candidate in candidates:
        optimizer, label, formulation = candidate
        row = {"optimizer": optimizer, **describe(label), "formulation": formulation,
               "dtype": "float64", "n": problem.n, "d": problem.d, "tol": TARGET_TOL,
               "status": "ok", "message": "", "reference_seconds": ref_seconds,
               "reference_total_seconds": ref_total,
               "reference_samples": samples([r.seconds for r in ref])}
        if candidate in failures:
            rows.append(failed_row(row, failures[candidate]))
            continue
        runs = results[candidate]
        reached = all(r.target_reached for r in runs)
        loop = [r.seconds for r in runs]
        seconds, total = median(loop), median_total(runs)
        rows.append({**row, "run_status": runs[-1].status, "reached": reached,
                     "iterations": int(np.median([r.iterations for r in runs])),
                     "seconds_to_target": seconds,
                     "setup_seconds": median([r.setup_seconds for r in runs]),
                     "total_seconds": total,
                     "over_normal": ratio(seconds, ref_seconds) if reached else float("nan"),
                     "total_over_normal_total": ratio(total, ref_total) if reached
                     else float("nan"),
                     "seconds_samples": samples(loop)})
        progress(f"[target] {optimizer} {label} {formulation}: "
                 f"{shown(rows[-1], 'over_normal', 'x normal equations')}")
    table = pd.DataFrame(rows)
    if "total_over_normal_total" in table:
        ranked = table["total_over_normal_total"].astype(float)
        table["best"] = False
        if ranked.notna().any():
            table.loc[ranked.idxmin(), "best"] = True
    return table
