"""Machine noise, measured around every run in the run's own process, and the noisy flag.

Just before and after the timed part (`with ctx.probe:`) the probe times a fixed read pass over
32 MiB (the same work in every run, so one sweep-wide median describes the quiet machine).
Between the two it records how long the run's threads waited for a CPU (schedstat) and how much
CPU time other processes used (`/proc/stat` minus this process, in cores; 10 ms resolution, so
only judged on windows of half a second or more). A run is flagged `noisy` when

  - its calibration is more than CALIBRATION_LIMIT times the sweep's median, or
  - its threads waited for a CPU more than WAIT_LIMIT of the window while other processes used
    at least OTHERS_WAITING cores (a multi-threaded run's threads also queue behind each other), or
  - other processes used more than OTHERS_LIMIT cores during a window of >= OTHERS_MIN_WINDOW s.
A noisy run is kept (and said so); `study run --remeasure-noisy` measures it again.
"""

from __future__ import annotations

import functools
import math
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd

from optimizers.blas_threads import others_cores

CALIBRATION_BYTES = 32 * 2**20
CALIBRATION_REPEATS = 3
CALIBRATION_LIMIT = 1.5
WAIT_LIMIT = 0.15
OTHERS_LIMIT = 0.3
OTHERS_WAITING = 0.1
OTHERS_MIN_WINDOW = 0.5
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _threads_run_delay() -> int:
    """Nanoseconds this process's live threads have spent runnable but waiting for a CPU."""
    total = 0
    for task in Path("/proc/self/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return total


def _machine_busy_seconds() -> float:
    """CPU seconds all processors spent busy (not idle, not waiting for I/O) since boot."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except OSError:
        return float("nan")
    values = [int(v) for v in fields]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return (sum(values[:8]) - idle) / CLOCK_TICKS


def _nan_if_none(value: float | None) -> float:
    return float("nan") if value is None else value


def _own_cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


@functools.cache
def calibration_buffer() -> np.ndarray:
    """The calibration's 32 MiB, made once in the warm process before it forks."""
    buffer = np.ones(CALIBRATION_BYTES // 8)
    buffer.flags.writeable = False
    return buffer


class NoiseProbe:
    """Calibration before and after, CPU waiting and others' CPU in between."""

    def __init__(self):
        self.buffer = calibration_buffer()  # allocated and touched outside any clock
        self.values: dict = {}

    def calibrate(self, enough: float = 0.0) -> float:
        """The fastest of a few read passes: slow only when the machine stays slow. It stops at
        a pass of `enough` seconds or less: after the run, one no slower than the calibration
        before it leaves the run's calibration (the larger of the two) as it would be."""
        best = math.inf
        for _ in range(CALIBRATION_REPEATS):
            start = time.perf_counter()
            self.buffer.sum()
            best = min(best, time.perf_counter() - start)
            if best <= enough:
                break
        return best

    def __enter__(self):
        self.values["load_1m_before"] = os.getloadavg()[0]
        self.values["calibration_before_seconds"] = self.calibrate()
        self._start = (time.perf_counter(), _threads_run_delay(), _machine_busy_seconds(),
                       _own_cpu_seconds())
        return self

    def __exit__(self, *exc):
        wall0, delay0, busy0, own0 = self._start
        wall = time.perf_counter() - wall0
        delay = (_threads_run_delay() - delay0) / 1e9
        others = (_machine_busy_seconds() - busy0) - (_own_cpu_seconds() - own0)
        self.values.update(
            probe_seconds=wall,
            cpu_wait_fraction=delay / wall if wall > 0 else float("nan"),
            others_cpu_cores=_nan_if_none(others_cores(others, wall)),
            calibration_after_seconds=self.calibrate(
                enough=self.values["calibration_before_seconds"]),
            load_1m_after=os.getloadavg()[0])
        return False

    def columns(self) -> dict:
        return dict(self.values)


def flag(runs: pd.DataFrame) -> pd.DataFrame:
    """Set `noisy` and `noisy_reason` on every row that carries a probe."""
    runs = runs.copy()
    calibration = runs[["calibration_before_seconds", "calibration_after_seconds"]].max(axis=1)
    median = calibration.median()
    reasons = []
    for value, wait, others, window in zip(calibration, runs["cpu_wait_fraction"],
                                           runs["others_cpu_cores"], runs["probe_seconds"],
                                           strict=True):
        why = []
        if pd.notna(value) and median > 0 and value > CALIBRATION_LIMIT * median:
            why.append(f"calibration {value / median:.2g}x the sweep's median")
        if pd.notna(wait) and wait > WAIT_LIMIT and pd.notna(others) and others >= OTHERS_WAITING:
            why.append(f"threads waited for a CPU {wait:.0%} of the time")
        if pd.notna(others) and pd.notna(window) and window >= OTHERS_MIN_WINDOW \
                and others > OTHERS_LIMIT:
            why.append(f"other processes used {others:.2g} cores")
        reasons.append("; ".join(why) or None)
    runs["noisy_reason"] = reasons
    runs["noisy"] = pd.array([None if pd.isna(v) else r is not None
                              for v, r in zip(calibration, reasons, strict=True)],
                             dtype="boolean")
    return runs
