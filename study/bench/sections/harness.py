"""Section `harness`: our harness against a hand-written loop, every installed framework, every
feed mode its backend declares, on one device (issue 32, item 1; goal <= 1.3x).

Both sides run GD (1/L) on the same `eve` data, on the same device, in the same layout of X
as our backend stores it, and make the same host reads: the loss read to the host once per
iteration in the modes stepped from the host (feed, resident, compiled, tf1), once per chunk
in the whole-loop modes (`WHOLE_LOOP`: the run here is one chunk). The two are timed side by
side, alternating which goes first. The modes are read from the backend registry when the
bench runs, so a mode another change declares (PyTorch's `graphed`) appears by itself; one
with no hand-written loop here yet is a row saying so. The hand-written loops live here: they
exist only to be this section's denominators (`study.bench.sections.bandwidth` reuses them).
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from datasets.errors import failure_line
from study.bench.plan import LOOP_GOAL, Plan
from study.bench.runs import Unavailable, failed_row, progress, shown
from study.bench.sections.overhead import gd_step, hand_numpy_gd, hand_tf_gd
from study.bench.timing import median, ratio, samples

WHOLE_LOOP = ("fused", "graphed")  # the loop on the device: one host read per chunk


def engines(device: str, only: tuple = ()) -> list[tuple[str, str]]:
    """(backend, feed) of every installed backend that runs on `device`, each declared feed
    ('' for NumPy, which has none), read from the registry now: new modes appear by
    themselves. `only` keeps those backends (the tests' small plans)."""
    from optimizers.backends.registry import BACKENDS, FRAMEWORKS

    found = []
    for name, declared in BACKENDS.items():
        if only and name not in only:
            continue
        if declared.framework and not FRAMEWORKS[declared.framework].installed():
            continue
        if device != "cpu" and device not in declared.allowed("device"):
            continue
        found += [(name, feed) for feed in declared.allowed("feed") or ("",)]
    return found


def engine_label(name: str, feed: str) -> str:
    from optimizers.backends.registry import BACKENDS

    return BACKENDS[name].label({"feed": feed} if feed else {})


def ours(problem, name: str, feed: str, dtype: str, device: str, optimizer: str,
         iterations: int):
    """One run of our harness (`optimizers.run`, a fixed number of iterations, no tolerance);
    a mode this machine cannot run -> Unavailable."""
    from datasets.errors import InputError
    from optimizers import build_rules, make_backend, make_optimizer, run

    options = {"feed": feed, "device": device} if feed else {}
    try:
        backend = make_backend(name, dtype, **options)
        result = run(problem, make_optimizer(optimizer), build_rules(max_iter=iterations),
                     backend=backend)
    except InputError as exc:
        raise Unavailable(failure_line(exc)) from None
    if result.status == "skipped":
        raise Unavailable(result.message)
    return result


# --- the hand-written loops: GD 1/L, the loss read to the host as `host_reads` says ----------

def hand_loop(problem, name: str, feed: str, dtype: str, device: str, iterations: int) -> float:
    """Seconds per iteration of the hand-written loop for this backend and mode."""
    if name == "numpy":
        return hand_numpy_gd(problem, dtype, "data", iterations)
    if name == "jax" and feed in ("feed", "resident", "fused"):
        return hand_jax(problem, feed, dtype, device, iterations)
    if name == "torch" and feed in ("feed", "resident", "compiled", "graphed"):
        return hand_torch(problem, feed, dtype, device, iterations)
    if name == "tensorflow" and feed == "fused":
        return hand_tf_gd(problem, dtype, iterations, xla=False, device=device)
    if name == "tensorflow" and feed in ("feed", "resident"):
        return hand_tf_stepped(problem, feed, dtype, device, iterations)
    if name == "tensorflow" and feed == "tf1":
        return hand_tf1(problem, dtype, device, iterations)
    raise Unavailable(f"no hand-written loop for {name} feed '{feed}' yet")


def host_arrays(problem, dtype: str):
    """X transposed (d x n, as the JAX and PyTorch backends store it), y, and the GD constants."""
    Xt = np.ascontiguousarray(np.asarray(problem.X, dtype=dtype).T)
    y = np.ascontiguousarray(np.asarray(problem.y, dtype=dtype))
    return Xt, y, gd_step(problem), 1.0 / problem.n


def hand_jax(problem, feed: str, dtype: str, device: str, iterations: int) -> float:
    """JAX: a jitted step called from a Python loop with `float(f)` every iteration (X passed
    as a NumPy array every call for feed, put on the device once for resident), or for fused a
    jitted `lax.fori_loop` of the whole run, read once. Compiled ahead of time, off the clock."""
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    from optimizers.backends.jax import host_array

    Xt_host, y_host, step, inv_n = host_arrays(problem, dtype)
    Xt_host, y_host = host_array(Xt_host), host_array(y_host)  # as our feed mode holds them
    target = jax.devices(device)[0]
    put = (lambda a: a) if feed == "feed" else (lambda a: jax.device_put(a, target))
    Xt, y = put(Xt_host), put(y_host)
    w0 = jax.device_put(np.zeros((problem.d, y_host.shape[1]), dtype=dtype), target)
    step, inv_n = np.asarray(step, dtype), np.asarray(inv_n, dtype)

    def evaluate(Xt, y, w):
        r = Xt.T @ w - y
        return jnp.sum(r * r) * inv_n, (2 * inv_n) * (Xt @ r)

    def update(Xt, y, w, g):
        w = w - step * g
        f, g = evaluate(Xt, y, w)
        return w, g, f

    with jax.default_device(target):
        if feed in WHOLE_LOOP:
            def loop(Xt, y, w):
                f, g = evaluate(Xt, y, w)
                return jax.lax.fori_loop(0, iterations,
                                         lambda _, c: update(Xt, y, c[0], c[1]), (w, g, f))
            compiled = jax.jit(loop).lower(Xt, y, w0).compile()
            float(compiled(Xt, y, w0)[2])  # a first call, as the backend's warm-up
            start = time.perf_counter()
            float(compiled(Xt, y, w0)[2])
            return (time.perf_counter() - start) / iterations
        first = jax.jit(evaluate).lower(Xt, y, w0).compile()
        f, g = first(Xt, y, w0)
        stepped = jax.jit(update).lower(Xt, y, w0, g).compile()
        float(stepped(Xt, y, w0, g)[2])
        start = time.perf_counter()
        w = w0
        f, g = first(Xt, y, w)
        float(f)
        for _ in range(iterations):
            w, g, f = stepped(Xt, y, w, g)
            float(f)
        return (time.perf_counter() - start) / iterations


def hand_torch(problem, feed: str, dtype: str, device: str, iterations: int) -> float:
    """PyTorch, no autograd (the analytic gradient, as our backend): an eager step with
    `float(f)` every iteration (feed: `torch.from_numpy(X).to(device)` every step; compiled:
    the step under `torch.compile`, compiled by two calls off the clock); graphed: the whole
    run captured once as a CUDA graph (capture off the clock), replayed, read once."""
    import torch

    Xt_host, y_host, step, inv_n = host_arrays(problem, dtype)
    target = torch.device("cuda" if device == "gpu" else "cpu")
    if feed == "graphed" and target.type != "cuda":
        raise Unavailable("graphed needs a CUDA GPU")
    Xt, y = torch.as_tensor(Xt_host, device=target), torch.as_tensor(y_host, device=target)
    w0 = torch.zeros((problem.d, y_host.shape[1]), dtype=Xt.dtype, device=target)

    def evaluate(Xt, y, w):
        r = Xt.T @ w - y
        return torch.sum(r * r) * inv_n, (2 * inv_n) * (Xt @ r)

    def update(Xt, y, w, g):
        w = w - step * g
        f, g = evaluate(Xt, y, w)
        return w, g, f

    def data():
        if feed == "feed":
            return torch.from_numpy(Xt_host).to(target), torch.from_numpy(y_host).to(target)
        return Xt, y

    with torch.no_grad():
        if feed == "graphed":
            return graphed_torch(evaluate, update, Xt, y, w0, iterations)
        if feed == "compiled":
            update = torch.compile(update)
            f, g = evaluate(Xt, y, w0)
            for _ in range(2):
                float(update(Xt, y, w0, g)[2])
        start = time.perf_counter()
        w = w0
        f, g = evaluate(*data(), w)
        float(f)
        for _ in range(iterations):
            w, g, f = update(*data(), w, g)
            float(f)
        return (time.perf_counter() - start) / iterations


def graphed_torch(evaluate, update, Xt, y, w0, iterations: int) -> float:
    """The whole run as one CUDA graph: warmed up on a side stream, captured once on static
    tensors, replayed once on the clock and read once. (Not run on a CPU-only machine.)"""
    import torch

    w, g = w0.clone(), evaluate(Xt, y, w0)[1]
    f = torch.zeros((), dtype=Xt.dtype, device=Xt.device)

    def body():
        ww, gg = w, g
        for _ in range(iterations):
            ww, gg, ff = update(Xt, y, ww, gg)
        f.copy_(ff)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        body()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        body()
    graph.replay()
    float(f)
    start = time.perf_counter()
    graph.replay()
    float(f)
    return (time.perf_counter() - start) / iterations


def hand_tf_stepped(problem, feed: str, dtype: str, device: str, iterations: int) -> float:
    """TensorFlow: a `tf.function` step (fixed input signature, traced off the clock) called
    from a Python loop with `f.numpy()` every iteration; feed hands it the NumPy arrays at every
    call, resident tensors made once. X in the layout our backend uses for this dtype."""
    import tensorflow as tf

    from optimizers.backends.tensorflow import data_layout

    columns = data_layout(dtype, False) == "columns"
    X_host = np.asarray(problem.X, dtype=dtype)
    X_host = np.ascontiguousarray(X_host.T) if columns else np.ascontiguousarray(X_host)
    y_host = np.ascontiguousarray(np.asarray(problem.y, dtype=dtype))
    kind = tf.as_dtype(dtype)
    w_shape = (problem.d, y_host.shape[1])
    step, inv_n = tf.constant(gd_step(problem), kind), tf.constant(1.0 / problem.n, kind)
    specs = [tf.TensorSpec(X_host.shape, kind), tf.TensorSpec(y_host.shape, kind),
             tf.TensorSpec(w_shape, kind)]

    def evaluate(X, y, w):
        r = tf.linalg.matmul(X, w, transpose_a=columns) - y
        return tf.reduce_sum(r * r) * inv_n, (2 * inv_n) * tf.linalg.matmul(
            X, r, transpose_a=not columns)

    first = tf.function(evaluate, input_signature=specs)

    @tf.function(input_signature=[*specs, tf.TensorSpec(w_shape, kind)])
    def update(X, y, w, g):
        w = w - step * g
        f, g = evaluate(X, y, w)
        return w, g, f

    with tf.device("/GPU:0" if device == "gpu" else "/CPU:0"):
        X, y = ((X_host, y_host) if feed == "feed"
                else (tf.identity(tf.constant(X_host)), tf.identity(tf.constant(y_host))))
        w0 = tf.zeros(w_shape, kind)
        update(X, y, w0, first(X, y, w0)[1])[2].numpy()  # traced off the clock
        start = time.perf_counter()
        f, g = first(X, y, w0)
        f.numpy()
        w = w0
        for _ in range(iterations):
            w, g, f = update(X, y, w, g)
            f.numpy()
        return (time.perf_counter() - start) / iterations


def hand_tf1(problem, dtype: str, device: str, iterations: int) -> float:
    """The original TF1 program: a graph with two placeholders, the weights in a variable,
    `GradientDescentOptimizer(1/L).minimize(loss)`, and one `sess.run([train, loss])` per
    iteration fed the pandas frames' columns (converted to the dtype at every call); the graph's
    first run (pruning, the executor) off the clock."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    features = pd.DataFrame(problem.X)
    labels = pd.DataFrame(problem.y)
    graph = tf.Graph()
    with graph.as_default(), graph.device("/GPU:0" if device == "gpu" else "/CPU:0"):
        kind = tf.as_dtype(dtype)
        X = tf1.placeholder(kind, shape=(None, problem.d))
        y = tf1.placeholder(kind, shape=(None, problem.k))
        w = tf1.Variable(np.zeros((problem.d, problem.k), dtype=dtype), use_resource=True)
        loss = tf.reduce_sum(tf.square(tf.linalg.matmul(X, w) - y)) / problem.n
        train = tf1.train.GradientDescentOptimizer(tf.constant(gd_step(problem), kind)).minimize(
            loss)
        initialize = tf1.global_variables_initializer()
    graph.finalize()
    with tf1.Session(graph=graph) as session:
        session.run(initialize)
        session.run([train, loss], feed_dict={X: features[features.columns],
                                              y: labels[labels.columns]})
        session.run(initialize)
        start = time.perf_counter()
        for _ in range(iterations):
            _, f = session.run([train, loss], feed_dict={X: features[features.columns],
                                                         y: labels[labels.columns]})
            float(f)
        return (time.perf_counter() - start) / iterations


# --- the section --------------------------------------------------------------------------------

def measure_loop(problem, name: str, feed: str, dtype: str, device: str, *, iterations: int,
                 repeats: int) -> dict:
    """Our GD seconds per iteration over the hand-written loop's, timed side by side."""
    row = {"framework": name, "backend": engine_label(name, feed), "feed": feed,
           "device": device, "dtype": dtype, "n": problem.n, "d": problem.d,
           "iterations": iterations, "goal": LOOP_GOAL,
           "host_reads": "per chunk" if feed in WHOLE_LOOP else "per iteration"}
    mine, hand = [], []
    try:
        for repeat in range(repeats):  # alternating which goes first
            if repeat % 2:
                hand.append(hand_loop(problem, name, feed, dtype, device, iterations))
            mine.append(ours(problem, name, feed, dtype, device, "gd",
                             iterations).seconds_per_iteration)
            if not repeat % 2:
                hand.append(hand_loop(problem, name, feed, dtype, device, iterations))
    except Exception as exc:  # noqa: BLE001 -- recorded on the row; the bench goes on
        return failed_row(row, exc)
    value = ratio(median(mine), median(hand))
    return {**row, "status": "ok", "message": "", "seconds": median(mine),
            "hand_seconds": median(hand), "ratio": value, "ratio_best": ratio(min(mine),
                                                                              min(hand)),
            "meets_goal": bool(value <= LOOP_GOAL) if value == value else None,
            "seconds_samples": samples(mine), "hand_samples": samples(hand)}


def bench_harness(plan: Plan, device: str = "cpu") -> pd.DataFrame:
    from datasets import make_problem

    rows = []
    found = engines(device, plan.harness_backends)
    for n in plan.harness_rows:
        problem = make_problem("eve", rows=n)
        problem.reference  # noqa: B018 -- f* in float64, before any clock
        for dtype in plan.harness_dtypes:
            for name, feed in found:
                rows.append(measure_loop(problem, name, feed, dtype, device,
                                         iterations=plan.harness_iterations,
                                         repeats=plan.harness_repeats))
                progress(f"[harness] {rows[-1]['backend']} {dtype} n={n} on {device}: "
                         f"{shown(rows[-1], 'ratio', 'x')}")
    return pd.DataFrame(rows)
