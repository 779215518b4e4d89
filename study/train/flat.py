"""The loss and its gradient at a flat weight vector: what our L-BFGS (optimizers/lbfgs.py, one
submission for every model: study.train.workload.LbfgsSubmission) needs of a model. Written
once per framework, named by the registry's entry (Framework.flat, 'module:function') and
called alike for a Keras model (`value_and_grad` below) and a native one (study.train.workload):

    make(weights, loss_at, data, device) -> f(w) -> (float loss, float64 gradient)

`weights` are the framework's trainable arrays in the flat vector's order (JAX: a pytree, whose
structure unflattens w; TensorFlow: tf.Variables; PyTorch: tensors that require grad),
`loss_at(weights, data)` the mean loss at them, `data` the full batch (x, y), `device` where
the vector goes (None: where the framework puts it, as the run's device scope says).
JAX: `jax.value_and_grad` of loss_at at the unflattened w, jitted, the data passed as arguments
(a closed-over array would be embedded in the program as a constant). TensorFlow: w assigned
into the variables, then `tf.GradientTape` in a `tf.function`. PyTorch: w copied into the
tensors, then `torch.autograd.grad`. Each returns host float64 values, so every call ends with
the device done."""

from __future__ import annotations

import importlib

import numpy as np

from datasets.errors import InputError
from optimizers.backends.registry import FRAMEWORKS as REGISTRY


def value_and_grad(model, loss, x: np.ndarray, y: np.ndarray):
    """f(w) -> (loss, gradient) for the flat float64 vector w of a Keras model's trainable
    weights; `loss` is the mean loss (study.train.model.loss_object). The loss at given weights
    is `model.stateless_call` on every framework (JAX cannot assign a traced value)."""
    import keras

    frozen = [v.value for v in model.non_trainable_variables]

    def loss_at(weights, data):
        xs, ys = data
        y_pred, _ = model.stateless_call(weights, frozen, xs, training=True)
        return loss(ys, y_pred)

    make = framework_value_and_grad(keras.backend.backend())
    return make([v.value for v in model.trainable_variables], loss_at, (x, y), None)


def framework_value_and_grad(framework: str):
    """The registry's flat value_and_grad of `framework`, or one line saying it has none."""
    entry = REGISTRY.get(framework)
    if entry is None or not entry.flat:
        has = ", ".join(name for name, f in REGISTRY.items() if f.flat)
        raise InputError(f"lbfgs's flat objective has no code for the framework {framework!r} "
                         f"(has: {has})")
    module, _, name = entry.flat.partition(":")
    return getattr(importlib.import_module(module), name)


def pieces(flat, shapes, ends, reshape):
    starts = [0, *ends[:-1]]
    return [reshape(flat[int(a):int(b)], shape) for a, b, shape in zip(starts, ends, shapes,
                                                                       strict=True)]


def flatten(weights) -> np.ndarray:
    return np.concatenate([np.asarray(w, np.float64).ravel() for w in weights])


def layout(weights) -> tuple[list[tuple], np.ndarray]:
    """(shapes, ends): each array's shape and where it ends in the flat vector."""
    shapes = [tuple(w.shape) for w in weights]
    return shapes, np.cumsum([int(np.prod(s)) for s in shapes])


def _jax(weights, loss_at, data, device=None):
    import jax
    import jax.numpy as jnp
    from jax.flatten_util import ravel_pytree

    _, unravel = ravel_pytree(weights)
    compiled = jax.jit(jax.value_and_grad(lambda flat, data: loss_at(unravel(flat), data)))
    data = jax.device_put(data, device)

    def call(w):
        value, grad = compiled(jax.device_put(jnp.asarray(w, jnp.float32), device), data)
        return float(value), np.asarray(grad, np.float64)

    return call


def _tensorflow(weights, loss_at, data, device=None):
    import tensorflow as tf

    shapes, ends = layout(weights)
    data = tuple(tf.constant(a) for a in data)  # placed by the run's device scope

    @tf.function
    def compiled(flat):
        for variable, value in zip(weights, pieces(flat, shapes, ends, tf.reshape),
                                   strict=True):
            variable.assign(value)
        with tf.GradientTape() as tape:
            value = loss_at(weights, data)
        grads = tape.gradient(value, weights)
        return value, tf.concat([tf.reshape(g, [-1]) for g in grads], 0)

    def call(w):
        value, grad = compiled(tf.constant(w, tf.float32))
        return float(value.numpy()), grad.numpy().astype(np.float64)

    return call


def _torch(weights, loss_at, data, device=None):
    import torch

    device = weights[0].device if device is None else device
    shapes, ends = layout(weights)
    data = tuple(torch.as_tensor(a, device=device) for a in data)

    def call(w):
        flat = torch.as_tensor(w, dtype=torch.float32, device=device)
        with torch.no_grad():
            for weight, value in zip(weights, pieces(flat, shapes, ends, torch.reshape),
                                     strict=True):
                weight.copy_(value)
        value = loss_at(weights, data)
        grads = torch.autograd.grad(value, weights)
        return float(value.detach()), torch.cat([g.reshape(-1) for g in grads]).double().cpu() \
            .numpy()

    return call
