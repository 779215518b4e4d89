"""The timing primitives every section uses: raw timings, their medians, and ratios of two
timings taken side by side (why ratios: study.bench)."""

from __future__ import annotations

import json
import math
import time

import numpy as np


def median(values) -> float:
    values = [v for v in values if v is not None and not math.isnan(v)]
    return float(np.median(values)) if values else float("nan")


def ratio(numerator: float, denominator: float) -> float:
    """numerator / denominator, NaN when either is missing or the denominator is not > 0."""
    if not (numerator == numerator and denominator == denominator) or not denominator > 0:
        return float("nan")
    return numerator / denominator


def compared(ours: list, theirs: list, goal: float) -> dict:
    """The ratio of two lists' medians, the fastest's beside it, and whether it meets `goal`."""
    value = ratio(median(ours), median(theirs))
    return {"ratio": value, "ratio_best": ratio(min(ours), min(theirs)),
            "meets_goal": bool(value <= goal) if value == value else None}


def alternated(repeats: int, mine, theirs) -> tuple[list, list]:
    """`repeats` results of each of two calls, alternating which goes first."""
    ours, other = [], []
    for repeat in range(repeats):
        if repeat % 2:
            other.append(theirs())
        ours.append(mine())
        if not repeat % 2:
            other.append(theirs())
    return ours, other


def time_calls(function, repeats: int) -> list[float]:
    """Wall-clock seconds of `repeats` calls of `function()`."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return times


SETTLE_SECONDS = 0.01


def read_passes(X: np.ndarray, repeats: int) -> list[float]:
    """`repeats` timings of one read pass over X (`X.sum()`), after a 10 ms pause: BLAS worker
    threads spin for a while after a product, and on two cores a read pass taken at once runs
    about 1.5x slower (measured) than one taken after the pause."""
    time.sleep(SETTLE_SECONDS)
    return time_calls(X.sum, repeats)


def read_passes_all_cores(X: np.ndarray, repeats: int, threads: int | None = None) -> list[float]:
    """`repeats` timings of one read pass over X split across every core (one block of rows a
    thread; NumPy's sum releases the GIL): the floor for an engine that reads X in parallel, as
    BLAS and the frameworks' kernels do, beside `read_passes`' one-thread floor."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    threads = threads or os.cpu_count() or 1
    blocks = np.array_split(X, threads, axis=0)
    with ThreadPoolExecutor(threads) as pool:
        def one_pass():
            return sum(pool.map(np.sum, blocks))

        time.sleep(SETTLE_SECONDS)
        return time_calls(one_pass, repeats)


def loglog_slope(x, y) -> tuple[float, int]:
    """Least-squares slope of log y against log x over the finite positive points, and how many
    points it used (NaN below two distinct x)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    if len(np.unique(x[keep])) < 2:
        return float("nan"), int(keep.sum())
    slope, _ = np.polyfit(np.log(x[keep]), np.log(y[keep]), 1)
    return float(slope), int(keep.sum())


def samples(values) -> str:
    """Raw timings as JSON, kept on the row so that every figure can be recomputed."""
    return json.dumps([float(v) for v in values])
