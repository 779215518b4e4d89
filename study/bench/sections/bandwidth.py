"""Section `bandwidth` (docs/bench.md): each mode's fraction of the device's copy bandwidth, and
a twin's own measurements (`probes`: JAX's float32 probes of matmul precision and reduction
layout, whose slow rows would name the cause). The copy is measured once per framework, in that
framework: y = x * s over an X-sized float64 array reads and writes it once (2 * bytes / s).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from datasets import make_problem
from study.bench.plan import PASSES, Plan
from study.bench.runs import Unavailable, failed_row, progress, run_once, shown
from study.bench.sections.harness import engine_label, engines
from study.bench.timing import median, ratio, samples, time_calls
from study.bench.twins import twin, twin_of
from study.frameworks.registry import BACKENDS

COPY_REPEATS = 5


def copy_seconds(name: str, shape: tuple, device: str) -> list[float]:
    """Timings of y = x * s over a float64 array of `shape` on the device, in the framework of
    backend `name` (its twin's `copy_call`; NumPy's: the host), each synchronised; the first
    call (compilation) is not kept. No copy twin -> Unavailable."""
    call = twin(name, "copy_call")(shape, device)
    call()
    return time_calls(call, COPY_REPEATS)


def fraction(problem, dtype: str, optimizer: str, seconds: float, copy: float) -> float:
    """Bytes of X the iteration must read per second, over the copy's bytes per second."""
    x_bytes = problem.n * problem.d * np.dtype(dtype).itemsize
    return ratio(x_bytes * PASSES[optimizer] / seconds, copy)


def mode_row(problem, name: str, feed: str, dtype: str, optimizer: str, device: str, copy: float,
             *, iterations: int, repeats: int, check: str = "mode", variant: str = "") -> dict:
    row = {"check": check, "framework": name, "backend": engine_label(name, feed), "feed": feed,
           "variant": variant, "optimizer": optimizer, "device": device, "dtype": dtype,
           "n": problem.n, "d": problem.d}
    if isinstance(copy, Unavailable):  # no copy to divide by: said, not measured
        return failed_row(row, copy)
    row["copy_gb_per_s"] = copy / 1e9
    try:
        timed = [run_once(problem, optimizer, row["backend"], dtype, "data", device=device,
                          max_iter=iterations) for _ in range(repeats)]
    except Exception as exc:  # noqa: BLE001 -- recorded on the row; the bench goes on
        return failed_row(row, exc)
    seconds = median([r.seconds_per_iteration for r in timed])
    return {**row, "status": "ok", "message": "", "iterations": timed[-1].iterations,
            "seconds_per_iteration": seconds,
            "fraction_of_copy": fraction(problem, dtype, optimizer, seconds, copy),
            "seconds_samples": samples([r.seconds_per_iteration for r in timed])}


def bench_bandwidth(plan: Plan, device: str = "cpu") -> pd.DataFrame:
    found = engines(device, plan.bandwidth_backends)
    shape = (max(plan.bandwidth_rows + (plan.probe_rows,)), 5)  # eve has d = 5
    copies = {}  # per framework (NumPy's for the NumPy stack), measured in the first backend's
    sides = {name: BACKENDS[name].framework or name for name, _ in found}
    for name, side in sides.items():
        if side in copies:
            continue
        try:
            copies[side] = 2 * shape[0] * shape[1] * 8 / median(
                copy_seconds(name, shape, device))
        except Unavailable as exc:  # its rows say why
            copies[side] = exc
        except Exception as exc:  # noqa: BLE001 -- its rows have no fraction
            progress(f"[bandwidth] copy in {side}: {exc}")
            copies[side] = float("nan")
    rows = []
    for n in plan.bandwidth_rows:
        problem = make_problem("eve", rows=n)
        problem.reference  # noqa: B018 -- f* before any clock
        for optimizer in ("gd", "lbfgs"):
            for dtype in plan.bandwidth_dtypes:
                for name, feed in found:
                    rows.append(mode_row(
                        problem, name, feed, dtype, optimizer, device, copies[sides[name]],
                        iterations=plan.bandwidth_iterations, repeats=plan.bandwidth_repeats))
                    progress(f"[bandwidth] {rows[-1]['backend']} {optimizer} {dtype} n={n}: "
                             f"{shown(rows[-1], 'fraction_of_copy', ' of copy')}")
    probing = [name for name in sides if getattr(twin_of(name), "probes", None)]
    if probing:
        problem = make_problem("eve", rows=plan.probe_rows)
        problem.reference  # noqa: B018
        for name in probing:  # a twin's own measurements (JAX's float32 probes)
            rows += twin(name, "probes")(problem, name, device, copies[sides[name]], plan)
    return pd.DataFrame(rows)
