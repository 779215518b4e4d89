"""The shipped examples as native models (each in its framework's folder), their parameters in
Keras's layout and order, so that one weights.npz gives the Keras, PyTorch and JAX runs one
instance; without it each initializes as Keras does by default. `mnist-net-torch` is the other
way round: PyTorch's MNIST example as written upstream, its Keras twin in PyTorch's layout.
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
