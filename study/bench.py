"""`python -m study bench`: how close each implementation comes to what the machine allows.

Every figure is a ratio of two timings taken in this process, the two interleaved, because the
machines are shared and noisy: an absolute millisecond means little, a ratio to a pass over the
same data measured a moment before means a lot. Sections (each a table, `<out>/<section>.parquet`):

iterations  seconds per iteration of GD (1/L), Adadelta and L-BFGS for every backend and feed mode
            (numpy, also with its BLAS held to one thread; tensorflow feed, resident, fused,
            fused+XLA, tf1), formulation and dtype, on the `eve` set, divided by one read pass
            over X (`X.sum()` on the same array and dtype, the definition of
            `study.regression.measure.read_pass_seconds`): "passes per iteration". Every
            measurement runs a fixed number of iterations (max_iter, no tolerance), several times.
overhead    our driver against a minimal hand-written loop of the same algorithm on the same
            backend (goal <= 1.05), and the trace recording: the host loop with its trace written
            at every iteration against written only at the start (goal <= 1.03).
scaling     synthetic problems (kappa 10): n from 1e4 to 1e7 rows at d = 5, and d from 5 to 512 at
            a fixed n; seconds per iteration and seconds to relative suboptimality 1e-8, with the
            fitted log-log slope per method (`<out>/slopes.parquet`).
feedmode    the CNN feed-mode experiment's steady-state seconds per call of every mode (built by
            `study.feedmode.measure.build`, as the study does) divided by its memory floor: one
            read pass over the input plus one write pass over the output, as NumPy array passes.
target      seconds to relative suboptimality 1e-8 of the candidate methods divided by the
            normal-equations solve (`closed-form`, solver `normal`), interleaved.

The driver's `seconds` (from the first evaluation to the stopping iteration, setup excluded) is
the numerator wherever a run is timed; setup (conversion, the Gram pass, tracing, compilation) is
reported beside it, and the `target` section also divides the totals (setup + loop).
No figure printed here is an absolute time on its own. Beside each median ratio, "fastest" is
the fastest run over the fastest denominator: on a loaded machine, the two together show how much
of a figure is the implementation and how much the neighbours.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, replace
from itertools import product
from pathlib import Path

import numpy as np
import pandas as pd

from datasets.errors import InputError
from study.output import check_output_path, write_parquet_atomic

SECTIONS = ("iterations", "overhead", "scaling", "feedmode", "target")

# label -> (backend name, options); formulation and device are added per measurement
BACKENDS = {
    "numpy": ("numpy", {}),
    "numpy-blas1": ("numpy", {}),  # BLAS limited to one thread, see BLAS_THREADS
    "tf-feed": ("tensorflow", {"feed": "feed"}),
    "tf-resident": ("tensorflow", {"feed": "resident"}),
    "tf-fused": ("tensorflow", {"feed": "fused"}),
    "tf-fused-xla": ("tensorflow", {"feed": "fused", "xla": True}),
    "tf1": ("tensorflow", {"feed": "tf1"}),
}
# the NumPy backend with its BLAS (OpenBLAS, MKL) limited to this many threads for the run
# (threadpoolctl, restored afterwards): on a loaded machine, a BLAS thread waiting for a
# descheduled sibling costs more than the second core gives
BLAS_THREADS = {"numpy-blas1": 1}
TF1_OPTIMIZERS = ("gd", "adadelta")  # the original TF1 program's optimizer classes
TARGET_TOL = 1e-8
HARNESS_GOAL = 1.05
TRACE_GOAL = 1.03


@dataclass(frozen=True)
class Plan:
    """What one bench measures; `FULL` and `QUICK` below, the tests use a tiny one."""

    name: str = "full"
    rows: int = 1_000_000                       # of the eve set (iterations, overhead, target)
    dtypes: tuple = ("float64", "float32")
    formulations: tuple = ("data", "gram")
    optimizers: tuple = ("gd", "adadelta", "lbfgs")
    backends: tuple = tuple(BACKENDS)
    data_iterations: int = 20                   # iterations per timed run, formulation data
    gram_iterations: int = 200                  # ... formulation gram (O(d^2) iterations)
    repeats: int = 5                            # timed runs per configuration (median)
    read_repeats: int = 3                       # read passes per timed run, interleaved
    overhead_repeats: int = 7
    overhead_gram_iterations: int = 2000        # gram iterations are ~10 us: many per run
    overhead_backends: tuple = ("numpy", "numpy-blas1", "tf-fused", "tf-fused-xla")
    scaling_n: tuple = (10_000, 100_000, 1_000_000, 10_000_000)
    scaling_d: tuple = (5, 16, 64, 256, 512)
    scaling_d_rows: int = 4096                  # n of the d sweep (>= max d)
    scaling_methods: tuple = (("gd", "numpy", "data"), ("adadelta", "numpy", "data"),
                              ("lbfgs", "numpy", "data"), ("gd", "numpy", "gram"),
                              ("lbfgs", "numpy", "gram"), ("gd", "tf-fused", "data"),
                              ("lbfgs", "tf-fused", "data"), ("lbfgs", "tf-fused", "gram"))
    scaling_iterations: int = 5
    scaling_repeats: int = 3
    scaling_time_budget: float = 10.0           # seconds of one run to the target
    feed_n: int = 5000
    feed_dtypes: tuple = ("float32", "float64")
    feed_modes: tuple = ()                      # () = every mode of study.feedmode.MODES
    feed_calls: int = 5
    target_repeats: int = 5
    target_candidates: tuple = (("lbfgs", "numpy", "data"), ("lbfgs", "numpy", "gram"),
                                ("lbfgs", "tf-fused", "data"), ("lbfgs", "tf-fused", "gram"),
                                ("lbfgs", "tf-fused-xla", "data"),
                                ("scipy-lbfgs", "numpy", "data"), ("gd", "numpy", "gram"))


FULL = Plan()
QUICK = replace(
    FULL, name="quick", rows=100_000, dtypes=("float64",),
    backends=("numpy", "numpy-blas1", "tf-resident", "tf-fused"), repeats=2, overhead_repeats=5,
    overhead_backends=("numpy", "numpy-blas1", "tf-fused"),
    scaling_n=(10_000, 30_000, 100_000), scaling_d=(5, 32, 128), scaling_d_rows=2048,
    scaling_methods=(("gd", "numpy", "data"), ("lbfgs", "numpy", "data"),
                     ("lbfgs", "numpy", "gram"), ("lbfgs", "tf-fused", "data")),
    scaling_repeats=2, scaling_time_budget=3.0, feed_n=1000, feed_dtypes=("float32",),
    feed_calls=3, target_repeats=3,
    target_candidates=(("lbfgs", "numpy", "data"), ("lbfgs", "numpy", "gram"),
                       ("lbfgs", "tf-fused", "data"), ("lbfgs", "tf-fused", "gram"),
                       ("scipy-lbfgs", "numpy", "data")),
)


class Unavailable(Exception):
    """A configuration that cannot run here (an option not in this version, no GPU): a row
    with status 'unavailable' and the reason, never a crash of the bench."""


# --- timing primitives -------------------------------------------------------------------------

def median(values) -> float:
    values = [v for v in values if v is not None and not math.isnan(v)]
    return float(np.median(values)) if values else float("nan")


def ratio(numerator: float, denominator: float) -> float:
    """numerator / denominator, NaN when either is missing or the denominator is not > 0."""
    if not (numerator == numerator and denominator == denominator) or not denominator > 0:
        return float("nan")
    return numerator / denominator


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


def first_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text.splitlines()[0] if text else type(exc).__name__


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- runs through the public API ---------------------------------------------------------------

def backend_for(label: str, dtype: str, formulation: str = "data", device: str = "cpu"):
    """The backend a label names; an option this version does not have -> Unavailable."""
    from optimizers import make_backend

    name, options = BACKENDS[label]
    options = dict(options)
    if name == "tensorflow" and device != "cpu":
        options["device"] = device
    if formulation != "data":
        options["formulation"] = formulation
    try:
        return make_backend(name, dtype, **options)
    except InputError as exc:  # e.g. tf1 with the gram formulation
        raise Unavailable(f"{label} {formulation}: {first_line(exc)}") from None


def run_once(problem, optimizer: str, label: str, dtype: str, formulation: str, *,
             device: str = "cpu", **stopping):
    """One run through `optimizers.run`; a run this machine cannot do -> Unavailable."""
    from optimizers import build_rules, make_optimizer, run

    if label == "tf1" and optimizer not in TF1_OPTIMIZERS:
        raise Unavailable(f"tf1 runs {', '.join(TF1_OPTIMIZERS)} only")
    backend = backend_for(label, dtype, formulation, device)
    try:
        with blas_threads(label):
            result = run(problem, make_optimizer(optimizer), build_rules(**stopping),
                         backend=backend)
    except InputError as exc:
        raise Unavailable(first_line(exc)) from None
    if result.status == "skipped":
        raise Unavailable(result.message)
    return result


def blas_threads(label: str):
    """The BLAS thread limit of a backend label, as a context (nothing for most labels)."""
    limit = BLAS_THREADS.get(label)
    if limit is None:
        return nullcontext()
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=limit, user_api="blas")


def describe(label: str) -> dict:
    name, options = BACKENDS[label]
    return {"backend": label, "backend_name": name, "feed": options.get("feed", ""),
            "xla": bool(options.get("xla", False)),
            "blas_threads": BLAS_THREADS.get(label, 0)}  # 0: the library's default


def failed_row(row: dict, exc: BaseException) -> dict:
    status = "unavailable" if isinstance(exc, Unavailable) else "error"
    return {**row, "status": status, "message": str(exc) if status == "unavailable"
            else first_line(exc)}


# --- iterations: passes over X per iteration ---------------------------------------------------

def measure_iterations(problem, optimizer: str, label: str, formulation: str, dtype: str, *,
                       iterations: int, repeats: int, read, device: str = "cpu") -> dict:
    """Seconds per iteration of `repeats` runs of `iterations` iterations, each run preceded by
    read passes (`read()` -> list of seconds), and one more batch of read passes at the end."""
    row = {"optimizer": optimizer, **describe(label), "formulation": formulation, "dtype": dtype,
           "device": device, "n": problem.n, "d": problem.d, "max_iter": iterations,
           "status": "ok", "message": ""}
    per_iteration, setup, counts, reads, statuses = [], [], [], [], []
    try:
        for _ in range(repeats):
            reads += read()
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
                                 read=lambda X=X: read_passes(X, plan.read_repeats))
        rows.append(row)
        shown = (f"{row['passes_per_iteration']:.3g} passes/iter" if row["status"] == "ok"
                 else f"{row['status']}: {row['message']}")
        progress(f"[iterations {number}/{len(grid)}] {optimizer} {label} {formulation} {dtype}: "
                 f"{shown}")
    return pd.DataFrame(rows)


# --- overhead: driver vs hand-written loop; trace recording ------------------------------------

def gd_step(problem) -> float:
    """GD's 1/L step exactly as `optimizers.gd` computes it (float64, from the Gram matrix)."""
    from datasets.problem import gram_matrix

    return 1.0 / float(np.linalg.eigvalsh(gram_matrix(problem.X))[-1])


def hand_numpy_gd(problem, dtype: str, formulation: str, iterations: int) -> float:
    """Seconds per iteration of a minimal NumPy GD loop: the loss and gradient at every iterate
    (as the optimizer's state holds them), no stopping checks, no trace. The data is prepared as
    the NumPy backend prepares it (column-major, the run's dtype), outside the clock."""
    X = np.asfortranarray(problem.X, dtype=dtype)
    y = np.asarray(problem.y, dtype=dtype)
    kind = X.dtype.type
    inv_n, step = kind(1.0 / X.shape[0]), kind(gd_step(problem))
    w = np.zeros((X.shape[1], y.shape[1]), dtype=X.dtype)
    if formulation == "gram":
        A, b, c = X.T @ X, X.T @ y, np.sum(y * y)

        def evaluate(w):
            Aw = A @ w
            return (np.sum(w * Aw) - 2 * np.sum(w * b) + c) * inv_n, (2 * inv_n) * (Aw - b)
    else:
        def evaluate(w):
            r = X @ w - y
            return np.vdot(r, r) * inv_n, (2 * inv_n) * (X.T @ r)
    start = time.perf_counter()
    f, g = evaluate(w)
    for _ in range(iterations):
        w = w - step * g
        f, g = evaluate(w)
    float(f)
    return (time.perf_counter() - start) / iterations


def hand_tf_gd(problem, dtype: str, iterations: int, *, xla: bool, device: str = "cpu") -> float:
    """Seconds per iteration of a minimal GD `tf.while_loop` in one `tf.function` (the whole loop
    XLA-compiled when `xla`), data resident on the device in the layout the TensorFlow backend
    uses for this dtype and XLA setting, traced and compiled by a one-iteration warm-up call
    outside the clock; the clock stops after the result is on the host."""
    import tensorflow as tf

    from optimizers.backends.tensorflow import data_layout

    columns = data_layout(dtype, xla) == "columns"  # X stored transposed (d x n)

    @tf.function(jit_compile=xla)
    def loop(X, y, w, step, count):
        inv_n = tf.cast(1.0 / tf.cast(tf.shape(y)[0], tf.float64), X.dtype)

        def evaluate(w):
            r = tf.linalg.matmul(X, w, transpose_a=columns) - y
            return tf.reduce_sum(r * r) * inv_n, (2 * inv_n) * tf.linalg.matmul(
                X, r, transpose_a=not columns)

        def body(i, w, f, g):
            w = w - step * g
            f, g = evaluate(w)
            return i + 1, w, f, g

        f, g = evaluate(w)
        _, w, f, _ = tf.while_loop(lambda i, *_: i < count, body, (tf.constant(0), w, f, g))
        return w, f

    with tf.device("/GPU:0" if device == "gpu" else "/CPU:0"):
        X = np.asarray(problem.X, dtype=dtype)
        X = tf.identity(tf.constant(np.ascontiguousarray(X.T) if columns else X))
        y = tf.identity(tf.constant(np.asarray(problem.y, dtype=dtype)))
        w = tf.zeros((problem.d, problem.y.shape[1]), dtype=X.dtype)
        step = tf.constant(gd_step(problem), dtype=X.dtype)
        loop(X, y, w, step, tf.constant(1))[1].numpy()  # trace and compile
        start = time.perf_counter()
        loop(X, y, w, step, tf.constant(iterations))[1].numpy()
        return (time.perf_counter() - start) / iterations


def overhead_row(check: str, label: str, formulation: str, dtype: str, problem, goal: float,
                 ours: list, baseline: list, what: str, **extra) -> dict:
    measured, reference = median(ours), median(baseline)
    value = ratio(measured, reference)
    return {"check": check, **describe(label), "formulation": formulation, "dtype": dtype,
            "n": problem.n, "d": problem.d, "status": "ok", "message": "", "what": what,
            "seconds": measured, "baseline_seconds": reference, "ratio": value,
            "ratio_best": ratio(min(ours), min(baseline)), "goal": goal,
            "meets_goal": bool(value <= goal) if value == value else None,
            "seconds_samples": samples(ours), "baseline_samples": samples(baseline), **extra}


def measure_harness(problem, label: str, formulation: str, dtype: str, *, iterations: int,
                    repeats: int) -> dict:
    """Our driver's seconds per iteration of GD (1/L) over a hand-written loop's, interleaved."""
    ours, hand = [], []
    what = ("driver vs hand-written NumPy loop" if BACKENDS[label][0] == "numpy"
            else "driver vs hand-written tf.while_loop" + (" (XLA)" if BACKENDS[label][1].get(
                "xla") else ""))
    try:
        if BACKENDS[label][0] == "numpy":
            def baseline():
                with blas_threads(label):
                    return hand_numpy_gd(problem, dtype, formulation, iterations)
        elif BACKENDS[label][1].get("feed") == "fused" and formulation == "data":
            xla = bool(BACKENDS[label][1].get("xla"))

            def baseline():
                return hand_tf_gd(problem, dtype, iterations, xla=xla)
        else:
            raise Unavailable(f"no hand-written loop for {label} {formulation}")
        for repeat in range(repeats):  # alternating which goes first
            if repeat % 2:
                hand.append(baseline())
            result = run_once(problem, "gd", label, dtype, formulation, max_iter=iterations)
            ours.append(result.seconds_per_iteration)
            if not repeat % 2:
                hand.append(baseline())
    except Exception as exc:  # noqa: BLE001
        return failed_row({"check": "harness", **describe(label), "formulation": formulation,
                           "dtype": dtype, "n": problem.n, "d": problem.d, "what": what,
                           "goal": HARNESS_GOAL}, exc)
    return overhead_row("harness", label, formulation, dtype, problem, HARNESS_GOAL, ours, hand,
                        what, iterations=iterations)


@contextmanager
def trace_schedule(predicate):
    """Replace the host loop's trace schedule (`optimizers.driver.on_trace_schedule`) for a while.
    The loop always records its last iteration, so 'only iteration 0' is the smallest trace."""
    import optimizers.driver as driver

    if not hasattr(driver, "on_trace_schedule"):
        raise Unavailable("optimizers.driver has no on_trace_schedule to override")
    saved = driver.on_trace_schedule
    driver.on_trace_schedule = predicate
    try:
        yield
    finally:
        driver.on_trace_schedule = saved


def measure_trace(problem, label: str, formulation: str, dtype: str, *, iterations: int,
                  repeats: int) -> list[dict]:
    """The host loop's trace written at every iteration vs at iteration 0 only, interleaved:
    the reported seconds (the clock is paused while the trace is written, so the goal is that
    this stays ~1) and the wall clock around run() less setup (what the trace costs in all)."""
    timed = {"every": [], "first": []}
    wall = {"every": [], "first": []}
    schedules = {"every": lambda iteration: True, "first": lambda iteration: iteration == 0}
    base = {"check": "trace", **describe(label), "formulation": formulation, "dtype": dtype,
            "n": problem.n, "d": problem.d, "goal": TRACE_GOAL}
    try:
        if BACKENDS[label][1].get("feed") in ("fused", "tf1"):
            raise Unavailable(f"{label} keeps its own trace (not the host loop's)")
        for repeat in range(repeats):  # alternating which goes first
            for name, schedule in list(schedules.items())[::-1 if repeat % 2 else 1]:
                with trace_schedule(schedule):
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


def bench_overhead(plan: Plan, problem) -> pd.DataFrame:
    rows = []
    dtype = plan.dtypes[0]
    for label in plan.overhead_backends:
        for formulation in plan.formulations:
            if BACKENDS[label][0] != "numpy" and formulation == "gram":
                continue  # the hand-written TensorFlow loop reads X (formulation data)
            iterations = (plan.data_iterations if formulation == "data"
                          else plan.overhead_gram_iterations)
            rows.append(measure_harness(problem, label, formulation, dtype,
                                        iterations=iterations, repeats=plan.overhead_repeats))
            progress(f"[overhead] harness {label} {formulation}: "
                     f"{_shown(rows[-1], 'ratio', 'x')}")
    for label in ("numpy", "tf-resident"):
        if label not in plan.backends and label not in plan.overhead_backends:
            continue
        for formulation in plan.formulations:
            iterations = (plan.data_iterations if formulation == "data"
                          else plan.overhead_gram_iterations)
            measured = measure_trace(problem, label, formulation, dtype, iterations=iterations,
                                     repeats=plan.overhead_repeats)
            rows += measured
            progress(f"[overhead] trace {label} {formulation}: "
                     f"{_shown(measured[0], 'ratio', 'x')}")
    return pd.DataFrame(rows)


def _shown(row: dict, key: str, unit: str) -> str:
    """A row's figure for the progress lines on stderr."""
    if row.get("status") != "ok":
        return f"{row.get('status')}: {row.get('message')}"
    value = row.get(key, float("nan"))
    return "target not reached" if value != value else f"{value:.3g}{unit}"


# --- scaling: against n and d ------------------------------------------------------------------

def enough_memory(n: int, d: int, copies: int = 8) -> tuple[bool, str]:
    """Whether `copies` float64 copies of an n x d matrix fit in the memory available now."""
    import psutil

    needed = copies * n * (d + 1) * 8
    available = psutil.virtual_memory().available
    return needed < available, (f"needs about {needed / 2**30:.1f} GiB, "
                                f"{available / 2**30:.1f} GiB available")


def measure_point(problem, method, *, iterations: int, repeats: int, read_repeats: int,
                  time_budget: float) -> dict:
    """One scaling point: seconds per iteration (fixed iterations, repeated, interleaved with
    read passes) and one run to relative suboptimality 1e-8 under a time budget."""
    optimizer, label, formulation = method
    X = problem.X
    row = measure_iterations(problem, optimizer, label, formulation, "float64",
                             iterations=iterations, repeats=repeats,
                             read=lambda: read_passes(X, read_repeats))
    row["method"] = f"{optimizer} {label} {formulation}"
    if row["status"] != "ok":
        return row
    try:
        result = run_once(problem, optimizer, label, "float64", formulation, tol=TARGET_TOL,
                          max_iter=1_000_000, time_budget=time_budget)
    except Exception as exc:  # noqa: BLE001
        return {**row, "target_status": "error", "target_message": first_line(exc)}
    reached = bool(result.target_reached)
    return {**row, "target_status": result.status, "target_iterations": result.iterations,
            "seconds_to_target": result.seconds if reached else float("nan"),
            "setup_to_target": result.setup_seconds,
            "total_to_target": result.seconds + result.setup_seconds if reached
            else float("nan")}


def bench_scaling(plan: Plan) -> tuple[pd.DataFrame, pd.DataFrame]:
    from datasets import make_problem

    rows = []
    sweeps = [("n", n, 5) for n in plan.scaling_n] + \
             [("d", plan.scaling_d_rows, d) for d in plan.scaling_d]
    for sweep, n, d in sweeps:
        fits, why = enough_memory(n, d)
        if not fits:
            rows += [{"sweep": sweep, "n": n, "d": d, "method": " ".join(m), "optimizer": m[0],
                      **describe(m[1]), "formulation": m[2], "status": "skipped",
                      "message": f"not enough memory: {why}"} for m in plan.scaling_methods]
            progress(f"[scaling {sweep}] n={n} d={d}: skipped, {why}")
            continue
        problem = make_problem("synthetic", n=n, d=d, kappa=10.0)
        problem.reference  # noqa: B018 -- the float64 reference, before any clock
        for method in plan.scaling_methods:
            row = measure_point(problem, method, iterations=plan.scaling_iterations,
                                repeats=plan.scaling_repeats, read_repeats=plan.read_repeats,
                                time_budget=plan.scaling_time_budget)
            rows.append({"sweep": sweep, **row})
            progress(f"[scaling {sweep}] n={n} d={d} {row['method']}: "
                     f"{_shown(row, 'seconds_per_iteration', ' s/iter')}")
        del problem
    table = pd.DataFrame(rows)
    return table, slopes(table)


SLOPE_METRICS = ("seconds_per_iteration", "seconds_to_target", "total_to_target")


def slopes(table: pd.DataFrame) -> pd.DataFrame:
    """The fitted log-log slope of each metric against n (or d) per method and sweep."""
    rows = []
    if table.empty:
        return pd.DataFrame(rows)
    for (sweep, method), part in table.groupby(["sweep", "method"], sort=False):
        axis = "n" if sweep == "n" else "d"
        ok = part[part["status"] == "ok"]
        for metric in SLOPE_METRICS:
            values = ok[metric] if metric in ok else pd.Series(dtype=float)
            slope, points = loglog_slope(ok[axis], values)
            rows.append({"sweep": sweep, "against": axis, "method": method, "metric": metric,
                         "slope": slope, "points": points,
                         "range": f"{axis}={ok[axis].min()}..{ok[axis].max()}" if len(ok)
                         else ""})
    return pd.DataFrame(rows)


# --- the CNN feed-mode experiment against its memory floor -------------------------------------

def measure_feedmode(mode: str, x: np.ndarray, kernel: np.ndarray, out: np.ndarray, *,
                     calls: int, device: str = "cpu") -> dict:
    """Steady seconds per call of one feed mode over the memory floor: a read pass over the
    input (`x.sum()`) plus a write pass over an output-sized array (`out.fill(0)`), interleaved
    call by call. The mode is built by the study's own worker code (setup outside the clock)."""
    from study.feedmode import measure as worker
    from study.feedmode import model as fm

    dtype = x.dtype.name
    spec = worker.Spec(mode=mode, dtype=dtype, n=x.shape[0], calls=calls, device=device)
    model = fm.MODES[mode].model
    row = {"mode": mode, "api": fm.MODES[mode].api, "feed": fm.MODES[mode].feed, "model": model,
           "xla": fm.MODES[mode].xla, "dtype": dtype, "n": x.shape[0], "calls": calls,
           "status": "ok", "message": "", "input_bytes": x.nbytes, "output_bytes": out.nbytes}
    if model == "fused-conv":
        kernel = fm.fused_kernel(kernel)
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
    from study.feedmode import model as fm

    rows = []
    for dtype in plan.feed_dtypes:
        x = fm.make_input(plan.feed_n, dtype)
        kernel = fm.make_kernel(dtype)
        out = np.zeros((plan.feed_n, fm.OUT, fm.OUT, fm.CHANNELS), dtype=dtype)
        for mode in plan.feed_modes or tuple(fm.MODES):
            row = measure_feedmode(mode, x, kernel, out, calls=plan.feed_calls)
            rows.append(row)
            progress(f"[feedmode] {mode} {dtype}: {_shown(row, 'steady_over_floor', 'x floor')}")
    return pd.DataFrame(rows)


# --- time to 1e-8 against the normal equations ---------------------------------------------------

def bench_target(plan: Plan, problem) -> pd.DataFrame:
    """Every candidate and the normal-equations solve, interleaved run by run (float64)."""
    from optimizers import build_rules, make_backend, make_optimizer, run

    def reference():
        return run(problem, make_optimizer("closed-form", solver="normal"),
                   build_rules(tol=TARGET_TOL, max_iter=1), backend=make_backend("numpy"))

    candidates = list(plan.target_candidates) + [("closed-form-lstsq", "numpy", "data")]
    results = {c: {"seconds": [], "setup": [], "status": [], "iterations": [], "reached": []}
               for c in candidates}
    failures: dict = {}
    ref = {"seconds": [], "setup": []}
    for _ in range(plan.target_repeats):
        result = reference()
        ref["seconds"].append(result.seconds)
        ref["setup"].append(result.setup_seconds)
        for candidate in candidates:
            if candidate in failures:
                continue
            optimizer, label, formulation = candidate
            try:
                if optimizer == "closed-form-lstsq":
                    result = run(problem, make_optimizer("closed-form", solver="lstsq"),
                                 build_rules(tol=TARGET_TOL, max_iter=1),
                                 backend=make_backend("numpy"))
                else:
                    result = run_once(problem, optimizer, label, "float64", formulation,
                                      tol=TARGET_TOL, max_iter=10_000)
            except Exception as exc:  # noqa: BLE001
                failures[candidate] = exc
                continue
            entry = results[candidate]
            entry["seconds"].append(result.seconds)
            entry["setup"].append(result.setup_seconds)
            entry["status"].append(result.status)
            entry["iterations"].append(result.iterations)
            entry["reached"].append(bool(result.target_reached))
    ref_seconds = median(ref["seconds"])
    ref_total = median([s + u for s, u in zip(ref["seconds"], ref["setup"], strict=True)])
    rows = []
    for candidate in candidates:
        optimizer, label, formulation = candidate
        row = {"optimizer": optimizer, **describe(label), "formulation": formulation,
               "dtype": "float64", "n": problem.n, "d": problem.d, "tol": TARGET_TOL,
               "status": "ok", "message": "", "reference_seconds": ref_seconds,
               "reference_total_seconds": ref_total,
               "reference_samples": samples(ref["seconds"])}
        if candidate in failures:
            rows.append(failed_row(row, failures[candidate]))
            continue
        entry = results[candidate]
        reached = all(entry["reached"])
        seconds = median(entry["seconds"])
        total = median([s + u for s, u in zip(entry["seconds"], entry["setup"], strict=True)])
        rows.append({**row, "run_status": entry["status"][-1], "reached": reached,
                     "iterations": int(np.median(entry["iterations"])),
                     "seconds_to_target": seconds, "setup_seconds": median(entry["setup"]),
                     "total_seconds": total,
                     "over_normal": ratio(seconds, ref_seconds) if reached else float("nan"),
                     "total_over_normal_total": ratio(total, ref_total) if reached
                     else float("nan"),
                     "seconds_samples": samples(entry["seconds"])})
        progress(f"[target] {optimizer} {label} {formulation}: "
                 f"{_shown(rows[-1], 'over_normal', 'x normal equations')}")
    table = pd.DataFrame(rows)
    if "total_over_normal_total" in table:
        ranked = table["total_over_normal_total"].astype(float)
        table["best"] = False
        if ranked.notna().any():
            table.loc[ranked.idxmin(), "best"] = True
    return table


# --- the text table ----------------------------------------------------------------------------

INTEGER_COLUMNS = ("n", "d", "iterations", "target_iterations", "points", "max_iter")


def _fmt(value, spec: str = ".3g") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if spec == "d":
        return str(int(value))
    if isinstance(value, (int, float, np.integer, np.floating)):
        return format(value, spec)
    return str(value)


def _numeric(text: str) -> bool:
    if text in ("", "-"):
        return True
    try:
        float(text)
    except ValueError:
        return False
    return True


LABEL_COLUMNS = ("optimizer", "backend", "feed", "xla", "formulation", "dtype", "mode", "method",
                 "check", "sweep", "n", "d")


def _cell(row, key: str) -> str:
    return _fmt(row[key], "d" if key in INTEGER_COLUMNS else ".3g")


def text_table(frame: pd.DataFrame, columns: list[tuple[str, str]]) -> str:
    """Columns (key, header) as fixed-width text; rows that did not run show their labels and
    their status and message instead of figures."""
    if frame.empty:
        return "  (nothing measured)"
    present = [(k, h) for k, h in columns if k in frame.columns]
    cells = [[h for _, h in present]]
    notes = {}
    for _, row in frame.iterrows():
        if row.get("status", "ok") != "ok":
            cells.append([_cell(row, k) if k in LABEL_COLUMNS else "" for k, _ in present])
            notes[len(cells) - 1] = f"{row['status']}: {row.get('message', '')}"
            continue
        cells.append([_cell(row, k) for k, _ in present])
    widths = [max(len(r[i]) for r in cells) for i in range(len(present))]
    numeric = [all(_numeric(r[i]) for r in cells[1:]) for i in range(len(present))]
    lines = []
    for index, r in enumerate(cells):
        line = "  " + "  ".join(c.rjust(w) if numeric[i] else c.ljust(w)
                                for i, (c, w) in enumerate(zip(r, widths, strict=True)))
        if index in notes:
            line = line.rstrip() + "  " + notes[index]
        lines.append(line.rstrip())
    return "\n".join(lines)


def passes_summary(frame: pd.DataFrame) -> str:
    """Passes per iteration (median), one small table per formulation: backends down,
    optimizer and dtype across; configurations that did not run are left out."""
    rows = frame[frame["status"] == "ok"] if "status" in frame else frame
    if rows.empty or "passes_per_iteration" not in rows:
        return "  (no configuration ran)"
    parts = []
    for formulation, part in rows.groupby("formulation", sort=False):
        table = part.pivot_table(index="backend", columns=["dtype", "optimizer"],
                                 values="passes_per_iteration", aggfunc="median", sort=False)
        table.columns = [f"{optimizer} {dtype}" for dtype, optimizer in table.columns]
        table = table.reset_index().rename(columns={"backend": f"formulation {formulation}"})
        parts.append(text_table(table, [(c, c) for c in table.columns]))
    return "\n".join(parts) + "\n  in detail:"


def render(tables: dict, plan: Plan, seconds: float) -> str:
    parts = [f"convergence-study bench ({plan.name}; every figure a "
             f"ratio of timings taken side by side in this process; bench took {seconds:.0f} s)"]
    if "iterations" in tables:
        frame = tables["iterations"]
        reads = frame.groupby("dtype")["read_pass_seconds"].median() if "read_pass_seconds" \
            in frame else {}
        unit = ", ".join(f"{k} {v * 1e3:.3g} ms" for k, v in dict(reads).items())
        parts.append(f"\n== passes over X per iteration: eve n={plan.rows}, d={frame['d'].max()}, "
                     f"{plan.data_iterations} (data) / {plan.gram_iterations} (gram) iterations "
                     f"per run, median of {plan.repeats} runs; one read pass X.sum(): {unit}")
        parts.append(passes_summary(frame))
        parts.append(text_table(frame, [
            ("optimizer", "optimizer"), ("backend", "backend"), ("formulation", "form"),
            ("dtype", "dtype"), ("passes_per_iteration", "passes/iter"),
            ("passes_per_iteration_best", "fastest"), ("seconds_per_iteration", "s/iter"),
            ("setup_seconds", "setup s")]))
    if "overhead" in tables:
        parts.append(f"\n== overhead: GD 1/L, ours over a minimal loop (goal harness <= "
                     f"{HARNESS_GOAL}, trace <= {TRACE_GOAL}); dtype {plan.dtypes[0]}")
        parts.append(text_table(tables["overhead"], [
            ("check", "check"), ("backend", "backend"), ("formulation", "form"),
            ("ratio", "ratio"), ("ratio_best", "fastest"), ("goal", "goal"),
            ("meets_goal", "meets"),
            ("seconds", "ours s/iter"), ("baseline_seconds", "baseline s/iter"),
            ("what", "what")]))
    if "scaling" in tables:
        parts.append("\n== scaling: synthetic kappa=10, float64; seconds per iteration, passes "
                     "per iteration, and seconds to 1e-8 (loop; setup apart)")
        parts.append(text_table(tables["scaling"], [
            ("sweep", "sweep"), ("n", "n"), ("d", "d"), ("method", "method"),
            ("seconds_per_iteration", "s/iter"), ("passes_per_iteration", "passes/iter"),
            ("target_iterations", "iters to 1e-8"), ("seconds_to_target", "s to 1e-8"),
            ("setup_to_target", "setup s"), ("target_status", "status")]))
        parts.append("\n  fitted log-log slopes (1 = linear)")
        parts.append(text_table(tables["slopes"], [
            ("against", "against"), ("method", "method"), ("metric", "metric"),
            ("slope", "slope"), ("points", "points"), ("range", "range")]))
    if "feedmode" in tables:
        parts.append(f"\n== CNN feed modes: steady seconds per call over the memory floor (read "
                     f"the input once + write the output once), N={plan.feed_n}")
        parts.append(text_table(tables["feedmode"], [
            ("mode", "mode"), ("dtype", "dtype"), ("steady_over_floor", "x floor"),
            ("steady_over_floor_best", "fastest"),
            ("first_over_steady", "first/steady"), ("steady_seconds", "steady s"),
            ("floor_seconds", "floor s")]))
    if "target" in tables:
        parts.append(f"\n== time to relative suboptimality {TARGET_TOL:g} over the "
                     f"normal-equations solve: eve n={plan.rows}, float64, median of "
                     f"{plan.target_repeats}; 'total' adds setup (conversion, Gram pass, "
                     f"tracing) on both sides")
        parts.append(text_table(tables["target"], [
            ("optimizer", "method"), ("backend", "backend"), ("formulation", "form"),
            ("over_normal", "loop/normal"), ("total_over_normal_total", "total/total"),
            ("iterations", "iters"), ("seconds_to_target", "loop s"),
            ("total_seconds", "total s"), ("reference_seconds", "normal s"),
            ("run_status", "status"), ("best", "best")]))
    return "\n".join(parts) + "\n"


def write_text_atomic(text: str, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


# --- the command ---------------------------------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true",
                        help="100k rows, fewer configurations, n up to 1e5 (about 2 minutes)")
    parser.add_argument("--out", default="results/bench",
                        help="folder for <section>.parquet and bench.txt (default results/bench)")
    parser.add_argument("--sections", nargs="+", metavar="SECTION",
                        help=f"only these sections: {', '.join(SECTIONS)}")


def run_bench(plan: Plan, sections=SECTIONS) -> dict[str, pd.DataFrame]:
    """Measure the sections in order; the tables by name (slopes beside scaling)."""
    from datasets import make_problem
    from study.sweep.environment import collect

    tables: dict[str, pd.DataFrame] = {}
    problem = None
    if any(s in sections for s in ("iterations", "overhead", "target")):
        problem = make_problem("eve", rows=plan.rows)
        problem.reference  # noqa: B018 -- f* in float64, before any clock
    if "iterations" in sections:
        tables["iterations"] = bench_iterations(plan, problem)
    if "overhead" in sections:
        tables["overhead"] = bench_overhead(plan, problem)
    if "scaling" in sections:
        tables["scaling"], tables["slopes"] = bench_scaling(plan)
    if "feedmode" in sections:
        tables["feedmode"] = bench_feedmode(plan)
    if "target" in sections:
        tables["target"] = bench_target(plan, problem)
    environment = collect()
    return {name: frame.assign(**environment) if len(frame) else frame
            for name, frame in tables.items()}


def main(args) -> int:
    import logging

    sections = tuple(args.sections or SECTIONS)
    unknown = [s for s in sections if s not in SECTIONS]
    if unknown:
        raise InputError(f"unknown section '{unknown[0]}'; allowed: {', '.join(SECTIONS)}")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise InputError(f"--out '{out}' is a file; give a folder")
    check_output_path(out / "bench.txt")
    plan = QUICK if args.quick else FULL
    start = time.perf_counter()
    logger = logging.getLogger("tensorflow")
    level = logger.level
    if not getattr(args, "verbose", False):  # TensorFlow's retracing notes: each run traces anew
        logger.setLevel(logging.ERROR)
    try:
        tables = run_bench(plan, sections)
    finally:
        logger.setLevel(level)
    text = render(tables, plan, time.perf_counter() - start)
    for name, frame in tables.items():
        write_parquet_atomic(frame, out / f"{name}.parquet")
    write_text_atomic(text, out / "bench.txt")
    print(text, end="")
    print(f"wrote {', '.join(f'{name}.parquet' for name in tables)} and bench.txt in {out}")
    return 0
