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

import numpy as np

from optimizers.driver import host_loop, step_functions
from optimizers.interruptible import call_interruptibly
from optimizers.result import TRACE_COLUMNS, Stopwatch, interpolated_seconds, on_trace_schedule
from optimizers.stopping import Context, TimeBudget, rule_values, rules_on_tensors
from study.frameworks.base import (
    CAP,
    DECADES,
    STRIDES,
    TRACE_CAPACITY,
    BaseBackend,
    TransposedOps,
    fused_ending,
    fused_trace,
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


def on_trace_schedule_traced(jnp, iteration):
    """`optimizers.result.on_trace_schedule` on a traced integer."""
    i = iteration.astype(jnp.int64)
    decade = jnp.sum(i >= jnp.asarray(DECADES, jnp.int64))
    return i % jnp.asarray(STRIDES, jnp.int64)[decade] == 0


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
    def _compile(function, *arguments):
        """Ahead-of-time: trace, lower and compile for these arguments' shapes and placement."""
        import jax

        return jax.jit(function).lower(*arguments).compile()

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

        def check(tensor_rules, f_star, f_scale, i, stats, f0, f_prev, rule_states, buffer,
                  slot):
            f, grad_norm = stats[0], stats[1]
            iteration = i.astype(jnp.float64)
            ctx = Context(iteration, no_clock, f, f0, f_prev, (f - f_star) / f_scale, grad_norm)
            fired, rule_states = tensor_rules.check(ops, ctx, rule_states)
            row = jnp.stack([iteration, no_clock, f, (f - f_star) / f_scale, grad_norm])
            buffer = buffer.at[slot].set(row)
            slot = slot + on_trace_schedule_traced(jnp, i).astype(jnp.int32)
            return jnp.stack(fired), rule_states, buffer, slot

        def start(data, params, w0, values, f_star, f_scale):
            tensor_rules = rules_on_tensors(rules, [values[k] for k in range(values.shape[0])])
            state, stats = init_step(data, params, w0)
            f0 = stats[0]
            buffer = jnp.zeros((TRACE_CAPACITY, len(TRACE_COLUMNS)), jnp.float64)
            fired, rule_states, buffer, slot = check(
                tensor_rules, f_star, f_scale, jnp.asarray(0, jnp.int64), stats, f0,
                jnp.asarray(np.nan, jnp.float64), tensor_rules.init_state(ops), buffer,
                jnp.asarray(0, jnp.int32))
            return (jnp.asarray(0, jnp.int64), state, f0, f0, rule_states, fired, buffer, slot)

        def chunk(data, params, carry, values, f_star, f_scale, limit):
            tensor_rules = rules_on_tensors(rules, [values[k] for k in range(values.shape[0])])

            def condition(c):
                i, fired = c[0], c[5]
                return jnp.logical_and(jnp.logical_not(jnp.any(fired)), i < limit)

            def body(c):
                i, state, f_prev, f0, rule_states, _, buffer, slot = c
                state, stats = update_step(data, params, state)
                i = i + 1
                fired, rule_states, buffer, slot = check(tensor_rules, f_star, f_scale, i, stats,
                                                         f0, f_prev, rule_states, buffer, slot)
                return (i, state, stats[0], f0, rule_states, fired, buffer, slot)

            carry = lax.while_loop(condition, body, carry)
            # what the host reads after a chunk, as one array (one read): i, then the rules fired
            return carry, jnp.concatenate([carry[0][None], carry[5].astype(jnp.int64)])

        return start, chunk

    def _fused(self, problem, optimizer, rules, w0):
        import jax
        import jax.numpy as jnp

        setup_clock = Stopwatch()
        data, params, start_point, steps = self._setup(problem, optimizer, w0)
        values = jnp.asarray(rule_values(rules), jnp.float64)
        f_star = jnp.asarray(problem.f_star, jnp.float64)
        f_scale = jnp.asarray(problem.reference.scale, jnp.float64)
        start, chunk = self._fused_functions(rules, *steps)
        start_fn = self._compile(start, data, params, start_point, values, f_star, f_scale)
        carry = start_fn(data, params, start_point, values, f_star, f_scale)
        limit = jnp.asarray(1, jnp.int64)
        chunk_fn = self._compile(chunk, data, params, carry, values, f_star, f_scale, limit)
        jax.block_until_ready(chunk_fn(data, params, carry, values, f_star, f_scale, limit))
        budget = next((r for r in rules.rules if isinstance(r, TimeBudget)), None)
        setup_seconds = setup_clock.elapsed()

        clock = Stopwatch()
        carry = start_fn(data, params, start_point, values, f_star, f_scale)
        size, chunks, index, i = FIRST_CHUNK, [], -1, 0
        while True:
            began, first = clock.elapsed(), i
            carry, summary = chunk_fn(data, params, carry, values, f_star, f_scale,
                                      jnp.asarray(min(first + size, CAP), jnp.int64))
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
        w = carry[1].w
        w_host = jax.device_get(w)  # the clock stops once the result is on the host
        seconds = clock.elapsed()
        trace = fused_trace(np.asarray(carry[6])[: int(carry[7]) + 1 - on_trace_schedule(i)])
        trace["seconds"] = interpolated_seconds(trace["iteration"], chunks)
        loop = (i, seconds, fused_ending(rules, index, i), trace)
        return self._outcome(w, w_host, loop, setup_seconds,
                             trace_clock="interpolated within compiled chunks",
                             fused_chunks=len(chunks)), carry[1]


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
