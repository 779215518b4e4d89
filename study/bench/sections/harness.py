"""Section `harness` (docs/bench.md): our harness against a hand-written loop, every installed
framework, every feed mode its backend declares, on one device (goal <= 1.3x).

Both sides make the same host reads: the loss once per iteration in the modes stepped from the
host, once per chunk in the whole-loop modes (`WHOLE_LOOP`: the run here is one chunk). The
modes are read from the registry when the bench runs, so a new mode or backend appears by itself.
"""

from __future__ import annotations

import pandas as pd

from datasets import make_problem
from study.bench.plan import LOOP_GOAL, Plan
from study.bench.runs import failed_row, progress, run_once, shown
from study.bench.timing import alternated, compared, median, samples
from study.bench.twins import WHOLE_LOOP, twin
from study.frameworks.registry import BACKENDS, FRAMEWORKS


def engines(device: str, only: tuple = ()) -> list[tuple[str, str]]:
    """(backend, feed) of every installed backend that runs on `device`, each declared feed
    ('' for NumPy, which has none), read from the registry now: new modes appear by
    themselves. `only` keeps those backends (the tests' small plans)."""

    found = []
    for name, declared in BACKENDS.items():
        if only and name not in only:
            continue
        if declared.framework and not FRAMEWORKS[declared.framework].installed():
            continue
        if device not in (declared.allowed("device") or ("cpu",)):  # no option: the host
            continue
        found += [(name, feed) for feed in declared.allowed("feed") or ("",)]
    return found


def engine_label(name: str, feed: str) -> str:
    return BACKENDS[name].label({"feed": feed} if feed else {})


def measure_loop(problem, name: str, feed: str, dtype: str, device: str, *, iterations: int,
                 repeats: int) -> dict:
    """Our GD seconds per iteration over the hand-written loop's, timed side by side."""
    row = {"framework": name, "backend": engine_label(name, feed), "feed": feed,
           "device": device, "dtype": dtype, "n": problem.n, "d": problem.d,
           "iterations": iterations, "goal": LOOP_GOAL,
           "host_reads": "per chunk" if feed in WHOLE_LOOP else "per iteration"}
    try:
        hand_loop = twin(name, "hand_loop")  # none: a row saying so, before any run
        mine, hand = alternated(
            repeats,
            lambda: run_once(problem, "gd", engine_label(name, feed), dtype, "data",
                             device=device, max_iter=iterations).seconds_per_iteration,
            lambda: hand_loop(problem, feed, dtype, device, iterations))
    except Exception as exc:  # noqa: BLE001 -- recorded on the row; the bench goes on
        return failed_row(row, exc)
    return {**row, "status": "ok", "message": "", "seconds": median(mine),
            "hand_seconds": median(hand), **compared(mine, hand, LOOP_GOAL),
            "seconds_samples": samples(mine), "hand_samples": samples(hand)}


def bench_harness(plan: Plan, device: str = "cpu") -> pd.DataFrame:
    rows = []
    found = engines(device, plan.harness_backends)
    sizes = [*plan.harness_small, *((n, plan.harness_iterations) for n in plan.harness_rows)]
    for n, iterations in sizes:
        problem = make_problem("eve", rows=n)
        problem.reference  # noqa: B018 -- f* in float64, before any clock
        for dtype in plan.harness_dtypes:
            for name, feed in found:
                rows.append(measure_loop(problem, name, feed, dtype, device,
                                         iterations=iterations, repeats=plan.harness_repeats))
                progress(f"[harness] {rows[-1]['backend']} {dtype} n={n} on {device}: "
                         f"{shown(rows[-1], 'ratio', 'x')}")
    return pd.DataFrame(rows)
