"""What every regression backend does the same way, written once; a framework's backend
overrides what differs: its ops (`make_ops`), its GPU probe (`gpu_available`) and its loop
(`run`). A run asked of a backend that cannot make it (a GPU absent, an optimizer's library
missing) is a `skipped` Outcome, never a run on the CPU under a GPU label.
"""

from __future__ import annotations

import numpy as np

from optimizers.objective import make_objective, problem_data
from optimizers.result import TRACE_COLUMNS, Outcome, apply_state_record
from optimizers.stopping import Ending
from study.frameworks import registry

# the options every backend keeps as fields of its own; the others are its options() columns
COMMON = ("dtype", "formulation", "device")
TRACE_CAPACITY = 1024  # a fused loop's trace rows: > the ~745 the schedule keeps below 2**31
CAP = 2**31 - 1  # a fused loop's own iteration limit


def trace_iterations() -> list[int]:
    """The iterations `optimizers.result.on_trace_schedule` keeps up to CAP, in order, then one
    past CAP (never reached): a fused loop's row k is due at the k-th, so an iteration costs a
    lookup and a compare, where the schedule's own test by decade cost ~10 graph ops."""
    kept, power = list(range(100)), 2
    while 10**power <= CAP:
        kept += range(10**power, min(10 ** (power + 1), CAP + 1), 10 ** (power - 1))
        power += 1
    return [*kept, CAP + 1]


class BaseBackend:
    """A backend named `name` in the registry: its options checked against that declaration
    (a missing one takes the declared default) and kept as attributes of the same names."""

    name = ""

    def __init__(self, dtype: str = "float64", formulation: str = "data", **options):
        declared = registry.backend(self.name)
        declared.check({"dtype": dtype, "formulation": formulation, **options})
        self.dtype = np.dtype(dtype)
        self.formulation = formulation
        self.device = options.get("device", declared.default("device") or "cpu")
        self._options = {key: options.get(key, declared.default(key))
                         for key in declared.options if key not in COMMON}
        for key, value in self._options.items():
            setattr(self, key, value)
        self._ops = None

    @property
    def ops(self):
        """The array operations, made on first use (a framework's import and device probe wait
        for the run's own process)."""
        if self._ops is None:
            self._ops = self.make_ops()
        return self._ops

    def make_ops(self):
        return self

    def options(self) -> dict:
        """The backend's own options as the row records them (feed, xla, ...)."""
        return dict(self._options)

    def gpu_available(self) -> bool:
        return False

    def unavailable(self) -> str | None:
        """Why this backend cannot run here (a GPU asked for but none visible), or None."""
        if self.device == "gpu" and not self.gpu_available():
            return registry.framework_of(self.name).no_gpu()
        return None

    def minimize(self, problem, optimizer, rules, w0) -> Outcome:
        """The run on this backend: refused for an optimizer of another backend, skipped where
        it cannot be made here, else the framework's loop (`run`), its optimizer's own counts
        read from the final state, and its result checked to lie on the device asked for."""
        optimizer.refuse_backend(self.name)
        reason = self.unavailable() or optimizer.unavailable()
        if reason is not None:  # recorded, never run on the CPU under a GPU label
            return Outcome(np.asarray(w0, dtype=self.dtype), 0, 0.0, 0.0, "skipped", reason,
                           device=self.device, extra={**self.options(), "device_name": ""})
        outcome, state = self.run(problem, optimizer, rules, w0)
        if state is not None:
            outcome = apply_state_record(outcome, optimizer, state)
        if self.device == "gpu" and not outcome.device.upper().startswith(("GPU", "CUDA")):
            raise RuntimeError(f"asked for the GPU but the result lies on {outcome.device}")
        return outcome

    def prepare(self, problem, optimizer, w0):
        """The data in this backend's layout, the optimizer's constants, the start point and the
        objective: the setup every loop times apart from its iterations."""
        ops = self.ops
        data = problem_data(ops, problem, self.formulation)
        objective = make_objective(ops, data, self.formulation, problem.objective)
        return data, optimizer.setup(problem, objective, ops), ops.asarray(w0), objective

    def outcome(self, w, loop: tuple, setup_seconds: float, device: str, **extra) -> Outcome:
        """The Outcome of a loop's (iterations, seconds, ending, trace), `w` on the host, its
        extra columns after the backend's options."""
        iterations, seconds, ending, trace = loop
        return Outcome(w, iterations, seconds, setup_seconds, ending.status, ending.message,
                       trace, rule=ending.rule, device=device,
                       extra={**self.options(), **extra})

    def run(self, problem, optimizer, rules, w0) -> tuple[Outcome, object]:
        """The framework's loop: (outcome, final state on the host, or None when the optimizer
        has no state to read counts from)."""
        raise NotImplementedError(f"backend '{self.name}' has no loop")


class TransposedOps:
    """The ops written once for an array library with NumPy's names (`xp`: jax.numpy, torch),
    X stored transposed (d x n): with d << n, X^T r then runs as a row-major product (PyTorch,
    1e5 x 5, one thread: 0.14 ms against 0.62 on X as given), and XLA streams it fastest."""

    def data_matvec(self, X, w):
        return X.T @ w

    def data_rmatvec(self, X, r):
        return X @ r

    def data_column_squares(self, X):
        return self.xp.sum(X * X, 1)

    def data_gram(self, X):
        return X @ X.T

    def matmul(self, a, b):
        return a @ b

    def matmul_t(self, a, b):
        """a^T @ b (the transpose folded into the product)."""
        return a.T @ b

    def transpose(self, x):
        return x.T

    def strict_upper(self, a):
        return self.xp.triu(a, 1)

    def vdot(self, a, b):
        return self.xp.sum(a * b)

    def push(self, history, item):
        """Drop the oldest entry of a fixed-size history (axis 0) and append `item` last."""
        return self.xp.concatenate([history[1:], item[None]], 0)


def fused_ending(rules, index: int, iterations: int) -> Ending:
    """How a fused loop ended: the rule at `index`, or (-1) its own iteration limit."""
    if index >= 0:
        return rules.ending(index, iterations)
    return Ending("max_iter", f"the loop's own limit of {CAP} iterations")


def fused_trace(table: np.ndarray) -> dict:
    """A fused loop's trace buffer (rows of TRACE_COLUMNS) as the host loop's trace."""
    trace = {c: table[:, j].tolist() for j, c in enumerate(TRACE_COLUMNS)}
    trace["iteration"] = [int(v) for v in trace["iteration"]]
    return trace
