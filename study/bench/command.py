"""`python -m study bench`: the arguments, the sections run in order on one data set, and the
outputs written. Building the parser imports only the plan; the sections, the data sets and the
rendering are imported when the bench runs (TensorFlow only by the runs that use it)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING

from convergence_study.errors import InputError
from datasets import make_problem
from study.bench import plan as plans
from study.bench.plan import GPU_SECTIONS, SECTIONS, Plan
from study.bench.render import render, write_outputs
from study.bench.sections import (
    bandwidth,
    feedmode,
    harness,
    iterations,
    overhead,
    peer,
    scaling,
    target,
)
from study.frameworks.registry import BACKENDS, FRAMEWORKS
from study.output import check_output_path
from study.sweep.environment import collect

if TYPE_CHECKING:
    import pandas as pd


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true",
                        help="100k rows, fewer configurations, n up to 1e5 (about 2 minutes)")
    parser.add_argument("--out", default="results/bench",
                        help="folder for <section>.parquet and bench.txt (default results/bench)")
    parser.add_argument("--sections", nargs="+", metavar="SECTION",
                        help=f"only these sections: {', '.join(SECTIONS)}")
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu",
                        help="gpu: the sections that measure a device "
                             f"({', '.join(GPU_SECTIONS)}) on the GPU (refused without one)")


def gpu_frameworks() -> list[str]:
    """The installed frameworks that see a GPU, each asked through its backends' module (none
    imported where the device files its GPU needs are absent: a check made, and said, at once)."""
    import importlib

    seen = []
    for name, framework in FRAMEWORKS.items():
        modules = {b.module for b in BACKENDS.values() if b.framework == name}
        if not modules or not framework.gpu_nodes_present() or not framework.installed():
            continue
        try:
            if any(importlib.import_module(m).gpu_available() for m in modules):
                seen.append(name)
        except Exception:  # noqa: BLE001, S112 -- a framework that cannot start sees no GPU
            continue
    return seen


def run_bench(plan: Plan, sections=SECTIONS, device: str = "cpu") -> dict[str, pd.DataFrame]:
    """Measure the sections in order; the tables by name (slopes beside scaling)."""

    tables: dict[str, pd.DataFrame] = {}
    problem = None
    if any(s in sections for s in ("iterations", "overhead", "target")):
        problem = make_problem("eve", rows=plan.rows)
        problem.reference  # noqa: B018 -- f* in float64, before any clock
    measure = {"iterations": lambda: iterations.bench_iterations(plan, problem),
               "overhead": lambda: overhead.bench_overhead(plan, problem),
               "scaling": lambda: scaling.bench_scaling(plan),
               "feedmode": lambda: feedmode.bench_feedmode(plan),
               "target": lambda: target.bench_target(plan, problem),
               "harness": lambda: harness.bench_harness(plan, device),
               "bandwidth": lambda: bandwidth.bench_bandwidth(plan, device),
               "peer": lambda: peer.bench_peer(plan)}
    for name in (s for s in SECTIONS if s in sections):  # in the plan's order
        if name == "scaling":  # its fitted slopes beside it
            tables["scaling"], tables["slopes"] = measure[name]()
        else:
            tables[name] = measure[name]()
    environment = collect()
    return {name: frame.assign(**environment) if len(frame) else frame
            for name, frame in tables.items()}


def main(args) -> int:
    import logging

    device = getattr(args, "device", "cpu")
    sections = tuple(args.sections or (GPU_SECTIONS if device == "gpu" else SECTIONS))
    unknown = [s for s in sections if s not in SECTIONS]
    if unknown:
        raise InputError(f"unknown section '{unknown[0]}'; allowed: {', '.join(SECTIONS)}")
    host_only = [s for s in sections if device == "gpu" and s not in GPU_SECTIONS]
    if host_only:
        raise InputError(f"section '{host_only[0]}' measures the host; with --device gpu: "
                         f"{', '.join(GPU_SECTIONS)}")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise InputError(f"--out '{out}' is a file; give a folder")
    check_output_path(out / "bench.txt")
    plan = plans.QUICK if args.quick else plans.FULL  # read at call time: the tests swap FULL
    plan = plans.for_device(plan, device)
    if device == "gpu" and not gpu_frameworks():
        titles = ", ".join(f.title for f in FRAMEWORKS.values() if f.gpu_nodes)
        raise InputError(f"--device gpu: no GPU visible to any installed framework ({titles}); "
                         f"run the bench without --device gpu")
    start = time.perf_counter()
    loggers = {f.module: logging.getLogger(f.module) for f in FRAMEWORKS.values()}
    levels = {name: logger.level for name, logger in loggers.items()}
    if not getattr(args, "verbose", False):  # TensorFlow's retracing notes: each run traces anew
        for logger in loggers.values():
            logger.setLevel(logging.ERROR)
    try:
        tables = run_bench(plan, sections, device)
    finally:
        for name, logger in loggers.items():
            logger.setLevel(levels[name])
    text = render(tables, plan, time.perf_counter() - start, device)
    write_outputs(tables, text, out)
    print(text, end="")
    print(f"wrote {', '.join(f'{name}.parquet' for name in tables)} and bench.txt in {out}")
    return 0
