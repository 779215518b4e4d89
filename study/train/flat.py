"""The loss and its gradient at a flat weight vector, through the framework the run's Keras
runs on: what our L-BFGS (optimizers/lbfgs.py, written once) needs of a model.

JAX: `jax.value_and_grad` of `model.stateless_call`, jitted, the data passed as arguments (a
closed-over array would be embedded in the program as a constant). TensorFlow: the weights
assigned, then `tf.GradientTape` in a `tf.function`. PyTorch: the weights copied into the
variables' parameters, then `torch.autograd.grad`. Each returns host float64 values, so every
call ends with the device done."""

from __future__ import annotations

import numpy as np

from study.train.frameworks import pick


def value_and_grad(model, loss, x: np.ndarray, y: np.ndarray):
    """f(w) -> (loss, gradient) for the flat float64 vector w of the trainable weights; `loss`
    is the mean loss (study.train.model.loss_object)."""
    import keras

    variables = model.trainable_variables
    shapes = [tuple(v.shape) for v in variables]
    sizes = [int(np.prod(s)) for s in shapes]
    ends = np.cumsum(sizes)
    make = pick(VALUE_AND_GRAD, keras.backend.backend(), "lbfgs's flat objective")
    return make(model, loss, x, y, shapes, ends)


def pieces(flat, shapes, ends, reshape):
    starts = [0, *ends[:-1]]
    return [reshape(flat[int(a):int(b)], shape) for a, b, shape in zip(starts, ends, shapes,
                                                                       strict=True)]


def flatten(weights) -> np.ndarray:
    return np.concatenate([np.asarray(w, np.float64).ravel() for w in weights])


def _jax(model, loss, x, y, shapes, ends):
    import jax
    import jax.numpy as jnp

    frozen = [v.value for v in model.non_trainable_variables]

    def f(flat, xs, ys):
        params = pieces(flat, shapes, ends, jnp.reshape)
        y_pred, _ = model.stateless_call(params, frozen, xs, training=True)
        return loss(ys, y_pred)

    compiled = jax.jit(jax.value_and_grad(f))
    xs, ys = jax.device_put(x), jax.device_put(y)

    def call(w):
        value, grad = compiled(jnp.asarray(w, jnp.float32), xs, ys)
        return float(value), np.asarray(grad, np.float64)

    return call


def _tensorflow(model, loss, x, y, shapes, ends):
    import tensorflow as tf

    variables = model.trainable_variables
    xs, ys = tf.constant(x), tf.constant(y)

    @tf.function
    def compiled(flat):
        for variable, value in zip(variables, pieces(flat, shapes, ends, tf.reshape),
                                   strict=True):
            variable.assign(value)
        with tf.GradientTape() as tape:
            value = loss(ys, model(xs, training=True))
        grads = tape.gradient(value, [v.value for v in variables])
        return value, tf.concat([tf.reshape(g, [-1]) for g in grads], 0)

    def call(w):
        value, grad = compiled(tf.constant(w, tf.float32))
        return float(value.numpy()), grad.numpy().astype(np.float64)

    return call


def _torch(model, loss, x, y, shapes, ends):
    import torch

    parameters = [v.value for v in model.trainable_variables]
    device = parameters[0].device  # the run's device (study.train.device)
    xs, ys = torch.as_tensor(x, device=device), torch.as_tensor(y, device=device)

    def call(w):
        flat = torch.as_tensor(w, dtype=torch.float32, device=device)
        with torch.no_grad():
            for parameter, value in zip(parameters, pieces(flat, shapes, ends, torch.reshape),
                                        strict=True):
                parameter.copy_(value)
        value = loss(ys, model(xs, training=True))
        grads = torch.autograd.grad(value, parameters)
        return float(value.detach()), torch.cat([g.reshape(-1) for g in grads]).double().cpu() \
            .numpy()

    return call


VALUE_AND_GRAD = {"jax": _jax, "tensorflow": _tensorflow, "torch": _torch}
