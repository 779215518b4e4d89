"""The CNN of the feed-mode study, its input, its modes, and NumPy/SciPy references.

The network of the original question: conv2d (3x3x1x6, stride 1, VALID) -> avg_pool (2x2,
stride 2, VALID) -> relu on N x 32 x 32 x 1 inputs. Each *mode* feeds the same data to the same
network a different way, on one framework. The modes are declared with their framework in
study/frameworks/<name>/__init__.py, whose registry entry names the module building them
(study/frameworks/<name>/feedmode.py, which imports the framework, for its own modes only); this
module imports no framework.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from scipy.signal import convolve2d

from study.frameworks.registry import DEVICES as DEVICES  # re-exported: the study's axes
from study.frameworks.registry import DTYPES as DTYPES
from study.frameworks.registry import FRAMEWORKS, feed_modes
from study.frameworks.registry import framework as registry_framework

IMAGE = 32          # input height and width
KERNEL = 3          # convolution kernel size (3 x 3 x 1 x CHANNELS)
CHANNELS = 6
POOL = 2            # average pool window and stride
OUT = (IMAGE - KERNEL + 1) // POOL   # 15: output height and width


# every framework's modes (registry.FeedMode: api, feed, model, xla, help, the pair it is compared
# in, framework) and the module building them, from its registry entry (a module
# imported only for its own modes' runs)
MODES = feed_modes()
FRAMEWORK_MODULES = {name: f.feedmode for name, f in FRAMEWORKS.items() if f.feedmode}
# Graph optimisation variants of the TF1 modes (the ablation of the first-call cost).
GRAPPLER = {
    "default": "TensorFlow's defaults",
    "no-constant-folding": "Grappler's constant folding off (RewriterConfig.constant_folding=OFF)",
    "no-folding": "Grappler's and the classic graph optimizer's constant folding off (L0 with CSE "
                  "and function inlining kept), every other optimisation on",
    "off": "all graph optimisations off (OptimizerOptions L0, Grappler meta-optimizer disabled)",
}
TOLERANCE = {"float64": 1e-12, "float32": 1e-5}   # of the check against the NumPy reference


def modes_of(framework: str) -> list[str]:
    """The modes that run on a framework, in MODES order (an unknown framework: one line)."""
    registry_framework(framework)
    return [name for name, mode in MODES.items() if mode.framework == framework]


# --- the computation and its reference -------------------------------------------------------

def make_input(n: int, dtype: str, seed: int = 0) -> np.ndarray:
    """N x 32 x 32 x 1 uniform [0, 1); the first m rows do not depend on n (checks reuse them)."""
    x = np.random.default_rng([seed, 0]).random((n, IMAGE, IMAGE, 1))
    return x.astype(dtype, copy=False)


def make_kernel(dtype: str, seed: int = 0) -> np.ndarray:
    """The 3 x 3 x 1 x 6 convolution kernel."""
    k = np.random.default_rng([seed, 1]).standard_normal((KERNEL, KERNEL, 1, CHANNELS)) / KERNEL
    return k.astype(dtype, copy=False)


def fused_kernel(kernel: np.ndarray) -> np.ndarray:
    """The 4x4 kernel whose stride-2 convolution is avg_pool(2x2, stride 2) of the 3x3 one.

    pool[p, q] = 1/4 sum_{di,dj in {0,1}} sum_{a,b} x[2p+di+a, 2q+dj+b] k[a, b]
               = sum_{u,v in 0..3} x[2p+u, 2q+v] K[u, v],   K = k (full 2-D convolution) box/4.
    """
    box = np.full((POOL, POOL), 1.0 / (POOL * POOL))
    size = KERNEL + POOL - 1
    out = np.empty((size, size, 1, kernel.shape[-1]), dtype=np.float64)
    for c in range(kernel.shape[-1]):
        out[:, :, 0, c] = convolve2d(kernel[:, :, 0, c].astype(np.float64), box, mode="full")
    return out.astype(kernel.dtype)


def _conv(x: np.ndarray, kernel: np.ndarray, stride: int = 1) -> np.ndarray:
    """VALID cross-correlation (as tf.nn.conv2d) of one-channel inputs, in float64."""
    size = kernel.shape[0]
    windows = sliding_window_view(x[..., 0].astype(np.float64), (size, size), axis=(1, 2))
    return np.einsum("nijab,abc->nijc", windows[:, ::stride, ::stride],
                     kernel[:, :, 0, :].astype(np.float64))


def reference(x: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """conv -> 2x2 average pool -> relu, in float64."""
    conv = _conv(x, kernel)
    n, h, w, c = conv.shape
    pooled = conv[:, : h // POOL * POOL, : w // POOL * POOL]
    pooled = pooled.reshape(n, h // POOL, POOL, w // POOL, POOL, c).mean(axis=(2, 4))
    return np.maximum(pooled, 0.0)


def fused_reference(x: np.ndarray, kernel4: np.ndarray) -> np.ndarray:
    """One 4x4 stride-2 VALID convolution -> relu, in float64 (the fused mode's arithmetic)."""
    return np.maximum(_conv(x, kernel4, POOL), 0.0)


def checksum(y: np.ndarray) -> float:
    return float(np.sum(y, dtype=np.float64))
