"""Section `overhead`: what our harness costs. Our driver against a minimal hand-written loop of
the same algorithm on the same backend (GD 1/L; NumPy, TensorFlow's fused loop, JAX's fused
loop, PyTorch's eager step; goal <= 1.05), and the trace recording: the host
loop with its trace written at every iteration against written only at the start (goal <= 1.03).
The hand-written loops live here: they exist only to be this section's denominators."""

from __future__ import annotations

import time
from contextlib import contextmanager

import numpy as np
import pandas as pd

from study.bench.plan import ENGINES, HARNESS_GOAL, TRACE_GOAL, Plan
from study.bench.runs import (
    Unavailable,
    blas_threads,
    describe,
    failed_row,
    progress,
    run_once,
    shown,
)
from study.bench.timing import median, ratio, samples


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


def hand_jax_gd(problem, dtype: str, iterations: int) -> float:
    """Seconds per iteration of a minimal GD `lax.fori_loop` under `jax.jit`, X transposed on the
    device as the JAX backend stores it, compiled ahead of time outside the clock; the clock
    stops after the result is on the host."""
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    X = jax.device_put(np.ascontiguousarray(np.asarray(problem.X, dtype=dtype).T))
    y = jax.device_put(np.asarray(problem.y, dtype=dtype))
    w0 = jnp.zeros((problem.d, problem.y.shape[1]), dtype=dtype)
    step = jnp.asarray(gd_step(problem), dtype=dtype)

    def evaluate(w):
        r = X.T @ w - y
        return jnp.sum(r * r) / y.shape[0], (2.0 / y.shape[0]) * (X @ r)

    def loop(w, count):
        def body(_, carry):
            w, _, g = carry
            w = w - step * g
            return (w, *evaluate(w))

        return jax.lax.fori_loop(0, count, body, (w, *evaluate(w)))

    compiled = jax.jit(loop).lower(w0, iterations).compile()
    start = time.perf_counter()
    np.asarray(compiled(w0, iterations)[1])
    return (time.perf_counter() - start) / iterations


def hand_torch_gd(problem, dtype: str, iterations: int) -> float:
    """Seconds per iteration of a minimal eager PyTorch GD loop on tensors made once (no
    autograd: the analytic gradient, as our backend computes it)."""
    import torch

    X = torch.as_tensor(np.ascontiguousarray(problem.X, dtype=dtype))
    y = torch.as_tensor(np.ascontiguousarray(problem.y, dtype=dtype))
    w = torch.zeros((problem.d, problem.y.shape[1]), dtype=X.dtype)
    step, inv_n = gd_step(problem), 1.0 / X.shape[0]
    with torch.no_grad():
        start = time.perf_counter()
        r = X @ w - y
        f, g = torch.sum(r * r) * inv_n, (2 * inv_n) * (X.T @ r)
        for _ in range(iterations):
            w = w - step * g
            r = X @ w - y
            f, g = torch.sum(r * r) * inv_n, (2 * inv_n) * (X.T @ r)
        float(f)
        return (time.perf_counter() - start) / iterations


HAND_WRITTEN = {  # (backend, feed) -> what the harness is compared with
    ("jax", "fused"): ("driver vs hand-written lax.fori_loop under jit", hand_jax_gd),
    ("torch", "resident"): ("driver vs hand-written eager PyTorch loop", hand_torch_gd),
}


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
    what = ("driver vs hand-written NumPy loop" if ENGINES[label][0] == "numpy"
            else "driver vs hand-written tf.while_loop" + (" (XLA)" if ENGINES[label][1].get(
                "xla") else ""))
    try:
        if ENGINES[label][0] == "numpy":
            def baseline():
                with blas_threads(label):
                    return hand_numpy_gd(problem, dtype, formulation, iterations)
        elif (ENGINES[label][0], ENGINES[label][1].get("feed")) in HAND_WRITTEN \
                and formulation == "data":
            what, hand_loop = HAND_WRITTEN[ENGINES[label][0], ENGINES[label][1]["feed"]]

            def baseline():
                return hand_loop(problem, dtype, iterations)
        elif ENGINES[label][1].get("feed") == "fused" and formulation == "data":
            xla = bool(ENGINES[label][1].get("xla"))

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
        if ENGINES[label][1].get("feed") in ("fused", "tf1"):
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


def overhead_iterations(plan: Plan, formulation: str) -> int:
    """Iterations per timed run: gram iterations are ~10 us, so many more of them."""
    return plan.data_iterations if formulation == "data" else plan.overhead_gram_iterations


def bench_overhead(plan: Plan, problem) -> pd.DataFrame:
    rows = []
    dtype = plan.dtypes[0]
    for label in plan.overhead_backends:
        for formulation in plan.formulations:
            if ENGINES[label][0] != "numpy" and formulation == "gram":
                continue  # the hand-written framework loops read X (formulation data)
            iterations = overhead_iterations(plan, formulation)
            rows.append(measure_harness(problem, label, formulation, dtype,
                                        iterations=iterations, repeats=plan.overhead_repeats))
            progress(f"[overhead] harness {label} {formulation}: "
                     f"{shown(rows[-1], 'ratio', 'x')}")
    for label in ("numpy", "tf-resident"):
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
