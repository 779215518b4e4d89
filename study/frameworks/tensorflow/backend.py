"""TensorFlow backend: the same algorithm code on a CPU or GPU, fed `feed`, `resident`, `fused`
or `tf1` (`study.frameworks.tensorflow.tf1`); docs/backends.md says what each means.

`xla=True` compiles the optimizer's step with `jit_compile=True`; in `fused` the loop control
(rules, clock, trace) stays outside XLA, which has no clock op on the CPU. Nothing here touches
TensorFlow's global configuration. Every function is traced with `autograph=False`: the
algorithms state their control flow explicitly, so AutoGraph would only add tracing time
(seconds, for L-BFGS's fused loop).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from convergence_study.errors import InputError
from optimizers.driver import host_loop, step_functions
from optimizers.interruptible import call_interruptibly
from optimizers.result import TRACE_COLUMNS, Stopwatch, on_trace_schedule
from optimizers.stopping import Context, rule_values, rules_on_tensors
from study.frameworks.base import (
    CAP,
    TRACE_CAPACITY,
    BaseBackend,
    fused_ending,
    fused_trace,
    trace_iterations,
)
from study.frameworks.registry import framework
from study.frameworks.tensorflow.tf1 import minimize_tf1

DEVICES = {"cpu": "/CPU:0", "gpu": "/GPU:0"}
NO_GPU = framework("tensorflow").no_gpu()  # what a GPU asked for and absent is told
LAYOUTS = ("columns", "rows")


def data_layout(dtype, xla: bool) -> str:
    """How X is stored on the device, chosen by which kernels run the products (measured on
    1M x 5, CPU, passes over X of X w + X^T r): XLA's emitters and oneDNN (float32 matmuls)
    stream a transposed X (d x n) fastest (XLA float64 2.6 vs 3.3, float32 without XLA 1.9
    vs 3.7), but TensorFlow's float64 matmul (Eigen, no oneDNN) is faster on X as given
    (4.6 vs 6.4)."""
    return "rows" if np.dtype(dtype) == np.float64 and not xla else "columns"


class TensorflowOps:
    """The array operations of `study.frameworks.numpy.backend.NumpyBackend`, on TensorFlow
    tensors, eagerly and inside `tf.function` (`dtype` NumPy's, `tf_dtype` TensorFlow's)."""

    name = "tensorflow"

    def __init__(self, dtype="float64", device: str = "cpu", layout: str = "columns"):
        if layout not in LAYOUTS:
            raise ValueError(f"unknown layout {layout!r}; allowed: {', '.join(LAYOUTS)}")
        self.layout = layout
        self.dtype = np.dtype(dtype)
        self.tf_dtype = tf.as_dtype(self.dtype)
        self.device = device
        self.tiny = self.dtype.type(np.finfo(self.dtype).tiny)

    def asarray(self, value):
        if tf.is_tensor(value):
            return tf.cast(value, self.tf_dtype)
        return tf.constant(np.asarray(value, dtype=self.dtype))

    def scalar(self, value):
        return tf.constant(value, dtype=self.tf_dtype)

    # the data matrix, in this backend's layout, and the products that read it
    def data_matrix(self, X):
        """X as stored on the device: transposed (d x n, i.e. column-major X) or as given (n x d),
        see `data_layout`."""
        X = np.asarray(X, dtype=self.dtype)
        return tf.constant(np.ascontiguousarray(X.T if self.layout == "columns" else X))

    def data_matvec(self, X, w):
        return tf.linalg.matmul(X, w, transpose_a=self.layout == "columns")

    def data_rmatvec(self, X, r):
        return tf.linalg.matmul(X, r, transpose_a=self.layout == "rows")

    def data_column_squares(self, X):
        return tf.reduce_sum(X * X, axis=1 if self.layout == "columns" else 0)

    def data_gram(self, X):
        columns = self.layout == "columns"
        return tf.linalg.matmul(X, X, transpose_a=not columns, transpose_b=columns)

    def to_host(self, value) -> np.ndarray:
        return np.asarray(value)

    @staticmethod
    def matmul_t(a, b):
        """a^T @ b without materialising the transpose."""
        return tf.linalg.matmul(a, b, transpose_a=True)

    @staticmethod
    def strict_upper(a):
        """The entries above the diagonal of a square matrix, zeros elsewhere."""
        return tf.linalg.band_part(a, 0, -1) - tf.linalg.band_part(a, 0, 0)

    @staticmethod
    def eye(n, like):
        return tf.eye(n, dtype=like.dtype)

    @staticmethod
    def zeros(shape, like):
        return tf.zeros(shape, dtype=like.dtype)

    @staticmethod
    def vdot(a, b):
        return tf.reduce_sum(a * b)

    @staticmethod
    def while_loop(condition, body, loop_vars: tuple) -> tuple:
        """A loop inside the graph (nested in the fused loop, compiled by XLA)."""
        return tuple(tf.while_loop(condition, body, loop_vars))

    @staticmethod
    def push(history, item):
        """Drop the oldest entry of a fixed-size history (axis 0) and append `item` last."""
        return tf.concat([history[1:], item[None]], axis=0)

    def where(self, condition, x, y):
        """Elementwise choice; a Python number in either branch takes the other branch's dtype."""
        like = x if tf.is_tensor(x) else y if tf.is_tensor(y) else None
        dtype = like.dtype if like is not None else self.tf_dtype
        x = x if tf.is_tensor(x) else tf.constant(x, dtype=dtype)
        y = y if tf.is_tensor(y) else tf.constant(y, dtype=dtype)
        return tf.where(condition, x, y)

    # TensorFlow's own functions under the names the algorithms use
    matmul = staticmethod(tf.linalg.matmul)
    cond = staticmethod(tf.cond)  # only the chosen branch runs
    solve_triangular = staticmethod(tf.linalg.triangular_solve)
    sum = staticmethod(tf.reduce_sum)
    diag_part = staticmethod(tf.linalg.diag_part)
    reshape = staticmethod(tf.reshape)
    transpose = staticmethod(tf.transpose)
    sqrt = staticmethod(tf.math.sqrt)
    abs = staticmethod(tf.math.abs)
    isfinite = staticmethod(tf.math.is_finite)
    maximum = staticmethod(tf.math.maximum)
    zeros_like = staticmethod(tf.zeros_like)
    minimum = staticmethod(tf.math.minimum)
    logical_and = staticmethod(tf.math.logical_and)
    logical_or = staticmethod(tf.math.logical_or)
    logical_not = staticmethod(tf.math.logical_not)
    softplus = staticmethod(tf.math.softplus)
    sigmoid = staticmethod(tf.math.sigmoid)


def gpu_available() -> bool:
    return bool(tf.config.list_physical_devices("GPU"))


def short_device(name: str) -> str:
    """'/job:localhost/replica:0/task:0/device:GPU:0' -> 'GPU:0'."""
    return name.rsplit("device:", 1)[-1] if name else "unknown"


class TensorflowBackend(BaseBackend):
    """Runs an optimizer on TensorFlow: `minimize(problem, optimizer, rules, w0) -> Outcome`."""

    name = "tensorflow"
    gpu_available = staticmethod(gpu_available)

    def __init__(self, dtype: str = "float64", formulation: str = "data", **options):
        super().__init__(dtype, formulation, **options)
        if formulation != "data" and self.feed == "tf1":
            raise InputError("tf1 runs the original program, which reads X every step: "
                             "formulation 'data' only")
        if self.xla and self.feed == "tf1":
            raise InputError("xla applies to the feed modes feed, resident and fused, not tf1")
        self.placement = DEVICES[self.device]  # where tf.device puts its ops
        self.rule_ops = TensorflowOps("float64", self.device)  # rules see float64, as on host

    short_device = staticmethod(short_device)

    def make_ops(self):
        return TensorflowOps(self.dtype.name, self.device, data_layout(self.dtype, self.xla))

    def run(self, problem, optimizer, rules, w0):
        if self.feed == "tf1":
            return minimize_tf1(self, problem, optimizer, rules, w0), None
        if self.feed == "fused":  # one C++ call for the whole run: Ctrl-C must still stop it
            return call_interruptibly(self._fused, problem, optimizer, rules, w0)
        return self._stepped(problem, optimizer, rules, w0)

    # helpers shared by the modes

    def _compile(self, function):
        return tf.function(function, jit_compile=self.xla, autograph=False)

    def _stats(self, state):
        """Loss and gradient norm of a state as one float64 vector (one read to the host)."""
        ops = self.ops
        grad_norm = ops.sqrt(ops.vdot(state.g, state.g))
        return tf.cast(tf.stack([state.f, grad_norm]), tf.float64)

    def _loss_and_grad_norm(self, state):
        """`_stats` as two scalars, for the fused loop: its graph runs op by op, and stacking
        the pair only to slice it again cost three ops an iteration."""
        ops = self.ops
        grad_norm = ops.sqrt(ops.vdot(state.g, state.g))
        return tf.cast(state.f, tf.float64), tf.cast(grad_norm, tf.float64)

    def _setup(self, problem, optimizer, w0, stats=None):
        """`prepare`'s data, constants and start point; the pure init and step of a loop, each
        also returning `stats` of its state (default `_stats`)."""
        data, params, start, _ = self.prepare(problem, optimizer, w0)
        steps = step_functions(self.ops, optimizer, self.formulation, problem.objective,
                               stats or self._stats)
        return data, params, start, steps

    def _outcome(self, w, w_host, loop, setup_seconds):
        return self.outcome(w_host, loop, setup_seconds, short_device(w.device),
                            device_name=w.device)

    # feed and resident: compiled steps called from the host loop

    def _stepped(self, problem, optimizer, rules, w0):
        setup_clock = Stopwatch()
        with tf.device(DEVICES[self.device]):
            data, params, start, steps = self._setup(problem, optimizer, w0)
            if self.feed == "feed":  # the host keeps the data; every call copies it over
                data = tuple(np.asarray(array) for array in data)
            init_fn, step_fn = (self._compile(f) for f in steps)
            warm, _ = init_fn(data, params, start)  # trace and compile; pure, so thrown away
            step_fn(data, params, warm)[1].numpy()
            setup_seconds = setup_clock.elapsed()

            def observe(state):
                f, grad_norm = state[1].numpy()
                return float(f), float(grad_norm)

            state, *loop = host_loop(
                problem, rules,
                init=lambda: init_fn(data, params, start),
                step=lambda state: step_fn(data, params, state[0]),
                observe=observe,
            )
        w = state[0].w
        return self._outcome(w, w.numpy(), loop, setup_seconds), state[0]

    # fused: one tf.function, one while_loop, rules as tensor predicates

    def _fused_function(self, rules, init_step, update_step):
        rops = self.rule_ops
        if self.xla:  # the steps compiled by XLA, the loop control outside it
            init_step, update_step = self._compile(init_step), self._compile(update_step)
        n_rules = len(rules.rules)

        def loop(data, params, w0, values, f_star, f_scale, cap):
            t0 = tf.timestamp()
            tensor_rules = rules_on_tensors(rules, tf.unstack(values))

            def check(i, stats, f0, f_prev, rule_states, trace):
                """The rules and the trace row of iteration i: written at row `slot`, kept there
                when i is the iteration due there, else overwritten by the next."""
                f, grad_norm = stats
                with tf.control_dependencies(stats):
                    elapsed = tf.timestamp() - t0
                suboptimality = (f - f_star) / f_scale
                iteration = tf.cast(i, tf.float64)
                ctx = Context(iteration, elapsed, f, f0, f_prev, suboptimality, grad_norm)
                fired, rule_states = tensor_rules.check(rops, ctx, rule_states)
                table, slot = trace
                # a TensorArray's write sets one row, where a scatter into a tensor copied all
                # 1024 (~9 us an iteration of 1k x 5 GD)
                table = table.write(slot, tf.stack([iteration, elapsed, f, suboptimality,
                                                    grad_norm]))
                kept = tf.equal(i, tf.gather(due, slot))
                return tf.stack(fired), rule_states, (table, slot + tf.cast(kept, tf.int32))

            due = tf.constant(trace_iterations(), tf.int64)  # row k keeps iteration due[k]
            state, stats = init_step(data, params, w0)
            f0 = stats[0]
            table = tf.TensorArray(tf.float64, TRACE_CAPACITY, element_shape=(len(TRACE_COLUMNS),))
            fired, rule_states, trace = check(
                tf.constant(0, tf.int64), stats, f0, tf.constant(np.nan, tf.float64),
                tensor_rules.init_state(rops), (table, tf.constant(0)))

            def condition(i, state, f_prev, rule_states, fired, trace):
                return tf.logical_and(tf.logical_not(tf.reduce_any(fired)), i < cap)

            def body(i, state, f_prev, rule_states, fired, trace):
                state, stats = update_step(data, params, state)
                i = i + 1
                fired, rule_states, trace = check(i, stats, f0, f_prev, rule_states, trace)
                return i, state, stats[0], rule_states, fired, trace

            i, state, _, _, fired, (table, slot) = tf.while_loop(
                condition, body, (tf.constant(0, tf.int64), state, f0, rule_states, fired, trace))
            return state, i, tf.ensure_shape(fired, (n_rules,)), table.stack(), slot

        return tf.function(loop, autograph=False)

    def _fused(self, problem, optimizer, rules, w0):
        setup_clock = Stopwatch()
        with tf.device(DEVICES[self.device]):
            data, params, start, steps = self._setup(problem, optimizer, w0,
                                                     self._loss_and_grad_norm)
            arguments = (data, params, start, tf.constant(rule_values(rules), tf.float64),
                         tf.constant(problem.f_star, tf.float64),
                         tf.constant(problem.reference.scale, tf.float64))
            cap = tf.constant(CAP, tf.int64)
            # traced once, then called as the concrete function: the tf.function's own call
            # matched these nested arguments to its traces again, ~0.3 ms a run on the CPU
            loop = self._fused_function(rules, *steps).get_concrete_function(*arguments, cap)
            loop(*arguments, tf.constant(1, tf.int64))[1].numpy()  # a first run: one step
            setup_seconds = setup_clock.elapsed()

            clock = Stopwatch()
            state, iterations, fired, table, slot = loop(*arguments, cap)
            w = state.w
            w_host = w.numpy()  # the clock stops once the result is on the host
            seconds = clock.elapsed()
        iterations = int(iterations.numpy())  # bookkeeping reads, outside the clock
        ending = fused_ending(rules, rules.first(fired.numpy()), iterations)
        rows = int(slot.numpy()) + 1 - on_trace_schedule(iterations)  # and the last iteration's
        trace = fused_trace(table.numpy()[:rows])
        return self._outcome(w, w_host, (iterations, seconds, ending, trace),
                             setup_seconds), state
