"""The shipped examples as native models, beside the Keras ones (study/frameworks/keras/):
the same architectures, written in PyTorch, as a pure-JAX pair and as an Equinox module (each in
its framework's folder, study/frameworks/<name>/examples.py), with their parameters in Keras's
layout and order (a conv kernel HWIO, a dense kernel (in, out), kernel then bias per layer), so
that one `.npz` of w0, w1, ... (Keras's get_weights order, the train study's weights.npz) gives all
of them the same initial weights and the same outputs, and the Keras, PyTorch and JAX runs can be
compared on one instance. Here: the shapes they share and the table of them by name.

Without an .npz each initializes as Keras does by default (Glorot-uniform kernels, zero
biases), drawn by its own framework's generator under the run's seed.

Each function takes (input_shape, outputs, seed=0), as a user's `file.py:function` does.

`mnist-net-torch` is the other way round: PyTorch's MNIST example as written upstream
(channels-first rows, its own parameters), and its Keras twin
(mnist-net) is written with PyTorch's layout, so the twin's draw
loads into it all the same.
"""

from __future__ import annotations

import math

from study.frameworks.registry import FRAMEWORKS
from study.train.models.examples import Examples

# --- digits-cnn: conv 3x3x1x6 VALID -> avg_pool 2x2 -> relu -> flatten (h, w, c) -> dense softmax


def _glorot_limit(shape) -> float:
    receptive = math.prod(shape[:-2]) if len(shape) > 2 else 1
    fan_in, fan_out = shape[-2] * receptive, shape[-1] * receptive
    return math.sqrt(6.0 / (fan_in + fan_out))


def _cnn_shapes(input_shape, outputs):
    height, width, channels = input_shape
    pooled = ((height - 2) // 2) * ((width - 2) // 2) * 6
    return [(3, 3, channels, 6), (6,), (pooled, outputs), (outputs,)]


def _mlp_shapes(input_shape, outputs):
    (features,) = input_shape
    return [(features, 32), (32,), (32, 32), (32,), (32, outputs), (outputs,)]


NATIVE_MODELS = Examples(native=True)
# each shipped native example's framework (the command and config can pick the backend from the
# name, before anything is imported)
FRAMEWORK_OF = {name: f.name for f in FRAMEWORKS.values() if f.train for name in f.examples}
