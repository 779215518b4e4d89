"""One feed-mode run, measured in its own process (forked by the sweep engine for each run).

This module imports no framework: a mode is built by its framework's module (its registry
entry's `feedmode`), imported only for its runs, so a JAX run never imports TensorFlow. The
record is saved (`ctx.save_partial`) at every phase, so that a run killed for time or memory
still tells how far it got.

Timed apart, in order: build (TF1 graph construction; a constant mode embeds the input here),
session (or the runtime's initialisation), data (placing the input where the mode keeps it),
then the first call and `calls` more, inside the noise probe. Each call is timed in two parts
(the design: "record the computation and the copy apart"): *compute*, the output left where it
was computed and the device synchronised, then *fetch*, the output copied to the host as a
NumPy array; a call's seconds are their sum, so the call columns keep their meaning (the
result on the host). The first call includes what a user's first call pays (tracing, XLA or
torch.compile compilation; JAX's inside its compute as `compile_seconds`). Then, outside every
clock: the sizes of what the mode built and the check of the first `check_n` rows against the
NumPy reference. Peak memory is the engine's (net of what the process inherited).
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from study.feedmode import model as fm
from study.feedmode.spec import Spec
from study.frameworks.registry import framework as registry_framework
from study.sweep.plugin import Measurement, RunContext


class Clock:
    """Times phases into the record and saves the record before and after each (not inside)."""

    def __init__(self, record: dict, save: Callable[[dict], None]):
        self.record, self.save = record, save

    def enter(self, phase: str) -> None:
        self.record["phase"] = phase
        self.save(self.record)

    @contextmanager
    def phase(self, name: str):
        self.enter(name)
        t0 = time.perf_counter()
        yield
        self.record[f"{name}_seconds"] = time.perf_counter() - t0
        self.save(self.record)


@dataclass
class Prepared:
    compute: Callable[[], object]           # one call, its output left on the device, synchronised
    fetch: Callable[[object], np.ndarray]   # that output on the host as a NumPy array (NHWC)
    sizes: Callable[[], dict]               # columns -> sizes of what was built, after the calls
    close: Callable[[], None] = lambda: None
    placed: dict = field(default_factory=dict)   # 'device': where the output was computed
    release: Callable[[object], None] = lambda output: None   # frees an output after its fetch

    def call(self) -> np.ndarray:
        """One whole call, the result on the host (compute, then fetch)."""
        output = self.compute()
        try:
            return self.fetch(output)
        finally:
            self.release(output)

    def timed_call(self) -> tuple[float, float, np.ndarray]:
        """(compute seconds, fetch seconds, the result on the host); freeing the output is
        outside both clocks."""
        t0 = time.perf_counter()
        output = self.compute()
        t1 = time.perf_counter()
        y = self.fetch(output)
        t2 = time.perf_counter()
        self.release(output)
        return t1 - t0, t2 - t1, y


def worker(mode: str):
    """The module that builds a mode, its framework checked first (one line naming the extra)."""
    framework = registry_framework(fm.MODES[mode].framework)
    framework.require()
    return importlib.import_module(framework.feedmode)


def build(spec: Spec, x: np.ndarray, kernel: np.ndarray, clock: Clock) -> Prepared:
    """The mode's callable, with its setup phases timed through `clock` (a fused mode's kernel
    made fused here, outside them)."""
    if fm.MODES[spec.mode].model == "fused-conv":
        kernel = fm.fused_kernel(kernel)
    return worker(spec.mode).build(spec, x, kernel, clock)


def check(spec: Spec, head: np.ndarray) -> tuple[float, bool]:
    """The first rows of a mode's output against the NumPy reference on the same input rows
    (make_input's first rows do not depend on N)."""
    x = fm.make_input(min(spec.check_n, spec.n), spec.dtype, spec.seed)
    expected = fm.reference(x, fm.make_kernel(spec.dtype, spec.seed))
    if head.shape != expected.shape:
        return float("inf"), False
    tol = fm.TOLERANCE[spec.dtype]
    error = float(np.max(np.abs(head.astype(np.float64) - expected)))
    return error, bool(np.allclose(head, expected, rtol=tol, atol=tol))


def measure_record(spec: Spec, record: dict | None = None,
                   save: Callable[[dict], None] = lambda record: None, probe=None) -> dict:
    """Measure one spec in this process (see the module docstring for what and in which order)."""
    record = {} if record is None else record
    clock = Clock(record, save)
    clock.enter("setup")
    x = fm.make_input(spec.n, spec.dtype, spec.seed)
    prepared = build(spec, x, fm.make_kernel(spec.dtype, spec.seed), clock)

    with probe if probe is not None else nullcontext():
        clock.enter("first_call")
        compute, fetch, y = prepared.timed_call()
        record["first_compute_seconds"], record["first_fetch_seconds"] = compute, fetch
        record["first_call_seconds"] = compute + fetch
        head = np.array(y[: spec.check_n])   # a copy, outside the clock
        record["output_shape"] = list(y.shape)
        record["checksum"] = checksum = fm.checksum(y)
        record["device_name"] = prepared.placed.get("device")
        del y
        stable, steady, computes, fetches = True, [], [], []
        record.update(steady_seconds=steady, steady_compute=computes, steady_fetch=fetches)
        for call in range(1, spec.calls + 1):
            clock.enter(f"call {call}")
            compute, fetch, y = prepared.timed_call()
            computes.append(compute)
            fetches.append(fetch)
            steady.append(compute + fetch)
            stable = stable and fm.checksum(y) == checksum
            del y
    record["checksum_stable"] = stable
    record["steady_compute_median_seconds"] = float(np.median(computes))
    record["steady_fetch_median_seconds"] = float(np.median(fetches))
    record["steady_median_seconds"] = float(np.median(steady))
    record["steady_min_seconds"] = float(np.min(steady))
    record["steady_max_seconds"] = float(np.max(steady))
    record["first_over_steady"] = record["first_call_seconds"] / record["steady_median_seconds"]
    record["total_calls_seconds"] = record["first_call_seconds"] + float(np.sum(steady))
    record["total_seconds"] = record["total_calls_seconds"] + sum(
        record.get(f"{p}_seconds") or 0.0 for p in ("build", "session", "data"))

    clock.enter("sizes")
    record.update(prepared.sizes())
    prepared.close()
    del prepared, x

    clock.enter("check")
    error, ok = check(spec, head)
    record["check_max_abs_error"] = error
    record["check_tolerance"] = fm.TOLERANCE[spec.dtype]
    record["check_ok"] = ok
    record["status"] = "ok" if ok else "mismatch"
    record["message"] = "" if ok else (
        f"max abs error {error:.3g} vs the NumPy reference on the first {len(head)} images "
        f"exceeds {fm.TOLERANCE[spec.dtype]:g}")
    record["phase"] = "done"
    save(record)
    return record


def measure(spec: Spec, ctx: RunContext) -> Measurement:
    """The engine's entry: the record as the row, the calls as a side table."""
    record: dict = {}
    try:
        measure_record(spec, record, ctx.save_partial, ctx.probe)
    except Exception as exc:
        if not (isinstance(exc, MemoryError) or worker(spec.mode).out_of_memory(exc)):
            raise
        record.update(status="oom", message=f"{type(exc).__name__}: {exc}".splitlines()[0])
    computes = record.pop("steady_compute", None) or []
    fetches = record.pop("steady_fetch", None) or []
    record.pop("steady_seconds", None)
    if isinstance(record.get("output_shape"), list):
        record["output_shape"] = "x".join(map(str, record["output_shape"]))
    parts = list(zip([record["first_compute_seconds"], *computes],
                     [record["first_fetch_seconds"], *fetches], strict=True)) \
        if "first_call_seconds" in record else []
    calls = [{"call": i, "kind": "first" if i == 0 else "steady", "seconds": compute + fetch,
              "compute_seconds": compute, "fetch_seconds": fetch}
             for i, (compute, fetch) in enumerate(parts)]
    return Measurement(record, {"calls": pd.DataFrame(calls, columns=[
        "call", "kind", "seconds", "compute_seconds", "fetch_seconds"])})
