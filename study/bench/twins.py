"""The bench's hand-written twins: for each backend whose registry entry names a module
(`Backend.twin`), the minimal loops our harness is divided by and the copy its bandwidth is
divided by, written directly in that framework; a missing one is a row saying so.

A twin module provides any of:
  hand_loop(problem, feed, dtype, device, iterations) -> seconds per iteration of GD (1/L), the
      loss read to the host as the feed mode reads it (section `harness`);
  minimal_loop(options, formulation) -> (what, loop(problem, dtype, iterations)) or None
      (section `overhead`);
  copy_call(shape, device) -> a synchronised call computing y = x * s over a float64 array
      (section `bandwidth`'s denominator);
  probes(problem, name, device, copy, plan) -> rows of its own measurements (`bandwidth`).
"""

from __future__ import annotations

import importlib
import time

import numpy as np

from study.bench.runs import Unavailable
from study.frameworks.registry import backend

WHOLE_LOOP = ("fused", "graphed")  # feed modes with the loop on the device: one read per chunk
WHAT = {"hand_loop": "hand-written loop", "minimal_loop": "hand-written loop",
        "copy_call": "copy measurement", "probes": "probes"}


def twin_of(name: str):
    """The twin module the backend's registry entry names (None: it has none)."""

    declared = backend(name)
    return importlib.import_module(declared.twin) if declared.twin else None


def twin(name: str, role: str):
    """The backend's twin function for `role` (see above); none -> Unavailable saying so."""
    found = getattr(twin_of(name), role, None)
    if found is None:
        raise Unavailable(f"no {WHAT[role]} for {name}")
    return found


def no_loop(name: str, feed: str) -> Unavailable:
    return Unavailable(f"no hand-written loop for {name} feed '{feed}' yet")


def gd_step(problem) -> float:
    """GD's 1/L step exactly as `optimizers.gd` computes it (float64)."""
    return 1.0 / problem.curvature_bounds()[1]


def host_arrays(problem, dtype: str):
    """X transposed (d x n, as the JAX and PyTorch backends store it), y, and the GD constants."""
    Xt = np.ascontiguousarray(np.asarray(problem.X, dtype=dtype).T)
    y = np.ascontiguousarray(np.asarray(problem.y, dtype=dtype))
    return Xt, y, gd_step(problem), 1.0 / problem.n


def gd_functions(total, step, inv_n):
    """GD (1/L) on X stored transposed, in the framework whose sum is `total`:
    evaluate(Xt, y, w) -> (f, g) and update(Xt, y, w, g) -> (w, g, f)."""

    def evaluate(Xt, y, w):
        r = Xt.T @ w - y
        return total(r * r) * inv_n, (2 * inv_n) * (Xt @ r)

    def update(Xt, y, w, g):
        w = w - step * g
        f, g = evaluate(Xt, y, w)
        return w, g, f

    return evaluate, update


def timed_steps(first, update, data, w0, iterations: int, read=float) -> float:
    """Seconds per iteration of a loop stepped from the host: `first(*data(), w0)`, then
    `iterations` calls of `update`, the data from `data()` at every call and the loss read to
    the host with `read` after each (the sync)."""
    start = time.perf_counter()
    f, g = first(*data(), w0)
    read(f)
    w = w0
    for _ in range(iterations):
        w, g, f = update(*data(), w, g)
        read(f)
    return (time.perf_counter() - start) / iterations

