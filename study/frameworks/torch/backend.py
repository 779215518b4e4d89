"""PyTorch backend: the same algorithm code on torch tensors, on a CPU or GPU, fed `feed`,
`resident`, `compiled` or `graphed` (docs/backends.md and docs/gpu.md say what each means).

`graphed` (GPU only) replays chunks of 1, 2, 4, ... GRAPH_CHUNK iterations, each captured once
as a CUDA graph; every iteration writes its stats and iterate into fixed device buffers, read
once per chunk, the rules checked on the host row by row. A replay cannot stop early
(`graphed_overrun` counts the unused iterations), and only straight-line steps can be captured
(`graph_refusal`).

Python numbers become tensors once per run (`TorchOps.constant`): on a GPU each conversion is a
copy that waits for the device. The softplus is `logaddexp`, not `F.softplus`, which switches to
x above 20 and is off by 2e-9 there.
"""

from __future__ import annotations

import numpy as np

from convergence_study.errors import InputError
from optimizers.driver import RuleMonitor, host_loop, step_functions
from optimizers.result import Stopwatch, interpolated_seconds
from optimizers.stopping import MaxIter
from study.frameworks.base import BaseBackend, TransposedOps

GRAPH_CHUNK = 64  # the longest chunk captured as one CUDA graph (then 32, 16, ... 1)
WARM_UP_STEPS = 3  # eager steps on a side stream before capture, as torch.cuda.graphs asks


class DataDependentBranch(Exception):
    """A step asked `ops.cond` or `ops.while_loop` to branch while a CUDA graph was being
    warmed up or captured: a replay could not take the branch."""


def _torch():
    import torch

    return torch


def gpu_available() -> bool:
    return bool(_torch().cuda.is_available())


class TorchOps(TransposedOps):
    """The array operations of NumpyBackend, on torch tensors of one dtype on one device."""

    name = "torch"

    def __init__(self, dtype: str = "float64", device: str = "cpu"):
        torch = _torch()
        self.torch = self.xp = torch
        self.dtype = np.dtype(dtype)
        self.torch_dtype = getattr(torch, self.dtype.name)
        self.device = torch.device("cuda" if device == "gpu" else "cpu")
        self.tiny = float(np.finfo(self.dtype).tiny)
        self.straight_line = False  # True while a CUDA graph is warmed up or captured
        self._constants = {}
        # torch's own functions under the names the algorithms use
        for name in ("zeros_like", "sigmoid", "reshape"):
            setattr(self, name, getattr(torch, name))
        for name in ("sqrt", "abs", "isfinite", "logical_and", "logical_or", "logical_not",
                     "where", "maximum", "minimum"):
            setattr(self, name, self._on_tensors(getattr(torch, name)))

    def constant(self, value, dtype, device):
        """A number as a tensor; a Python int or float is made once per run and reused (tensors
        are never updated in place here): on a GPU each `as_tensor` is a host-to-device copy that
        waits for the device, and a CUDA graph cannot capture one. Not kept while torch.compile
        traces (the cache would hold a traced tensor)."""
        torch = self.torch
        if type(value) not in (int, float) or torch.compiler.is_compiling():
            return torch.as_tensor(value, dtype=dtype, device=device)
        key = (repr(value), dtype, device)
        found = self._constants.get(key)
        if found is None:
            found = self._constants[key] = torch.as_tensor(value, dtype=dtype, device=device)
        return found

    def _tensor(self, value, like=None):
        """A Python or NumPy number as a tensor (of `like`'s dtype and device, else ours)."""
        if isinstance(value, self.torch.Tensor):
            return value
        dtype = like.dtype if like is not None and like.is_floating_point() else self.torch_dtype
        device = like.device if like is not None else self.device
        return self.constant(value, dtype, device)

    def asarray(self, value):
        if isinstance(value, self.torch.Tensor):
            return value.to(dtype=self.torch_dtype, device=self.device)
        array = np.asarray(value, dtype=self.dtype)
        if not array.flags.writeable:  # torch warns on read-only memory it would share
            array = array.copy()
        return self.torch.as_tensor(array, device=self.device)

    def scalar(self, value):
        return self.constant(value, self.torch_dtype, self.device)

    def data_matrix(self, X):
        """X transposed (d x n, contiguous; X w costs about the same either way)."""
        return self.asarray(np.ascontiguousarray(np.asarray(X).T))

    def to_host(self, value) -> np.ndarray:
        if isinstance(value, self.torch.Tensor):
            return value.detach().cpu().numpy()
        return np.asarray(value)

    def _on_tensors(self, function):
        """torch's `function` with any Python number among its arguments made a tensor like
        its first floating-point tensor argument (else of our dtype)."""
        tensor = self.torch.Tensor

        def on_tensors(*args):
            like = next((a for a in args if isinstance(a, tensor) and a.is_floating_point()),
                        None)
            return function(*[self._tensor(a, like) for a in args])

        return on_tensors

    def softplus(self, x):
        """log(1 + exp(x)) without overflow for any x, exactly as NumPy's logaddexp(0, x)."""
        return self.torch.logaddexp(self.torch.zeros_like(x), x)

    def while_loop(self, condition, body, loop_vars: tuple) -> tuple:
        if self.straight_line:
            raise DataDependentBranch("while_loop")
        while bool(condition(*loop_vars)):
            loop_vars = tuple(body(*loop_vars))
        return loop_vars

    def cond(self, predicate, true_fn, false_fn):
        if self.straight_line:
            raise DataDependentBranch("cond")
        return true_fn() if bool(predicate) else false_fn()

    def eye(self, n, like):
        return self.torch.eye(n, dtype=like.dtype, device=like.device)

    def solve_triangular(self, a, b, lower: bool):
        return self.torch.linalg.solve_triangular(a, b, upper=not lower)

    def sum(self, x, axis=None):
        return self.torch.sum(x) if axis is None else self.torch.sum(x, dim=axis)

    def diag_part(self, a):
        return self.torch.diagonal(a).clone()

    def zeros(self, shape, like):
        return self.torch.zeros(shape, dtype=like.dtype, device=like.device)


def quiet_compiler() -> None:
    """Keep TorchDynamo's graph-break and recompilation warnings (a dozen lines per line
    search) off the terminal; `--verbose` (TORCH_LOGS) still shows them."""
    import logging
    import os

    if not os.environ.get("TORCH_LOGS"):
        for name in ("torch._dynamo", "torch._inductor"):
            logging.getLogger(name).setLevel(logging.ERROR)


def host_numbers(params, torch):
    """The optimizer's constants with each 0-d float64 CPU tensor a Python float: TorchDynamo
    guards such a tensor argument with `.item()` at every call of a compiled step (a host read
    per iteration more than the stats'), and a float is the same double in every product. For
    the project's own optimizers only: your own may carry a constant into its state, where a
    float whose value changes would make TorchDynamo compile again."""

    def number(value):
        if (isinstance(value, torch.Tensor) and value.ndim == 0 and not value.is_cuda
                and value.dtype == torch.float64):
            return float(value)
        return value

    if type(params) is tuple:
        return tuple(map(number, params))
    if isinstance(params, tuple):  # a NamedTuple (an optimizer's Params)
        return type(params)(*map(number, params))
    return params  # another container (your own optimizer's): as it is


def _to_cpu(value):
    """A state (NamedTuple of tensors) with every tensor on the CPU, for host bookkeeping."""
    torch = _torch()
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, tuple):
        return type(value)(*(_to_cpu(v) for v in value)) if hasattr(value, "_fields") \
            else tuple(_to_cpu(v) for v in value)
    return value


def graph_refusal(optimizer) -> str | None:
    """Why feed 'graphed' cannot capture this optimizer's step, or None: a replay runs the
    captured kernels and nothing else, so no Python branch on the data and no Python-side
    state (a library optimizer's evaluation count) can be in it."""
    why = optimizer.branches()
    if why is None:
        return None
    return (f"feed 'graphed' cannot capture {optimizer.name} as a CUDA graph: {why}; use feed "
            f"'resident' or 'compiled'")


def _warm_up(init, step, data, params, start):
    """A few eager steps on a side stream before capture, as the CUDA graph docs ask (kernels
    chosen, workspaces and the run's constants made); the state they reach."""
    torch = _torch()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        state, _ = init(data, params, start)
        for _ in range(WARM_UP_STEPS):
            state, _ = step(data, params, state)
    torch.cuda.current_stream().wait_stream(side)
    return state


def _capture(chunk, sizes) -> dict:
    """`chunk(size)` captured once per size as a CUDA graph; size -> the graph's replay. The
    graphs share one memory pool: nothing allocated in a capture outlives it (the state, stats
    and iterates live in tensors made before), so no replay reads another's memory."""
    torch = _torch()
    pool, replays = torch.cuda.graph_pool_handle(), {}
    for size in sizes:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=pool):
            chunk(size)
        replays[size] = graph.replay
    torch.cuda.synchronize()
    return replays


class TorchBackend(BaseBackend):
    """Runs an optimizer on PyTorch: `minimize(problem, optimizer, rules, w0) -> Outcome`."""

    name = "torch"
    gpu_available = staticmethod(gpu_available)

    def make_ops(self) -> TorchOps:
        return TorchOps(self.dtype.name, self.device)

    def synchronize(self) -> None:
        if self.device == "gpu":
            _torch().cuda.synchronize()

    @staticmethod
    def _stats(state):
        """Loss and gradient norm as one float64 tensor: what the run reads to the host."""
        torch = _torch()
        stats = torch.stack([state.f, torch.linalg.vector_norm(state.g)])
        # `.to` costs 2 us a call even when it has nothing to do
        return stats if stats.dtype == torch.float64 else stats.to(torch.float64)

    def run(self, problem, optimizer, rules, w0):
        refusal = graph_refusal(optimizer) if self.feed == "graphed" else None
        if refusal is not None:
            raise InputError(refusal)
        torch = _torch()
        ops = self.ops
        setup_clock = Stopwatch()
        data, params, start, _ = self.prepare(problem, optimizer, w0)
        if self.feed == "compiled" and type(optimizer).__module__.startswith("optimizers."):
            params = host_numbers(params, torch)  # no guard's read per call
        # each returns (state, stats): the statistics are computed with the step (compiled
        # with it in `compiled`, captured with it in `graphed`); an eager step makes none (the
        # host loop's `observe` makes them where the rules check in full)
        eager = self.feed in ("feed", "resident")
        init, step = step_functions(ops, optimizer, self.formulation, problem.objective,
                                    (lambda state: None) if eager else self._stats, eager=eager)
        with torch.no_grad():
            run = self._graphed if self.feed == "graphed" else self._stepped
            state, w, w_host, loop, setup_seconds, extra = run(
                problem, optimizer.name, rules, init, step, data, params, start, setup_clock)
        device = ("GPU:" if w.is_cuda else "CPU:") + str(w.device.index or 0)
        outcome = self.outcome(w_host, loop, setup_seconds, device, device_name=str(w.device),
                               **extra, intra_op_threads=torch.get_num_threads())
        return outcome, _to_cpu(state)

    def _stepped(self, problem, name, rules, init, step, data, params, start, setup_clock):
        """feed, resident, compiled: a step called from the host loop, one read an iteration."""
        torch = _torch()
        ops = self.ops
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
            warm = init(fetch(), params, start)  # grad mode (off) is part of the guard
            for _ in range(2):  # compiled on the first call; the second checks the guard
                warm = step(fetch(), params, warm[0])
            self.synchronize()
        setup_seconds = setup_clock.elapsed()

        def observe(result):  # (f, grad_norm): the one host read (on a GPU, the sync)
            stats = result[1] if self.feed == "compiled" else self._stats(result[0])
            return stats.tolist()

        def glance(result):
            """An eager step off the trace's schedule: the loss alone, its gradient norm read
            only if the loss leaves the quiet region (a norm and a stack less: 10 us at 1k)."""
            state = result[0]
            return float(state.f), lambda: float(torch.linalg.vector_norm(state.g))

        result, *loop = host_loop(
            problem, rules,
            init=lambda: init(fetch(), params, start),
            step=lambda result: step(fetch(), params, result[0]),
            observe=observe, glance=None if self.feed == "compiled" else glance,
        )
        state = result[0]
        return state, state.w, ops.to_host(state.w), loop, setup_seconds, {"trace_clock": "host"}

    def _graphed(self, problem, name, rules, init, step, data, params, start, setup_clock):
        """Chunks of 1, 2, ... GRAPH_CHUNK steps captured as CUDA graphs and replayed (see the
        module docstring). Each replay starts from and ends in the same static state tensors,
        so replays chain; step j of a chunk writes its stats and iterate to row j of two
        buffers. The host reads a chunk's stats once and checks the rules row by row (the same
        rule objects, on the host, as resident); the iterate of the row that fired is the
        result. Chunks grow by doubling from 1, and never run past max_iter."""
        torch = _torch()
        ops = self.ops
        ops.straight_line = True  # a branch on data raises instead of syncing
        try:
            state = _warm_up(init, step, data, params, start)
            if not all(isinstance(field, torch.Tensor) for field in state):
                raise InputError("feed 'graphed' needs an optimizer state of tensors only")
            static = type(state)(*(field.clone() for field in state))
            stats_rows = torch.zeros((GRAPH_CHUNK, 2), dtype=torch.float64, device=start.device)
            w_rows = torch.zeros((GRAPH_CHUNK, *start.shape), dtype=start.dtype,
                                 device=start.device)

            def chunk(size: int) -> None:
                """`size` steps from the static state back into it, each step's stats and
                iterate into its row of the buffers."""
                current = static
                for j in range(size):
                    current, stats = step(data, params, current)
                    stats_rows[j].copy_(stats)
                    w_rows[j].copy_(current.w)
                for target, value in zip(static, current, strict=True):
                    target.copy_(value)

            replays = _capture(chunk, [2**k for k in range(GRAPH_CHUNK.bit_length())])
        except DataDependentBranch as branch:
            raise InputError(f"feed 'graphed' cannot capture {name} as a CUDA graph: its "
                             f"step branches on data (ops.{branch})") from None
        finally:
            ops.straight_line = False
        max_iter = next((rule.max_iter for rule in rules.rules if isinstance(rule, MaxIter)),
                        None)
        setup_seconds = setup_clock.elapsed()

        monitor = RuleMonitor(problem, rules)  # the clock starts
        first_state, first_stats = init(data, params, start)
        for target, value in zip(static, first_state, strict=True):
            target.copy_(value)
        w, size, chunks, overrun = static.w, 1, [], 0
        fired = monitor.check(*first_stats.tolist())  # one read: iteration 0
        while not fired:
            room = GRAPH_CHUNK if max_iter is None else max_iter - monitor.iteration
            run = 1 << (min(size, room).bit_length() - 1)  # the largest power of two in it
            first, began = monitor.iteration, monitor.clock.elapsed()
            replays[run]()
            rows = stats_rows[:run].tolist()  # one read per chunk (the sync)
            ended = monitor.clock.elapsed()
            used = 0  # rows checked: the last one's iterate is the run's
            for f, grad_norm in rows:
                used, monitor.iteration = used + 1, monitor.iteration + 1
                fired = monitor.check(f, grad_norm)
                if fired:
                    break
            w, overrun = w_rows[used - 1], overrun + run - used
            chunks.append((first, first + run, began, ended))
            size = min(2 * size, GRAPH_CHUNK)
        w_host = w.cpu().numpy()  # the clock stops once the result is on the host
        seconds = monitor.finish()
        trace = monitor.trace
        trace["seconds"] = interpolated_seconds(trace["iteration"], chunks)
        extra = {"trace_clock": "interpolated within graph replays",
                 "graphed_chunks": len(chunks), "graphed_overrun": overrun}
        loop = (monitor.iteration, seconds, monitor.ending(), trace)
        return static, w, w_host, loop, setup_seconds, extra
