"""Section `bandwidth`: each mode's fraction of the device's copy bandwidth (issue 32, items 1
and 4), and the measurements that would show why float32 is slower than float64 on JAX.

The denominator is a device-to-device copy of an array of X's size (the largest n of the plan,
float64): y = x * s reads and writes it once, so its bandwidth is 2 * bytes / seconds, measured
once per framework in that framework (NumPy's for the NumPy engine). The numerator is the bytes
of X an iteration must read (X's size times the passes the algorithm makes, `PASSES`) over our
harness's seconds per iteration, for GD and L-BFGS, every installed engine on the device.

The float32 probes (JAX, GD): our fused loop in both dtypes with JAX's default matmul precision
and with 'highest', and a hand-written fused loop whose gradient reduction is laid out three
ways (X as given: X.T @ r and an explicit jnp.sum(X * r, axis=0); X stored transposed as our
backend does: Xt @ r), each as the same fraction. Slow float32 under 'default' but not 'highest'
would name the precision setting; a layout far from the others, the reduction.
"""

from __future__ import annotations

import time
from contextlib import contextmanager

import numpy as np
import pandas as pd

from study.bench.plan import PASSES, Plan
from study.bench.runs import Unavailable, failed_row, progress, shown
from study.bench.sections.harness import engine_label, engines, ours
from study.bench.sections.overhead import gd_step
from study.bench.timing import median, ratio, samples

COPY_REPEATS = 5


def copy_seconds(framework: str, shape: tuple, device: str) -> list[float]:
    """Timings of y = x * s over a float64 array of `shape` on the device, in `framework`
    ('numpy': the host), each synchronised; the first call (compilation) is not kept."""
    if framework == "numpy":
        x, out = np.ones(shape), np.empty(shape)

        def call():
            np.multiply(x, 1.0, out=out)
    elif framework == "jax":
        import jax

        jax.config.update("jax_enable_x64", True)
        x = jax.device_put(np.ones(shape), jax.devices(device)[0])
        scaled = jax.jit(lambda x, s: x * s)

        def call():
            scaled(x, 1.0).block_until_ready()
    elif framework == "torch":
        import torch

        target = torch.device("cuda" if device == "gpu" else "cpu")
        x = torch.ones(shape, dtype=torch.float64, device=target)
        out = torch.empty_like(x)

        def call():
            torch.mul(x, 1.0, out=out)
            if target.type == "cuda":
                torch.cuda.synchronize()
    elif framework == "tensorflow":
        import tensorflow as tf

        with tf.device("/GPU:0" if device == "gpu" else "/CPU:0"):
            x = tf.ones(shape, tf.float64)
            scaled = tf.function(lambda x, s: (x * s)[-1])  # the fetch waits for the product

            def call():
                scaled(x, tf.constant(1.0, tf.float64)).numpy()
    else:
        raise Unavailable(f"no copy measurement for {framework}")
    call()
    times = []
    for _ in range(COPY_REPEATS):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return times


def fraction(problem, dtype: str, optimizer: str, seconds: float, copy: float) -> float:
    """Bytes of X the iteration must read per second, over the copy's bytes per second."""
    x_bytes = problem.n * problem.d * np.dtype(dtype).itemsize
    return ratio(x_bytes * PASSES[optimizer] / seconds, copy)


def mode_row(problem, name: str, feed: str, dtype: str, optimizer: str, device: str, copy: float,
             *, iterations: int, repeats: int, check: str = "mode", variant: str = "") -> dict:
    row = {"check": check, "framework": name, "backend": engine_label(name, feed), "feed": feed,
           "variant": variant, "optimizer": optimizer, "device": device, "dtype": dtype,
           "n": problem.n, "d": problem.d, "copy_gb_per_s": copy / 1e9}
    try:
        timed = [ours(problem, name, feed, dtype, device, optimizer, iterations)
                 for _ in range(repeats)]
    except Exception as exc:  # noqa: BLE001 -- recorded on the row; the bench goes on
        return failed_row(row, exc)
    seconds = median([r.seconds_per_iteration for r in timed])
    return {**row, "status": "ok", "message": "", "iterations": timed[-1].iterations,
            "seconds_per_iteration": seconds,
            "fraction_of_copy": fraction(problem, dtype, optimizer, seconds, copy),
            "seconds_samples": samples([r.seconds_per_iteration for r in timed])}


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
    as `layout` says (REDUCTIONS), compiled off the clock, read once."""
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    target = jax.devices(device)[0]
    transposed = layout == REDUCTIONS[2]
    X = np.asarray(problem.X, dtype=dtype)
    X = jax.device_put(np.ascontiguousarray(X.T if transposed else X), target)
    y = jax.device_put(np.asarray(problem.y, dtype=dtype), target)
    w0 = jax.device_put(np.zeros((problem.d, problem.y.shape[1]), dtype=dtype), target)
    step, inv_n = np.asarray(gd_step(problem), dtype), np.asarray(1.0 / problem.n, dtype)

    def gradient(r):
        if transposed:
            return X @ r
        if layout == REDUCTIONS[0]:
            return X.T @ r
        return jnp.sum(X * r, axis=0)[:, None]

    def loop(w):
        def body(_, carry):
            w, g, _ = carry
            w = w - step * g
            r = (X.T @ w if transposed else X @ w) - y
            return w, (2 * inv_n) * gradient(r), jnp.sum(r * r) * inv_n

        r = (X.T @ w if transposed else X @ w) - y
        return jax.lax.fori_loop(0, iterations, body,
                                 (w, (2 * inv_n) * gradient(r), jnp.sum(r * r) * inv_n))

    with jax.default_device(target):
        compiled = jax.jit(loop).lower(w0).compile()
        float(compiled(w0)[2])
        start = time.perf_counter()
        float(compiled(w0)[2])
        return (time.perf_counter() - start) / iterations


def probe_rows(problem, device: str, copy: float, plan: Plan) -> list[dict]:
    """Item 4's measurements (JAX, GD fused, both dtypes): precision, then reduction layout."""
    rows = []
    for dtype in ("float64", "float32"):
        for precision in ("default", "highest"):
            with matmul_precision(None if precision == "default" else precision):
                rows.append(mode_row(problem, "jax", "fused", dtype, "gd", device, copy,
                                     iterations=plan.bandwidth_iterations,
                                     repeats=plan.bandwidth_repeats, check="precision",
                                     variant=f"matmul precision {precision}"))
            progress(f"[bandwidth] jax-fused gd {dtype} precision {precision}: "
                     f"{shown(rows[-1], 'fraction_of_copy', ' of copy')}")
        for layout in REDUCTIONS:
            row = {"check": "reduction", "framework": "jax", "backend": "hand-written fused",
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


def bench_bandwidth(plan: Plan, device: str = "cpu") -> pd.DataFrame:
    from datasets import make_problem
    from optimizers.backends.registry import BACKENDS

    found = engines(device, plan.bandwidth_backends)
    shape = (max(plan.bandwidth_rows + (plan.probe_rows,)), 5)  # eve has d = 5
    copies = {}
    for framework in dict.fromkeys((BACKENDS[name].framework or "numpy") for name, _ in found):
        try:
            copies[framework] = 2 * shape[0] * shape[1] * 8 / median(
                copy_seconds(framework, shape, device))
        except Exception as exc:  # noqa: BLE001 -- its rows say why
            progress(f"[bandwidth] copy in {framework}: {exc}")
            copies[framework] = float("nan")
    rows = []
    for n in plan.bandwidth_rows:
        problem = make_problem("eve", rows=n)
        problem.reference  # noqa: B018 -- f* before any clock
        for optimizer in ("gd", "lbfgs"):
            for dtype in plan.bandwidth_dtypes:
                for name, feed in found:
                    rows.append(mode_row(
                        problem, name, feed, dtype, optimizer, device,
                        copies[BACKENDS[name].framework or "numpy"],
                        iterations=plan.bandwidth_iterations, repeats=plan.bandwidth_repeats))
                    progress(f"[bandwidth] {rows[-1]['backend']} {optimizer} {dtype} n={n}: "
                             f"{shown(rows[-1], 'fraction_of_copy', ' of copy')}")
    if "jax" in copies:
        problem = make_problem("eve", rows=plan.probe_rows)
        problem.reference  # noqa: B018
        rows += probe_rows(problem, device, copies["jax"], plan)
    return pd.DataFrame(rows)
