"""Section `iterations`: seconds per iteration of GD (1/L), Adadelta and L-BFGS for every engine,
formulation and dtype on the `eve` set, divided by one read pass over X (`X.sum()`, the
definition of `study.regression.measure.read_pass_seconds`, one thread): "passes per iteration";
and by the read pass split across every core (the floor of an engine reading X in parallel).
Each run makes a fixed number of iterations. The `scaling` section measures with it too."""

from __future__ import annotations

from itertools import product

import numpy as np
import pandas as pd

from study.bench.plan import TF1_OPTIMIZERS, Plan
from study.bench.runs import describe, failed_row, progress, run_once, shown
from study.bench.timing import median, ratio, read_passes, read_passes_all_cores, samples


def measure_iterations(problem, optimizer: str, label: str, formulation: str, dtype: str, *,
                       iterations: int, repeats: int, read, device: str = "cpu",
                       read_all=None) -> dict:
    """Seconds per iteration of `repeats` runs of `iterations` iterations, each run preceded by
    read passes (`read()` -> list of seconds; `read_all()` the same on every core, when given),
    and one more batch of read passes at the end."""
    row = {"optimizer": optimizer, **describe(label), "formulation": formulation, "dtype": dtype,
           "device": device, "n": problem.n, "d": problem.d, "max_iter": iterations,
           "status": "ok", "message": ""}
    per_iteration, setup, counts, reads, statuses, reads_all = [], [], [], [], [], []
    try:
        for _ in range(repeats):
            reads += read()
            reads_all += read_all() if read_all else []
            result = run_once(problem, optimizer, label, dtype, formulation, device=device,
                              max_iter=iterations)
            per_iteration.append(result.seconds_per_iteration)
            setup.append(result.setup_seconds)
            counts.append(result.iterations)
            statuses.append(result.status)
        reads += read()
    except Exception as exc:  # noqa: BLE001 -- recorded on the row; the bench goes on
        return failed_row(row, exc)
    seconds, read_seconds = median(per_iteration), median(reads)
    return {**row, "run_status": statuses[-1], "iterations": int(np.median(counts)),
            "seconds_per_iteration": seconds, "setup_seconds": median(setup),
            "read_pass_seconds": read_seconds,
            "passes_per_iteration": ratio(seconds, read_seconds),
            "passes_per_iteration_best": ratio(min(per_iteration), min(reads)),
            "read_pass_all_cores_seconds": median(reads_all),
            "passes_per_iteration_all_cores": ratio(seconds, median(reads_all)),
            "seconds_per_iteration_samples": samples(per_iteration),
            "read_pass_samples": samples(reads)}


def bench_iterations(plan: Plan, problem) -> pd.DataFrame:
    rows = []
    arrays = {dtype: np.asarray(problem.X, dtype=dtype) for dtype in plan.dtypes}
    grid = [(dtype, formulation, optimizer, label) for dtype, formulation, optimizer, label
            in product(plan.dtypes, plan.formulations, plan.optimizers, plan.backends)
            if not (label == "tf1" and optimizer not in TF1_OPTIMIZERS)]
    for number, (dtype, formulation, optimizer, label) in enumerate(grid, 1):
        iterations = plan.data_iterations if formulation == "data" else plan.gram_iterations
        X = arrays[dtype]
        row = measure_iterations(problem, optimizer, label, formulation, dtype,
                                 iterations=iterations, repeats=plan.repeats,
                                 read=lambda X=X: read_passes(X, plan.read_repeats),
                                 read_all=lambda X=X: read_passes_all_cores(X, plan.read_repeats))
        rows.append(row)
        progress(f"[iterations {number}/{len(grid)}] {optimizer} {label} {formulation} {dtype}: "
                 f"{shown(row, 'passes_per_iteration', ' passes/iter')}")
    return pd.DataFrame(rows)
