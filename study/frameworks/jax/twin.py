"""The JAX backend's hand-written twins (see study.bench.twins): its GD loops (a jitted step
called from Python, or a jitted `lax.fori_loop`), the copy on the device, and the float32
probes of issue 32 item 4 (matmul precision, the gradient's reduction laid out three ways)."""

from __future__ import annotations

import time
from contextlib import contextmanager

import numpy as np

from study.bench.runs import failed_row, progress, shown
from study.bench.sections.bandwidth import fraction, mode_row
from study.bench.timing import median, samples
from study.bench.twins import (
    WHOLE_LOOP,
    gd_functions,
    gd_step,
    host_arrays,
    no_loop,
    timed_steps,
)
from study.frameworks.jax.backend import _jax, host_array

FEEDS = ("feed", "resident", "fused")  # the feed modes with a hand-written loop here


def hand_loop(problem, feed: str, dtype: str, device: str, iterations: int) -> float:
    """A jitted step called from a Python loop with `float(f)` every iteration (X passed
    as a NumPy array every call for feed, put on the device once for resident), or for fused a
    jitted `lax.fori_loop` of the whole run, read once. Compiled ahead of time, off the clock."""
    if feed not in FEEDS:
        raise no_loop("jax", feed)
    if feed in WHOLE_LOOP:
        return hand_reduction(problem, dtype, device, REDUCTIONS[2], iterations)
    jax = _jax()
    import jax.numpy as jnp

    Xt_host, y_host, step, inv_n = host_arrays(problem, dtype)
    Xt_host, y_host = host_array(Xt_host), host_array(y_host)  # as our feed mode holds them
    target = jax.devices(device)[0]
    put = (lambda a: a) if feed == "feed" else (lambda a: jax.device_put(a, target))
    Xt, y = put(Xt_host), put(y_host)
    w0 = jax.device_put(np.zeros((problem.d, y_host.shape[1]), dtype=dtype), target)
    evaluate, update = gd_functions(jnp.sum, np.asarray(step, dtype), np.asarray(inv_n, dtype))
    with jax.default_device(target):
        first = jax.jit(evaluate).lower(Xt, y, w0).compile()
        f, g = first(Xt, y, w0)
        stepped = jax.jit(update).lower(Xt, y, w0, g).compile()
        float(stepped(Xt, y, w0, g)[2])
        return timed_steps(first, stepped, lambda: (Xt, y), w0, iterations)


def minimal_loop(options: dict, formulation: str):
    if options.get("feed") != "fused" or formulation != "data":
        return None

    def loop(problem, dtype, iterations):
        return hand_loop(problem, "fused", dtype, "cpu", iterations)

    return "driver vs hand-written lax.fori_loop under jit", loop


def copy_call(shape: tuple, device: str):
    jax = _jax()
    x = jax.device_put(np.ones(shape), jax.devices(device)[0])
    scaled = jax.jit(lambda x, s: x * s)

    def call():
        scaled(x, 1.0).block_until_ready()
    return call


# --- the float32 probes (issue 32 item 4) -------------------------------------------------------

@contextmanager
def matmul_precision(value: str | None):
    """JAX's default matmul precision set for the whole process for a while: the JAX backend
    runs on a worker thread (optimizers.interruptible), which `jax.default_matmul_precision`'s
    thread-local context would not reach. None leaves JAX's default."""
    if value is None:
        yield
        return
    import jax

    saved = jax.config.jax_default_matmul_precision
    jax.config.update("jax_default_matmul_precision", value)
    try:
        yield
    finally:
        jax.config.update("jax_default_matmul_precision", saved)


REDUCTIONS = ("X.T @ r", "sum(X * r, axis=0)", "Xt @ r (X stored transposed)")


def hand_reduction(problem, dtype: str, device: str, layout: str, iterations: int) -> float:
    """Seconds per iteration of a jitted `lax.fori_loop` of GD whose gradient X^T r is computed
    as `layout` says (REDUCTIONS), compiled off the clock, read once. X and y are arguments of
    the compiled loop, as an engine's data are (closed over, they were constants of the program
    and XLA transposed X at compile time: 2.2 against 4.2 us an iteration at 1k x 5)."""
    jax = _jax()
    import jax.numpy as jnp

    target = jax.devices(device)[0]
    transposed = layout == REDUCTIONS[2]
    X = np.asarray(problem.X, dtype=dtype)
    X = jax.device_put(np.ascontiguousarray(X.T if transposed else X), target)
    y = jax.device_put(np.asarray(problem.y, dtype=dtype), target)
    w0 = jax.device_put(np.zeros((problem.d, problem.y.shape[1]), dtype=dtype), target)
    step, inv_n = np.asarray(gd_step(problem), dtype), np.asarray(1.0 / problem.n, dtype)

    def gradient(X, r):
        if transposed:
            return X @ r
        if layout == REDUCTIONS[0]:
            return X.T @ r
        return jnp.sum(X * r, axis=0)[:, None]

    def loop(X, y, w):
        def body(_, carry):
            w, g, _ = carry
            w = w - step * g
            r = (X.T @ w if transposed else X @ w) - y
            return w, (2 * inv_n) * gradient(X, r), jnp.sum(r * r) * inv_n

        r = (X.T @ w if transposed else X @ w) - y
        return jax.lax.fori_loop(0, iterations, body,
                                 (w, (2 * inv_n) * gradient(X, r), jnp.sum(r * r) * inv_n))

    with jax.default_device(target):
        compiled = jax.jit(loop).lower(X, y, w0).compile()
        float(compiled(X, y, w0)[2])
        start = time.perf_counter()
        float(compiled(X, y, w0)[2])
        return (time.perf_counter() - start) / iterations


def probes(problem, name: str, device: str, copy: float, plan) -> list[dict]:
    """Issue 32 item 4's measurements (GD fused, both dtypes): precision, then reduction
    layout, each as a fraction of the copy bandwidth."""
    rows = []
    for dtype in ("float64", "float32"):
        for precision in ("default", "highest"):
            with matmul_precision(None if precision == "default" else precision):
                rows.append(mode_row(problem, name, "fused", dtype, "gd", device, copy,
                                     iterations=plan.bandwidth_iterations,
                                     repeats=plan.bandwidth_repeats, check="precision",
                                     variant=f"matmul precision {precision}"))
            progress(f"[bandwidth] {rows[-1]['backend']} gd {dtype} precision {precision}: "
                     f"{shown(rows[-1], 'fraction_of_copy', ' of copy')}")
        for layout in REDUCTIONS:
            row = {"check": "reduction", "framework": name, "backend": "hand-written fused",
                   "feed": "fused", "variant": layout, "optimizer": "gd", "device": device,
                   "dtype": dtype, "n": problem.n, "d": problem.d,
                   "copy_gb_per_s": copy / 1e9, "iterations": plan.bandwidth_iterations}
            try:
                timed = [hand_reduction(problem, dtype, device, layout,
                                        plan.bandwidth_iterations)
                         for _ in range(plan.bandwidth_repeats)]
                seconds = median(timed)
                row.update(status="ok", message="", seconds_per_iteration=seconds,
                           fraction_of_copy=fraction(problem, dtype, "gd", seconds, copy),
                           seconds_samples=samples(timed))
            except Exception as exc:  # noqa: BLE001
                row = failed_row(row, exc)
            rows.append(row)
            progress(f"[bandwidth] reduction {layout} {dtype}: "
                     f"{shown(row, 'fraction_of_copy', ' of copy')}")
    return rows
