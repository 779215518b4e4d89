"""The TensorFlow backend's hand-written twins (see study.bench.twins): its GD loops (one
`tf.while_loop` in a `tf.function`, optionally XLA-compiled; a `tf.function` step called from
Python; the original TF1 program), and the copy on the device."""

from __future__ import annotations

import time

import numpy as np

from study.bench.twins import gd_step, no_loop, timed_steps


def hand_tf_gd(problem, dtype: str, iterations: int, *, xla: bool, device: str = "cpu") -> float:
    """Seconds per iteration of a minimal GD `tf.while_loop` in one `tf.function` (the whole loop
    XLA-compiled when `xla`), data resident on the device in the layout the TensorFlow backend
    uses for this dtype and XLA setting, traced and compiled by a one-iteration warm-up call
    outside the clock; the clock stops after the result is on the host."""
    import tensorflow as tf

    from study.frameworks.tensorflow.backend import data_layout  # heavy: TensorFlow

    columns = data_layout(dtype, xla) == "columns"  # X stored transposed (d x n)

    @tf.function(jit_compile=xla)
    def loop(X, y, w, step, count):
        inv_n = tf.cast(1.0 / tf.cast(tf.shape(y)[0], tf.float64), X.dtype)

        def evaluate(w):
            r = tf.linalg.matmul(X, w, transpose_a=columns) - y
            return tf.reduce_sum(r * r) * inv_n, (2 * inv_n) * tf.linalg.matmul(
                X, r, transpose_a=not columns)

        def body(i, w, f, g):
            w = w - step * g
            f, g = evaluate(w)
            return i + 1, w, f, g

        f, g = evaluate(w)
        _, w, f, _ = tf.while_loop(lambda i, *_: i < count, body, (tf.constant(0), w, f, g))
        return w, f

    with tf.device("/GPU:0" if device == "gpu" else "/CPU:0"):
        X = np.asarray(problem.X, dtype=dtype)
        X = tf.identity(tf.constant(np.ascontiguousarray(X.T) if columns else X))
        y = tf.identity(tf.constant(np.asarray(problem.y, dtype=dtype)))
        w = tf.zeros((problem.d, problem.y.shape[1]), dtype=X.dtype)
        step = tf.constant(gd_step(problem), dtype=X.dtype)
        loop(X, y, w, step, tf.constant(1))[1].numpy()  # trace and compile
        start = time.perf_counter()
        loop(X, y, w, step, tf.constant(iterations))[1].numpy()
        return (time.perf_counter() - start) / iterations


def hand_tf_stepped(problem, feed: str, dtype: str, device: str, iterations: int) -> float:
    """A `tf.function` step (fixed input signature, traced off the clock) called from a Python
    loop with `f.numpy()` every iteration; feed hands it the NumPy arrays at every call,
    resident tensors made once. X in the layout our backend uses for this dtype."""
    import tensorflow as tf

    from study.frameworks.tensorflow.backend import data_layout  # heavy: TensorFlow

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
        return timed_steps(first, update, lambda: (X, y), w0, iterations,
                           read=lambda f: f.numpy())


def hand_tf1(problem, dtype: str, device: str, iterations: int) -> float:
    """The original TF1 program: a graph with two placeholders, the weights in a variable,
    `GradientDescentOptimizer(1/L).minimize(loss)`, and one `sess.run([train, loss])` per
    iteration fed the pandas frames' columns by name (converted to the dtype at every call), the
    frames and names as our tf1 feed makes them; the graph's first run (pruning, the executor)
    off the clock."""
    import tensorflow as tf

    from study.frameworks.tensorflow.tf1 import frames  # heavy: TensorFlow

    tf1 = tf.compat.v1
    (features, feature_cols), (labels, label_cols) = frames(problem)
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
        session.run([train, loss], feed_dict={X: features[feature_cols],
                                              y: labels[label_cols]})
        session.run(initialize)
        start = time.perf_counter()
        for _ in range(iterations):
            _, f = session.run([train, loss], feed_dict={X: features[feature_cols],
                                                         y: labels[label_cols]})
            float(f)
        return (time.perf_counter() - start) / iterations


def hand_loop(problem, feed: str, dtype: str, device: str, iterations: int) -> float:
    if feed == "fused":
        return hand_tf_gd(problem, dtype, iterations, xla=False, device=device)
    if feed in ("feed", "resident"):
        return hand_tf_stepped(problem, feed, dtype, device, iterations)
    if feed == "tf1":
        return hand_tf1(problem, dtype, device, iterations)
    raise no_loop("tensorflow", feed)


def minimal_loop(options: dict, formulation: str):
    if options.get("feed") != "fused" or formulation != "data":
        return None
    xla = bool(options.get("xla"))

    def loop(problem, dtype, iterations):
        return hand_tf_gd(problem, dtype, iterations, xla=xla)

    return "driver vs hand-written tf.while_loop" + (" (XLA)" if xla else ""), loop


def copy_call(shape: tuple, device: str):
    import tensorflow as tf

    with tf.device("/GPU:0" if device == "gpu" else "/CPU:0"):
        x = tf.ones(shape, tf.float64)
        scaled = tf.function(lambda x, s: (x * s)[-1])  # the fetch waits for the product

    def call():
        scaled(x, tf.constant(1.0, tf.float64)).numpy()
    return call
