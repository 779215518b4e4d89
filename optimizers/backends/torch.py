"""PyTorch backend: the same algorithm code on torch tensors, on a CPU or GPU, fed in one of three
ways.

Feed modes (`feed=`):
  feed      the data stays on the host (NumPy) and every step starts with
            `torch.from_numpy(x).to(device)`, as training code that converts its batch each
            step does: a host-to-device copy on a GPU; on the CPU `from_numpy` shares the
            array's memory, so the conversion is all it costs (a finding, not a shortcut);
  resident  tensors on the device once; an eager step called from the host loop
            (`optimizers.driver.host_loop`), which reads the loss and gradient norm every
            iteration;
  compiled  the step under `torch.compile` (default mode), called from the host loop; its
            compilation is done by warm-up calls and timed as setup. The data-dependent
            branches of the line searches (`ops.cond`, `ops.while_loop`) break the graph there,
            as they would in any user's compiled step.
There is no fused mode: `torch.compile` compiles straight-line code, and the loop primitives
that would hold a whole run (`torch._higher_order_ops.while_loop`) are private and
experimental in PyTorch 2.x, so a whole-loop mode would measure an unstable API, not PyTorch.

On a GPU every clock read follows `torch.cuda.synchronize()` (a host read of the stats does it
in the loop). The intra-op thread count is PyTorch's (one per core by default) and is recorded.
Which ops are ours: the data-layout products, the stable softplus (`logaddexp`, not
`F.softplus`, which switches to x above 20 and is off by 2e-9 there), `solve_triangular`,
`while_loop`/`cond` (plain Python: eager), `push` and placement; the rest are torch's
array-API-like functions, with Python scalars made tensors where torch requires one.
"""

from __future__ import annotations

import numpy as np

from optimizers.backends.registry import BACKENDS
from optimizers.objective import make_objective, problem_data
from optimizers.result import Outcome, Stopwatch, apply_state_record

NO_GPU = "no GPU visible to PyTorch"


def _torch():
    import torch

    return torch


def gpu_available() -> bool:
    return bool(_torch().cuda.is_available())


class TorchOps:
    """The array operations of `optimizers.backends.numpy.NumpyBackend`, on torch tensors of one
    dtype on one device. X is stored transposed (`data_matrix`)."""

    name = "torch"

    def __init__(self, dtype: str = "float64", device: str = "cpu"):
        torch = _torch()
        self.torch = torch
        self.dtype = np.dtype(dtype)
        self.torch_dtype = getattr(torch, self.dtype.name)
        self.device = torch.device("cuda" if device == "gpu" else "cpu")
        self.tiny = float(np.finfo(self.dtype).tiny)

    def _tensor(self, value, like=None):
        """A Python or NumPy number as a tensor (of `like`'s dtype and device, else ours)."""
        if isinstance(value, self.torch.Tensor):
            return value
        dtype = like.dtype if like is not None and like.is_floating_point() else self.torch_dtype
        device = like.device if like is not None else self.device
        return self.torch.as_tensor(value, dtype=dtype, device=device)

    def asarray(self, value):
        if isinstance(value, self.torch.Tensor):
            return value.to(dtype=self.torch_dtype, device=self.device)
        array = np.asarray(value, dtype=self.dtype)
        if not array.flags.writeable:  # torch warns on read-only memory it would share
            array = array.copy()
        return self.torch.as_tensor(array, device=self.device)

    def scalar(self, value):
        return self.torch.as_tensor(value, dtype=self.torch_dtype, device=self.device)

    def data_matrix(self, X):
        """X transposed (d x n, contiguous): with d << n, X^T r then runs as a row-major GEMV
        (measured on 1e5 x 5, one thread: 0.14 ms against 0.62 for X.T @ r on X as given) and
        X w costs about the same either way (0.44 against 0.74 ms)."""
        return self.asarray(np.ascontiguousarray(np.asarray(X).T))

    def data_matvec(self, X, w):
        return X.T @ w

    def data_rmatvec(self, X, r):
        return X @ r

    def data_column_squares(self, X):
        return self.torch.sum(X * X, dim=1)

    def data_gram(self, X):
        return X @ X.T

    def to_host(self, value) -> np.ndarray:
        if isinstance(value, self.torch.Tensor):
            return value.detach().cpu().numpy()
        return np.asarray(value)

    def matmul(self, a, b):
        return a @ b

    def matmul_t(self, a, b):
        return a.T @ b

    def sqrt(self, x):
        return self.torch.sqrt(self._tensor(x))

    def abs(self, x):
        return self.torch.abs(self._tensor(x))

    def where(self, condition, x, y):
        like = x if isinstance(x, self.torch.Tensor) else y if isinstance(
            y, self.torch.Tensor) else None
        return self.torch.where(condition, self._tensor(x, like), self._tensor(y, like))

    def isfinite(self, x):
        return self.torch.isfinite(self._tensor(x))

    def maximum(self, a, b):
        like = a if isinstance(a, self.torch.Tensor) else b
        return self.torch.maximum(self._tensor(a, like), self._tensor(b, like))

    def minimum(self, a, b):
        like = a if isinstance(a, self.torch.Tensor) else b
        return self.torch.minimum(self._tensor(a, like), self._tensor(b, like))

    def zeros_like(self, x):
        return self.torch.zeros_like(x)

    def logical_and(self, a, b):
        return self.torch.logical_and(self._tensor(a), self._tensor(b))

    def logical_or(self, a, b):
        return self.torch.logical_or(self._tensor(a), self._tensor(b))

    def logical_not(self, a):
        return self.torch.logical_not(self._tensor(a))

    def sigmoid(self, x):
        return self.torch.sigmoid(x)

    def softplus(self, x):
        """log(1 + exp(x)) without overflow for any x, exactly as NumPy's logaddexp(0, x)."""
        return self.torch.logaddexp(self.torch.zeros_like(x), x)

    @staticmethod
    def while_loop(condition, body, loop_vars: tuple) -> tuple:
        while bool(condition(*loop_vars)):
            loop_vars = tuple(body(*loop_vars))
        return loop_vars

    @staticmethod
    def cond(predicate, true_fn, false_fn):
        return true_fn() if bool(predicate) else false_fn()

    def reshape(self, x, shape):
        return self.torch.reshape(x, shape)

    @staticmethod
    def transpose(x):
        return x.T

    def strict_upper(self, a):
        return self.torch.triu(a, 1)

    def eye(self, n, like):
        return self.torch.eye(n, dtype=like.dtype, device=like.device)

    def solve_triangular(self, a, b, lower: bool):
        return self.torch.linalg.solve_triangular(a, b, upper=not lower)

    def sum(self, x, axis=None):
        return self.torch.sum(x) if axis is None else self.torch.sum(x, dim=axis)

    def diag_part(self, a):
        return self.torch.diagonal(a).clone()

    def vdot(self, a, b):
        return self.torch.sum(a * b)

    def zeros(self, shape, like):
        return self.torch.zeros(shape, dtype=like.dtype, device=like.device)

    def push(self, history, item):
        """Drop the oldest entry of a fixed-size history (axis 0) and append `item` last."""
        return self.torch.cat([history[1:], item[None]], dim=0)


def quiet_compiler() -> None:
    """Keep TorchDynamo's graph-break and recompilation warnings (a dozen lines per line
    search) off the terminal; `--verbose` (TORCH_LOGS) still shows them."""
    import logging
    import os

    if not os.environ.get("TORCH_LOGS"):
        for name in ("torch._dynamo", "torch._inductor"):
            logging.getLogger(name).setLevel(logging.ERROR)


def _to_cpu(value):
    """A state (NamedTuple of tensors) with every tensor on the CPU, for host bookkeeping."""
    torch = _torch()
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, tuple):
        return type(value)(*(_to_cpu(v) for v in value)) if hasattr(value, "_fields") \
            else tuple(_to_cpu(v) for v in value)
    return value


class TorchBackend:
    """Runs an optimizer on PyTorch: `minimize(problem, optimizer, rules, w0) -> Outcome`."""

    name = "torch"

    def __init__(self, dtype: str = "float64", device: str = "cpu", feed: str = "resident",
                 formulation: str = "data"):
        BACKENDS["torch"].check({"dtype": dtype, "device": device, "feed": feed,
                                  "formulation": formulation})
        self.dtype = np.dtype(dtype)
        self.device = device
        self.feed = feed
        self.formulation = formulation
        self._ops = None

    @property
    def ops(self) -> TorchOps:
        if self._ops is None:
            self._ops = TorchOps(self.dtype.name, self.device)
        return self._ops

    def options(self) -> dict:
        return {"feed": self.feed}

    def unavailable(self) -> str | None:
        if self.device == "gpu" and not gpu_available():
            return NO_GPU
        return None

    def synchronize(self) -> None:
        if self.device == "gpu":
            _torch().cuda.synchronize()

    def minimize(self, problem, optimizer, rules, w0) -> Outcome:
        reason = self.unavailable()
        if reason is None and hasattr(optimizer, "unavailable"):
            reason = optimizer.unavailable()
        if reason is not None:  # recorded, never run on the CPU under a GPU label
            return Outcome(np.asarray(w0, dtype=self.dtype), 0, 0.0, 0.0, "skipped", reason,
                           device=self.device, extra={**self.options(), "device_name": ""})
        from optimizers.driver import host_loop

        torch = _torch()
        ops = self.ops
        setup_clock = Stopwatch()
        data = problem_data(ops, problem, self.formulation)
        params = optimizer.setup(
            problem, make_objective(ops, data, self.formulation, problem.objective), ops)
        start = ops.asarray(w0)
        kind, formulation = problem.objective, self.formulation

        def init(data, params, w0):
            return optimizer.init(make_objective(ops, data, formulation, kind), ops, params, w0)

        def step(data, params, state):
            return optimizer.update(make_objective(ops, data, formulation, kind), ops, params,
                                    state)

        if self.feed == "feed":  # the host keeps the data; each step converts it again
            host = tuple(ops.to_host(array) for array in data)
            device = ops.device

            def fetch():
                return tuple(torch.from_numpy(array).to(device) for array in host)
        else:
            def fetch():
                return data
        if self.feed == "compiled":
            quiet_compiler()
            torch._dynamo.reset()  # a fresh compile, as in a process of its own
            step = torch.compile(step)
            with torch.no_grad():  # as the loop runs: grad mode is part of the guard
                warm = init(fetch(), params, start)
                for _ in range(2):  # compiled on the first call; the second checks the guard
                    warm = step(fetch(), params, warm)
            self.synchronize()
        setup_seconds = setup_clock.elapsed()

        def observe(state):
            stats = torch.stack([state.f.to(torch.float64),
                                 torch.sqrt(ops.vdot(state.g, state.g)).to(torch.float64)])
            f, grad_norm = stats.cpu().numpy()  # the host read is the device sync
            return float(f), float(grad_norm)

        with torch.no_grad():
            state, iterations, seconds, ending, trace = host_loop(
                problem, rules,
                init=lambda: init(fetch(), params, start),
                step=lambda state: step(fetch(), params, state),
                observe=observe,
            )
        w = state.w
        outcome = Outcome(ops.to_host(w), iterations, seconds, setup_seconds, ending.status,
                          ending.message, trace, rule=ending.rule,
                          device=("GPU:" if w.is_cuda else "CPU:") + str(w.device.index or 0),
                          extra={**self.options(), "device_name": str(w.device),
                                 "trace_clock": "host",
                                 "intra_op_threads": torch.get_num_threads()})
        outcome = apply_state_record(outcome, optimizer, _to_cpu(state))
        if self.device == "gpu" and not w.is_cuda:
            raise RuntimeError(f"asked for the GPU but the result lies on {w.device}")
        return outcome
