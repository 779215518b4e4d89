"""Section `overhead`: what our harness costs. Our driver against a minimal hand-written loop of
the same algorithm on the same backend (GD 1/L; NumPy, TensorFlow's fused loop, JAX's fused
loop, PyTorch's eager step; goal <= 1.05), and the trace recording: the host
loop with its trace written at every iteration against written only at the start (goal <= 1.03).
The hand-written loops are each backend's twin (`Backend.twin`, study/bench/twins): a backend
without one is a row saying so."""

from __future__ import annotations

import math
import time
from contextlib import contextmanager

import pandas as pd

import optimizers.driver as driver
from study.bench.plan import HARNESS_GOAL, TRACE_GOAL, Plan, engine
from study.bench.runs import (
    Unavailable,
    blas_threads,
    describe,
    failed_row,
    progress,
    run_once,
    shown,
)
from study.bench.timing import alternated, compared, median, samples
from study.bench.twins import twin
from study.frameworks.registry import BACKENDS


def overhead_row(check: str, label: str, formulation: str, dtype: str, problem, goal: float,
                 ours: list, baseline: list, what: str, **extra) -> dict:
    return {"check": check, **describe(label), "formulation": formulation, "dtype": dtype,
            "n": problem.n, "d": problem.d, "status": "ok", "message": "", "what": what,
            "seconds": median(ours), "baseline_seconds": median(baseline),
            **compared(ours, baseline, goal), "goal": goal,
            "seconds_samples": samples(ours), "baseline_samples": samples(baseline), **extra}


def measure_harness(problem, label: str, formulation: str, dtype: str, *, iterations: int,
                    repeats: int) -> dict:
    """Our driver's seconds per iteration of GD (1/L) over a hand-written loop's, interleaved;
    the loop is the backend's twin's `minimal_loop` (study.bench.twins)."""
    what = "driver vs hand-written loop"
    try:
        name, options = engine(label)
        found = twin(name, "minimal_loop")(options, formulation)
        if found is None:
            raise Unavailable(f"no hand-written loop for {label} {formulation}")
        what, hand_loop = found

        def baseline():
            with blas_threads(label):
                return hand_loop(problem, dtype, iterations)

        ours, hand = alternated(
            repeats,
            lambda: run_once(problem, "gd", label, dtype, formulation,
                             max_iter=iterations).seconds_per_iteration,
            baseline)
    except Exception as exc:  # noqa: BLE001
        return failed_row({"check": "harness", **describe(label), "formulation": formulation,
                           "dtype": dtype, "n": problem.n, "d": problem.d, "what": what,
                           "goal": HARNESS_GOAL}, exc)
    return overhead_row("harness", label, formulation, dtype, problem, HARNESS_GOAL, ours, hand,
                        what, iterations=iterations)


@contextmanager
def trace_schedule(predicate, following):
    """Replace the host loop's trace schedule (`optimizers.driver.on_trace_schedule`, and
    `next_on_schedule`, the next iteration it keeps: `following(i)`) for a while. The loop always
    records its last iteration, so 'only iteration 0' is the smallest trace."""
    names = ("on_trace_schedule", "next_on_schedule")
    if not all(hasattr(driver, name) for name in names):
        raise Unavailable("optimizers.driver has no trace schedule to override")
    saved = [getattr(driver, name) for name in names]
    driver.on_trace_schedule, driver.next_on_schedule = predicate, following
    try:
        yield
    finally:
        driver.on_trace_schedule, driver.next_on_schedule = saved


def measure_trace(problem, label: str, formulation: str, dtype: str, *, iterations: int,
                  repeats: int) -> list[dict]:
    """The host loop's trace written at every iteration vs at iteration 0 only, interleaved:
    the reported seconds (the clock is paused while the trace is written, so the goal is that
    this stays ~1) and the wall clock around run() less setup (what the trace costs in all)."""
    timed = {"every": [], "first": []}
    wall = {"every": [], "first": []}
    schedules = {"every": (lambda iteration: True, lambda iteration: iteration + 1),
                 "first": (lambda iteration: iteration == 0, lambda iteration: math.inf)}
    base = {"check": "trace", **describe(label), "formulation": formulation, "dtype": dtype,
            "n": problem.n, "d": problem.d, "goal": TRACE_GOAL}
    try:
        if engine(label)[1].get("feed") in ("fused", "tf1"):
            raise Unavailable(f"{label} keeps its own trace (not the host loop's)")
        for repeat in range(repeats):  # alternating which goes first
            for name, schedule in list(schedules.items())[::-1 if repeat % 2 else 1]:
                with trace_schedule(*schedule):
                    start = time.perf_counter()
                    result = run_once(problem, "gd", label, dtype, formulation,
                                      max_iter=iterations)
                    elapsed = time.perf_counter() - start
                timed[name].append(result.seconds / result.iterations)
                wall[name].append((elapsed - result.setup_seconds) / result.iterations)
    except Exception as exc:  # noqa: BLE001
        return [failed_row({**base, "what": "trace at every iteration vs none"}, exc)]
    return [
        overhead_row("trace", label, formulation, dtype, problem, TRACE_GOAL, timed["every"],
                     timed["first"], "trace every iteration vs none: reported seconds",
                     iterations=iterations),
        overhead_row("trace-wall", label, formulation, dtype, problem, float("nan"),
                     wall["every"], wall["first"],
                     "trace every iteration vs none: wall clock around run() less setup",
                     iterations=iterations),
    ]


def overhead_iterations(plan: Plan, formulation: str) -> int:
    """Iterations per timed run: gram iterations are ~10 us, so many more of them."""
    return plan.data_iterations if formulation == "data" else plan.overhead_gram_iterations


def bench_overhead(plan: Plan, problem) -> pd.DataFrame:
    rows = []
    dtype = plan.dtypes[0]
    for label in plan.overhead_backends:
        for formulation in plan.formulations:
            if BACKENDS[engine(label)[0]].framework and formulation == "gram":
                continue  # the hand-written framework loops read X (formulation data)
            iterations = overhead_iterations(plan, formulation)
            rows.append(measure_harness(problem, label, formulation, dtype,
                                        iterations=iterations, repeats=plan.overhead_repeats))
            progress(f"[overhead] harness {label} {formulation}: "
                     f"{shown(rows[-1], 'ratio', 'x')}")
    for label in plan.trace_backends:
        if label not in plan.backends and label not in plan.overhead_backends:
            continue
        for formulation in plan.formulations:
            iterations = overhead_iterations(plan, formulation)
            measured = measure_trace(problem, label, formulation, dtype, iterations=iterations,
                                     repeats=plan.overhead_repeats)
            rows += measured
            progress(f"[overhead] trace {label} {formulation}: "
                     f"{shown(measured[0], 'ratio', 'x')}")
    return pd.DataFrame(rows)
