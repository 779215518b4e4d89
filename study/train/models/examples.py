"""The shipped examples, which need no download: the models by name, each in its framework's
folder (`Framework.examples`), and the data sets, each returning (x, y) (the split is
study.train.models.data's).

The native examples have their parameters in Keras's layout and order, so that one weights.npz
gives the Keras, PyTorch and JAX runs one instance; without it each initializes as Keras does by
default. `mnist-net-torch` is the other way round: PyTorch's MNIST example as written upstream,
its Keras twin in PyTorch's layout.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Mapping

import numpy as np

from study.frameworks.registry import FRAMEWORKS


class Examples(Mapping):
    """Example name -> its function, imported from its framework's folder only when asked for."""

    def __init__(self, native: bool):
        self._where = {name: where for f in FRAMEWORKS.values() if bool(f.train) == native
                       for name, where in f.examples.items()}

    def __getitem__(self, name: str):
        module, function = self._where[name].split(":")
        return getattr(importlib.import_module(module), function)

    def __iter__(self):
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)


def digits(one_hot: bool = False, **_) -> tuple[np.ndarray, np.ndarray]:
    """1797 images of 8x8 pixels (0..16, scaled to [0, 1]) with their digit 0..9 (one-hot rows
    of 10 with `one_hot`, for categorical_crossentropy)."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = (bunch.images / 16.0).astype(np.float32)[..., None]
    return x, labels(bunch.target, one_hot)


def digits28(one_hot: bool = False, **_) -> tuple[np.ndarray, np.ndarray]:
    """The same 1797 digit images upscaled (bilinear) to MNIST's 28x28, channels last, so MNIST's
    architectures run unchanged and nothing is downloaded."""
    from scipy.ndimage import zoom
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = zoom(bunch.images / 16.0, (1, 3.5, 3.5), order=1, grid_mode=True, mode="nearest")
    return np.clip(x, 0.0, 1.0).astype(np.float32)[..., None], labels(bunch.target, one_hot)


def labels(target: np.ndarray, one_hot: bool) -> np.ndarray:
    target = target.astype(np.int64)
    return np.eye(int(target.max()) + 1, dtype=np.float32)[target] if one_hot else target


def eve_late_week(rows: int = 20000, seed: int = 0, **_) -> tuple[np.ndarray, np.ndarray]:
    """The eve stand-in's four counts, log1p-scaled, and late_week = hour_of_week >= 84 as 0/1
    (datasets.eve's binary label)."""
    from datasets.eve import FEATURES, LABEL, eve_frame  # heavy: this example only

    frame = eve_frame(rows, seed)
    x = np.log1p(frame[list(FEATURES)].to_numpy(np.float64)).astype(np.float32)
    return x, (frame[LABEL].to_numpy() >= 84).astype(np.int64)


MODELS = Examples(native=False)  # the Keras models
NATIVE_MODELS = Examples(native=True)
DATA = {"digits": digits, "digits28": digits28, "eve-late-week": eve_late_week}
DATA_PARAMS = {"digits": ("one_hot",), "digits28": ("one_hot",), "eve-late-week": ("rows", "seed")}


# the native examples' parameter shapes and Keras's default initializer's bound; digits-cnn:
# conv 3x3x1x6 VALID -> avg_pool 2x2 -> relu -> flatten (h, w, c) -> dense softmax
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


# each shipped native example's framework (the command and config can pick the backend from the
# name, before anything is imported)
FRAMEWORK_OF = {name: f.name for f in FRAMEWORKS.values() if f.train for name in f.examples}
