"""The loss and its gradient at a flat weight vector: what our L-BFGS (optimizers/lbfgs.py, one
submission for every model: study.train.models.workload.LbfgsSubmission) needs of a model.
Written once per framework, in its adapter (study/frameworks/<name>/train.py:
`flat_value_and_grad`), and called alike for a Keras model (the Keras models' `value_and_grad`)
and a native one (its workload):

    make(weights, loss_at, data, device) -> f(w) -> (float loss, float64 gradient)

`weights` are the framework's trainable arrays in the flat vector's order (JAX: a pytree, whose
structure unflattens w; TensorFlow: tf.Variables; PyTorch: tensors that require grad),
`loss_at(weights, data)` the mean loss at them, `data` the full batch (x, y), `device` where
the vector goes (None: where the framework puts it, as the run's device scope says). Each
returns host float64 values, so every call ends with the device done. The pieces below split
and join flat vectors for all of them."""

from __future__ import annotations

import numpy as np

from convergence_study.errors import InputError
from study.train.frameworks import adapter, trainable


def framework_value_and_grad(framework: str):
    """The flat value_and_grad of `framework`'s adapter, or one line saying it has none."""

    try:
        return adapter(framework).flat_value_and_grad
    except InputError:
        raise InputError(f"lbfgs's flat objective has no code for the framework {framework!r} "
                         f"(has: {', '.join(trainable())})") from None


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
