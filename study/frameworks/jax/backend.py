"""JAX backend: the same algorithm code under `jax.jit`, on a CPU or GPU, fed `feed`, `resident`
or `fused` (docs/backends.md says what each means; `host_array` why a feed copies on a CPU).

XLA has no clock op, so the fused loop cannot time itself as TensorFlow's does: it runs in
chunks. Each call of the compiled loop runs until a rule fires or an iteration limit, then hands
back one read of a few scalars; the host checks the time budget and a pending signal and calls
again, the limit sized so a chunk takes about CHUNK_SECONDS (a run shorter than FIRST_CHUNK
iterations makes no extra round trip). The trace's seconds within a chunk are interpolated
between the chunk's measured start and end (`trace_clock` says so).

The timed loops read one small array with `.tolist()` (`jax.device_get` walks a pytree first:
about 9 us more per read on a CPU), as tests/test_host_reads.py counts.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from optimizers.driver import host_loop, step_functions
from optimizers.interruptible import call_interruptibly
from optimizers.result import TRACE_COLUMNS, Stopwatch, interpolated_seconds, on_trace_schedule
from optimizers.stopping import Context, TimeBudget, rule_values, rules_on_tensors
from study.frameworks.base import (
    CAP,
    TRACE_CAPACITY,
    BaseBackend,
    TransposedOps,
    fused_ending,
    fused_trace,
    trace_iterations,
)

FIRST_CHUNK = 64  # iterations of the fused loop's first call
CHUNK_SECONDS = 0.1  # what later calls aim for


def _jax():
    """JAX, with x64 switched on (this process only; every array has an explicit dtype)."""
    import jax

    jax.config.update("jax_enable_x64", True)
    return jax


def devices(kind: str) -> list:
    """JAX's devices of a kind ('cpu' or 'gpu'); [] where it has none."""
    jax = _jax()
    try:
        return jax.devices(kind)
    except RuntimeError:
        return []


def gpu_available() -> bool:
    return bool(devices("gpu"))


class JaxOps(TransposedOps):
    """The array operations of `study.frameworks.numpy.backend.NumpyBackend`, on JAX arrays, inside
    and outside `jit`, X stored transposed (XLA's CPU emitters stream it fastest, as TensorFlow's
    XLA measurements found: `study.frameworks.tensorflow.backend.data_layout`)."""

    name = "jax"
    # the ops that are jax.numpy's own functions: our name -> jax.numpy's
    NUMPY_NAMED = {**{name: name for name in ("matmul", "sqrt", "abs", "where", "isfinite",
                                              "maximum", "minimum", "zeros_like", "logical_and",
                                              "logical_or", "logical_not", "reshape",
                                              "transpose", "sum")}, "diag_part": "diagonal"}

    def __init__(self, dtype: str = "float64", device=None):
        jax = _jax()
        import jax.numpy as jnp
        from jax import lax
        from jax.scipy.linalg import solve_triangular

        self.jnp = self.xp = jnp
        self.lax, self._solve = lax, solve_triangular
        self.dtype = np.dtype(dtype)
        self.device = device if device is not None else jax.devices("cpu")[0]
        self.tiny = self.dtype.type(np.finfo(self.dtype).tiny)
        self._put = jax.device_put
        for name, function in self.NUMPY_NAMED.items():
            setattr(self, name, getattr(jnp, function))
        self.sigmoid = jax.nn.sigmoid

    def asarray(self, value):
        return self.jnp.asarray(value, dtype=self.dtype)

    scalar = asarray

    def data_matrix(self, X):
        return self._put(np.ascontiguousarray(np.asarray(X, dtype=self.dtype).T), self.device)

    def to_host(self, value) -> np.ndarray:
        return np.asarray(value)

    def softplus(self, x):
        """log(1 + exp(x)) without overflow for any x."""
        return self.jnp.logaddexp(0, x)

    def while_loop(self, condition, body, loop_vars: tuple) -> tuple:
        """tf.while_loop's contract on a tuple, as a `lax.while_loop` (compiled in place)."""
        return tuple(self.lax.while_loop(lambda v: condition(*v), lambda v: tuple(body(*v)),
                                         tuple(loop_vars)))

    def cond(self, predicate, true_fn, false_fn):
        return self.lax.cond(predicate, true_fn, false_fn)

    def eye(self, n, like):
        return self.jnp.eye(n, dtype=like.dtype)

    def solve_triangular(self, a, b, lower: bool):
        return self._solve(a, b, lower=lower)

    def zeros(self, shape, like):
        return self.jnp.zeros(shape, dtype=like.dtype)


class FusedCarry(NamedTuple):
    """What the fused loop carries from one iteration (and one chunk) to the next."""

    i: object  # iterations done
    state: object  # the optimizer's
    f_prev: object  # the loss at the previous iterate
    f0: object  # the loss at the start
    rule_states: tuple
    fired: object  # one flag per rule
    trace: object  # TRACE_CAPACITY rows of TRACE_COLUMNS, the first `slot` kept
    slot: object  # the row the next iteration writes


class JaxBackend(BaseBackend):
    """Runs an optimizer on JAX: `minimize(problem, optimizer, rules, w0) -> Outcome`."""

    name = "jax"
    gpu_available = staticmethod(gpu_available)

    def make_ops(self) -> JaxOps:
        found = devices(self.device)
        return JaxOps(self.dtype.name, found[0] if found else None)

    def run(self, problem, optimizer, rules, w0):
        # ahead-of-time compiles and a fused chunk are single C++ calls: run on the kept worker
        # thread so that Ctrl-C stays prompt (optimizers.interruptible); JAX's default device is
        # a per-thread setting, so it is entered there
        return call_interruptibly(self._on_device, problem, optimizer, rules, w0)

    def _on_device(self, problem, optimizer, rules, w0):
        with _jax().default_device(self.ops.device):
            run = self._fused if self.feed == "fused" else self._stepped
            return run(problem, optimizer, rules, w0)

    def _stats(self, state):
        """Loss and gradient norm of a state as one float64 vector (one read to the host)."""
        jnp, ops = self.ops.jnp, self.ops
        grad_norm = ops.sqrt(ops.vdot(state.g, state.g))
        return jnp.stack([state.f, grad_norm]).astype(jnp.float64)

    def _setup(self, problem, optimizer, w0):
        """`prepare`'s data, constants and start point, placed on the device; the pure init
        and step a compiled loop is made of."""
        ops = self.ops
        data, params, start, _ = self.prepare(problem, optimizer, w0)
        data = tuple(ops._put(array, ops.device) for array in data)
        steps = step_functions(ops, optimizer, self.formulation, problem.objective, self._stats)
        return data, params, ops._put(start, ops.device), steps

    def _outcome(self, w, w_host, loop, setup_seconds, **extra):
        device = next(iter(w.devices()))
        return self.outcome(w_host, loop, setup_seconds,
                            f"{device.platform.upper()}:{device.id}",
                            device_name=str(device), **extra)

    @staticmethod
    def _compile(function, *arguments, donate=()):
        """Ahead-of-time: trace, lower and compile for these arguments' shapes and placement,
        the arguments numbered in `donate` handed over to the result (not copied)."""
        import jax

        return jax.jit(function, donate_argnums=donate).lower(*arguments).compile()

    # feed and resident: compiled steps called from the host loop

    def _stepped(self, problem, optimizer, rules, w0):
        import jax

        setup_clock = Stopwatch()
        data, params, start, (init, step) = self._setup(problem, optimizer, w0)
        if self.feed == "feed":  # the host keeps the data; every call copies it over
            data = tuple(host_array(array) for array in data)
        init_fn = self._compile(init, data, params, start)
        warm = init_fn(data, params, start)
        step_fn = self._compile(step, data, params, warm[0])
        jax.block_until_ready(step_fn(data, params, warm[0]))  # a first call, thrown away
        setup_seconds = setup_clock.elapsed()

        def observe(result):
            return result[1].tolist()  # (f, grad_norm) as floats: the one read (the sync)

        state, *loop = host_loop(
            problem, rules,
            init=lambda: init_fn(data, params, start),
            step=lambda result: step_fn(data, params, result[0]),
            observe=observe,
        )
        w = state[0].w
        return self._outcome(w, np.asarray(w), loop, setup_seconds, trace_clock="host"), state[0]

    # fused: the loop compiled, run in chunks (see the module docstring)

    def _fused_functions(self, rules, init_step, update_step):
        import jax.numpy as jnp
        from jax import lax

        ops = self.ops
        no_clock = jnp.asarray(0.0, jnp.float64)  # the budget is checked between chunks
        due = jnp.asarray(trace_iterations(), jnp.int64)  # row k keeps iteration due[k]

        def check(tensor_rules, f_star, f_scale, carry, stats):
            """The rules and the trace row of iteration `carry.i`: written at row `slot`, kept
            there when it is the iteration due there, else overwritten by the next."""
            f, grad_norm = stats[0], stats[1]
            iteration = carry.i.astype(jnp.float64)
            suboptimality = (f - f_star) / f_scale
            ctx = Context(iteration, no_clock, f, carry.f0, carry.f_prev, suboptimality,
                          grad_norm)
            fired, rule_states = tensor_rules.check(ops, ctx, carry.rule_states)
            row = jnp.stack([iteration, no_clock, f, suboptimality, grad_norm])
            # clamped, not bounds-checked as `.at[].set` is: the slot stays < TRACE_CAPACITY
            trace = lax.dynamic_update_slice(carry.trace, row[None], (carry.slot, jnp.int32(0)))
            kept = carry.i == due[carry.slot]
            return carry._replace(f_prev=f, rule_states=rule_states, fired=jnp.stack(fired),
                                  trace=trace, slot=carry.slot + kept.astype(jnp.int32))

        def start(data, params, w0, values, f_star, f_scale, trace):
            tensor_rules = rules_on_tensors(rules, [values[k] for k in range(values.shape[0])])
            state, stats = init_step(data, params, w0)
            carry = FusedCarry(jnp.asarray(0, jnp.int64), state,
                               jnp.asarray(np.nan, jnp.float64), stats[0],
                               tensor_rules.init_state(ops), jnp.zeros(len(rules.rules), bool),
                               trace, jnp.asarray(0, jnp.int32))
            return check(tensor_rules, f_star, f_scale, carry, stats)

        def chunk(data, params, carry, values, f_star, f_scale, limit):
            tensor_rules = rules_on_tensors(rules, [values[k] for k in range(values.shape[0])])

            def condition(c):
                return jnp.logical_and(jnp.logical_not(jnp.any(c.fired)), c.i < limit)

            def body(c):
                state, stats = update_step(data, params, c.state)
                return check(tensor_rules, f_star, f_scale, c._replace(i=c.i + 1, state=state),
                             stats)

            carry = lax.while_loop(condition, body, carry)
            # what the host reads after a chunk, as one array (one read): i, then the rules fired
            return carry, jnp.concatenate([carry.i[None], carry.fired.astype(jnp.int64)])

        def first_chunk(data, params, w0, values, f_star, f_scale, trace, limit):
            """The start and the first chunk as one call: on the CPU a call costs ~100 us
            however few iterations it runs (1k x 5 GD), so a short run makes only one."""
            carry = start(data, params, w0, values, f_star, f_scale, trace)
            return chunk(data, params, carry, values, f_star, f_scale, limit)

        return first_chunk, chunk

    def _fused(self, problem, optimizer, rules, w0):
        import jax
        import jax.numpy as jnp

        setup_clock = Stopwatch()
        data, params, start_point, steps = self._setup(problem, optimizer, w0)
        values = jnp.asarray(rule_values(rules), jnp.float64)
        f_star = jnp.asarray(problem.f_star, jnp.float64)
        f_scale = jnp.asarray(problem.reference.scale, jnp.float64)
        constants = (values, f_star, f_scale)
        first_chunk, chunk = self._fused_functions(rules, *steps)
        # each call hands its trace buffer (the first) or carry (the others) over to its
        # result: made before the clock, never copied (a 40 kB copy took ~60 us on the CPU)
        first_fn = self._compile(first_chunk, data, params, start_point, *constants,
                                 empty_trace(), np.int64(1), donate=(6,))
        carry, _ = first_fn(data, params, start_point, *constants, empty_trace(), np.int64(1))
        chunk_fn = self._compile(chunk, data, params, carry, *constants, np.int64(2),
                                 donate=(2,))
        jax.block_until_ready(chunk_fn(data, params, carry, *constants, np.int64(2)))
        budget = next((r for r in rules.rules if isinstance(r, TimeBudget)), None)
        trace = empty_trace().block_until_ready()  # filled before the clock, not on it
        setup_seconds = setup_clock.elapsed()

        clock = Stopwatch()
        size, chunks, index, i, carry = FIRST_CHUNK, [], -1, 0, None
        while True:
            began, first = clock.elapsed(), i
            limit = np.int64(min(first + size, CAP))
            carry, summary = (
                first_fn(data, params, start_point, *constants, trace, limit) if carry is None
                else chunk_fn(data, params, carry, *constants, limit))
            summary = summary.tolist()  # the one read of the chunk (the sync)
            i, fired = int(summary[0]), summary[1:]
            ended = clock.elapsed()
            chunks.append((first, i, began, ended))
            index = rules.first(fired)
            if index >= 0 or i >= CAP:
                break
            if budget is not None and ended >= budget.seconds:
                index = rules.rules.index(budget)
                break
            per_iteration = (ended - began) / max(i - first, 1)
            room = (budget.seconds - ended) if budget is not None else CHUNK_SECONDS
            size = max(1, int(min(CHUNK_SECONDS, room) / per_iteration) + 1)
        w = carry.state.w
        w_host = np.asarray(w)  # the clock stops once it is on the host (jax.device_get: +30 us)
        seconds = clock.elapsed()
        rows = int(carry.slot) + 1 - on_trace_schedule(i)  # the last iteration's row is kept
        trace = fused_trace(np.asarray(carry.trace)[:rows])
        trace["seconds"] = interpolated_seconds(trace["iteration"], chunks)
        loop = (i, seconds, fused_ending(rules, index, i), trace)
        return self._outcome(w, w_host, loop, setup_seconds,
                             trace_clock="interpolated within compiled chunks",
                             fused_chunks=len(chunks)), carry.state


def empty_trace():
    """A fused loop's trace buffer (its rows are written before they are read)."""
    import jax.numpy as jnp

    return jnp.zeros((TRACE_CAPACITY, len(TRACE_COLUMNS)), jnp.float64)


def host_array(array) -> np.ndarray:
    """A NumPy copy of `array` placed 16 bytes past a 64-byte boundary, where NumPy's large
    allocations usually sit (glibc's mmap header). On a CPU, XLA takes a 64-byte-aligned host
    array without copying it: a view of JAX's own buffer, or a copy that happened to land
    aligned, made the feed mode copy nothing (1.6 against 24 ms a call for 1M x 5 float64)."""
    array = np.asarray(array)
    raw = np.empty(array.nbytes + 64, np.uint8)
    start = (16 - raw.ctypes.data) % 64
    placed = raw[start:start + array.nbytes].view(array.dtype).reshape(array.shape)
    placed[...] = array
    return placed
