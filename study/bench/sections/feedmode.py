"""Section `feedmode`: the CNN feed-mode experiment's steady-state seconds per call of every mode
(built by `study.feedmode.measure.build`, as the study does) divided by its memory floor: one
read pass over the input plus one write pass over the output, as NumPy array passes."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from study.bench.plan import Plan
from study.bench.runs import failed_row, progress, shown
from study.bench.timing import median, ratio, samples, time_calls
from study.feedmode import measure as worker
from study.feedmode import model as fm


def measure_feedmode(mode: str, x: np.ndarray, kernel: np.ndarray, out: np.ndarray, *,
                     calls: int, device: str = "cpu") -> dict:
    """Steady seconds per call of one feed mode over the memory floor: a read pass over the
    input (`x.sum()`) plus a write pass over an output-sized array (`out.fill(0)`), interleaved
    call by call. The mode is built by the study's own worker code (setup outside the clock)."""

    dtype = x.dtype.name
    spec = worker.Spec(mode=mode, dtype=dtype, n=x.shape[0], calls=calls, device=device)
    model = fm.MODES[mode].model
    row = {"mode": mode, "api": fm.MODES[mode].api, "feed": fm.MODES[mode].feed, "model": model,
           "xla": fm.MODES[mode].xla, "dtype": dtype, "n": x.shape[0], "calls": calls,
           "status": "ok", "message": "", "input_bytes": x.nbytes, "output_bytes": out.nbytes}
    try:
        prepared = worker.build(spec, x, kernel, worker.Clock({}, lambda record: None))
        try:
            first = time.perf_counter()
            y = prepared.call()
            first = time.perf_counter() - first
            if y.shape != out.shape:
                raise RuntimeError(f"output shape {y.shape}, expected {out.shape}")
            del y
            steady, reads, writes = [], [], []
            for _ in range(calls):
                reads += time_calls(x.sum, 1)
                writes += time_calls(lambda: out.fill(0), 1)
                steady += time_calls(prepared.call, 1)
        finally:
            prepared.close()
    except Exception as exc:  # noqa: BLE001
        return failed_row(row, exc)
    read_seconds, write_seconds = median(reads), median(writes)
    floor = read_seconds + write_seconds
    seconds = median(steady)
    return {**row, "first_call_seconds": first, "steady_seconds": seconds,
            "read_seconds": read_seconds, "write_seconds": write_seconds,
            "floor_seconds": floor, "steady_over_floor": ratio(seconds, floor),
            "steady_over_floor_best": ratio(min(steady), min(reads) + min(writes)),
            "first_over_steady": ratio(first, seconds), "steady_samples": samples(steady),
            "read_samples": samples(reads), "write_samples": samples(writes)}


def bench_feedmode(plan: Plan) -> pd.DataFrame:
    rows = []
    for dtype in plan.feed_dtypes:
        x = fm.make_input(plan.feed_n, dtype)
        kernel = fm.make_kernel(dtype)
        out = np.zeros((plan.feed_n, fm.OUT, fm.OUT, fm.CHANNELS), dtype=dtype)
        for mode in plan.feed_modes or tuple(m for name in plan.feed_frameworks
                                             for m in fm.modes_of(name)):
            row = measure_feedmode(mode, x, kernel, out, calls=plan.feed_calls)
            rows.append(row)
            progress(f"[feedmode] {mode} {dtype}: {shown(row, 'steady_over_floor', 'x floor')}")
    return pd.DataFrame(rows)
