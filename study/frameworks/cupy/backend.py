"""CuPy backend: NumPy's program on an NVIDIA GPU, feed mode `resident` only (docs/backends.md
says why there is no fused mode).

The very NumPy backend run on CuPy arrays: NumPy hands a CuPy array to CuPy
(`__array_ufunc__`, `__array_function__`), so only what creates arrays or leaves NumPy's
dispatch is ours: placement, the sigmoid and `solve_triangular`. The CUDA modules are reached
through `_cuda()` only, so that the tests run this whole backend on the CPU with NumPy in CuPy's
place (tests/test_cupy.py).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from optimizers.driver import host_loop
from optimizers.result import Stopwatch
from study.frameworks.base import BaseBackend
from study.frameworks.numpy.backend import NumpyBackend


def _cuda() -> SimpleNamespace:
    """CuPy's array module and the few functions outside it (imported in the run's process)."""
    import cupy
    import cupyx.scipy.linalg
    import cupyx.scipy.special

    return SimpleNamespace(xp=cupy, array=cupy.ndarray, expit=cupyx.scipy.special.expit,
                           solve_triangular=cupyx.scipy.linalg.solve_triangular,
                           to_host=cupy.asnumpy,
                           synchronize=lambda: cupy.cuda.Device().synchronize(),
                           count=cupy.cuda.runtime.getDeviceCount,
                           name=lambda: f"cuda:{cupy.cuda.Device().id}",
                           out_of_memory=cupy.cuda.memory.OutOfMemoryError)


def gpu_available() -> bool:
    try:
        return _cuda().count() > 0
    except Exception:  # noqa: BLE001 -- no driver, no device: CuPy raises its own errors
        return False


class CupyOps(NumpyBackend):
    """NumpyBackend's ops on CuPy arrays of one dtype (see the module docstring)."""

    name = "cupy"

    def __init__(self, dtype: str = "float64", formulation: str = "data"):
        super().__init__(dtype, formulation)
        self.cuda = _cuda()
        self.device = "gpu"

    def asarray(self, value):
        return self.cuda.xp.asarray(value, dtype=self.dtype)

    def data_matrix(self, X):
        """X in column-major order, as NumPy's (both products then read columns)."""
        return self.cuda.xp.asfortranarray(self.cuda.xp.asarray(X, dtype=self.dtype))

    def to_host(self, value) -> np.ndarray:
        return self.cuda.to_host(value)

    def sigmoid(self, x):
        return self.cuda.expit(x)

    def eye(self, n, like):
        return self.cuda.xp.eye(n, dtype=like.dtype)

    def zeros(self, shape, like):
        return self.cuda.xp.zeros(shape, dtype=like.dtype)

    def solve_triangular(self, a, b, lower: bool):
        """a^-1 b for triangular a; a zero on the diagonal gives NaN (diverged), as NumPy's."""
        return self.cuda.solve_triangular(a, b, lower=lower, check_finite=False)

    def stats(self, state):
        """Loss and gradient norm as one float64 array: the one read of an iteration."""
        xp = self.cuda.xp
        return xp.stack([state.f, xp.sqrt(self.vdot(state.g, state.g))]).astype(xp.float64)


class CupyBackend(BaseBackend):
    """Runs an optimizer on CuPy: `minimize(problem, optimizer, rules, w0) -> Outcome`."""

    name = "cupy"

    def make_ops(self) -> CupyOps:
        return CupyOps(self.dtype.name, self.formulation)

    def gpu_available(self) -> bool:
        return gpu_available()

    def run(self, problem, optimizer, rules, w0):
        ops = self.ops
        setup_clock = Stopwatch()
        _, params, start, objective = self.prepare(problem, optimizer, w0)
        ops.cuda.synchronize()  # the copies are setup, not the first iteration
        setup_seconds = setup_clock.elapsed()

        def observe(state):
            return ops.to_host(ops.stats(state)).tolist()  # (f, grad_norm): the sync

        state, *loop = host_loop(
            problem, rules,
            init=lambda: optimizer.init(objective, ops, params, start),
            step=lambda state: optimizer.update(objective, ops, params, state),
            observe=observe)
        if not isinstance(state.w, ops.cuda.array):
            raise RuntimeError(f"asked for the GPU but the result is a {type(state.w).__name__}")
        host = type(state)(*(ops.to_host(v) if isinstance(v, ops.cuda.array) else v
                             for v in state))
        return self.outcome(host.w, loop, setup_seconds, "GPU:0",
                            device_name=ops.cuda.name(), trace_clock="host"), host
