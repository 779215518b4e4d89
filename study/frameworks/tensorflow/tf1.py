"""The original TensorFlow 1 program's shape, through `tf.compat.v1`, on the common run record.

A graph of its own with two placeholders, the weights in a variable, the loss and a TF1 optimizer
class (`AdadeltaOptimizer`, or `GradientDescentOptimizer` with the step the GD optimizer's setup
resolves); every iteration is one `sess.run` feeding the columns of a pandas frame, converted to
the run's dtype each time, as the original did (`--dtype float32 --init normal` reproduces its
float32 and random start). One `sess.run` evaluates the loss and gradient at the current weights
and applies the update, so the host loop sees iterate k from the (k+1)-th call, and the update
that call also applies is not observed when a rule fires. Nothing global changes.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import tensorflow as tf

from convergence_study.errors import InputError
from optimizers.driver import host_loop
from optimizers.result import Outcome, Stopwatch
from study.frameworks.numpy.backend import NumpyBackend

OPTIMIZERS = ("gd", "adadelta")


def _columns(names, width: int) -> list:
    names = list(names)
    return names if len(names) == width and len(set(names)) == width else list(range(width))


def frames(problem) -> tuple:
    """(features frame, its column names), (labels frame, its names): the problem's own names
    where it has distinct ones (the original program selected its columns by name)."""
    feature_cols = _columns(problem.feature_names, problem.d)
    label_cols = _columns(problem.label_names, problem.k)
    return ((pd.DataFrame(problem.X, columns=feature_cols), feature_cols),
            (pd.DataFrame(problem.y, columns=label_cols), label_cols))


def _tf1_optimizer(problem, optimizer, dtype):
    """The TF1 optimizer class; its hyperparameters as tensors of the run's dtype (given Python
    floats, TF1 rounds them to float32 first, which changes a float64 run by ~1e-8)."""
    tf1 = tf.compat.v1

    def constant(value):
        return tf.constant(value, dtype=tf.as_dtype(dtype))

    if optimizer.name == "adadelta":
        return tf1.train.AdadeltaOptimizer(constant(optimizer.learning_rate),
                                           constant(optimizer.rho), constant(optimizer.epsilon))
    if optimizer.step == "diag":
        raise InputError("feed 'tf1': gd step 'diag' is the original NumPy program's update, not "
                         "a TF1 optimizer; use step '1/L' or 'fixed'")
    params = optimizer.setup(problem, None, NumpyBackend(str(dtype)))  # the step size only
    return tf1.train.GradientDescentOptimizer(constant(float(params.scale)))


def minimize_tf1(backend, problem, optimizer, rules, w0) -> Outcome:
    if optimizer.name not in OPTIMIZERS:
        raise InputError(f"feed 'tf1' runs the original program's optimizers only "
                         f"({', '.join(OPTIMIZERS)}), not '{optimizer.name}'")
    if problem.objective != "least-squares" or problem.lam:
        raise InputError("feed 'tf1' runs the original least-squares program: no logistic "
                         "regression, no ridge term (lam)")
    if optimizer.name == "gd" and optimizer.step == "armijo":
        raise InputError("feed 'tf1': gd step 'armijo' is not a TF1 optimizer; use '1/L' or "
                         "'fixed'")
    tf1 = tf.compat.v1
    dtype = backend.dtype
    setup_clock = Stopwatch()
    (features_frame, feature_cols), (labels_frame, label_cols) = frames(problem)
    graph = tf.Graph()
    with graph.as_default(), graph.device(backend.placement):
        tf_dtype = tf.as_dtype(dtype)
        features = tf1.placeholder(tf_dtype, shape=(None, problem.d), name="features")
        labels = tf1.placeholder(tf_dtype, shape=(None, problem.k), name="labels")
        weights = tf1.Variable(np.asarray(w0, dtype=dtype), name="weights", use_resource=True)
        current = weights.value()  # the one read: loss, gradient and the fetched iterate
        residual = tf.linalg.matmul(features, current) - labels
        rows = tf.cast(tf.shape(features)[0], tf_dtype)
        loss = tf.reduce_sum(tf.square(residual)) / rows  # (1/n)||Xw - y||^2, as every backend
        train = _tf1_optimizer(problem, optimizer, dtype)
        ((gradient, _),) = train.compute_gradients(loss, var_list=[weights])
        apply = train.apply_gradients([(gradient, weights)])
        grad_norm = tf.norm(gradient)
        initialize = tf1.global_variables_initializer()
    graph.finalize()
    with tf1.Session(graph=graph) as session:
        fetches = [apply, loss, grad_norm, current]

        def run_step():
            _, f, g, w = session.run(fetches, feed_dict={
                features: features_frame[feature_cols], labels: labels_frame[label_cols]})
            return float(f), float(g), w

        session.run(initialize)
        run_step()  # warm-up: graph pruning and the executor are built here, as setup
        session.run(initialize)  # back to the start point, optimizer slots zeroed
        setup_seconds = setup_clock.elapsed()
        state, *loop = host_loop(problem, rules, init=run_step, step=lambda state: run_step(),
                                 observe=lambda state: state[:2])
    return backend.outcome(np.asarray(state[2]), loop, setup_seconds,
                           backend.short_device(weights.device), device_name=weights.device)
