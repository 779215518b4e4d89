"""The loss and its gradient at a flat weight vector: what our L-BFGS needs of a model. Written
once per framework (its adapter's `flat_value_and_grad`), for Keras and native models alike:

    make(weights, loss_at, data, device) -> f(w) -> (float loss, float64 gradient)

`data` is the full batch (x, y), `device` where the vector goes (None: the run's device scope).
The pieces below split and join flat vectors."""

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
