"""The CNN of the feed-mode study, its input, its modes, and NumPy/SciPy references.

The network of the original question: conv2d (3x3x1x6, stride 1, VALID) -> avg_pool (2x2,
stride 2, VALID) -> relu on N x 32 x 32 x 1 inputs. Each *mode* feeds the same data to the same
network a different way, on one framework: TensorFlow (TF1 graph constants, placeholder, resident
variable, eager, tf.function, XLA, and one fused convolution), JAX (a jitted function given the
NumPy array, a device-resident array, or closing over the array) and PyTorch (eager from NumPy,
eager on a resident tensor, torch.compile given the tensor or closing over it). This module
imports no framework (`measure_<framework>` does, for its own modes only).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from scipy.signal import convolve2d

IMAGE = 32          # input height and width
KERNEL = 3          # convolution kernel size (3 x 3 x 1 x CHANNELS)
CHANNELS = 6
POOL = 2            # average pool window and stride
OUT = (IMAGE - KERNEL + 1) // POOL   # 15: output height and width


@dataclass(frozen=True)
class Mode:
    api: str      # TensorFlow: tf1 (graph + session), eager, function; JAX: jit; PyTorch: eager,
    #               compile (torch.compile)
    feed: str     # how the input reaches the ops
    model: str    # conv-pool (the original network) or fused-conv (one strided convolution)
    xla: bool     # compiled by XLA (every JAX mode; torch.compile is Inductor, not XLA)
    help: str
    framework: str = "tensorflow"   # a key of optimizers.backends.registry.FRAMEWORKS


MODES = {
    "numpy": Mode("tf1", "numpy", "conv-pool", False,
                  "TF1 graph; the NumPy array passed straight into the ops (a graph constant)"),
    "constant": Mode("tf1", "constant", "conv-pool", False,
                     "TF1 graph; tf.constant(x) (a graph constant)"),
    "placeholder": Mode("tf1", "placeholder", "conv-pool", False,
                        "TF1 graph; tf.placeholder fed with feed_dict at every call"),
    "variable": Mode("tf1", "variable", "conv-pool", False,
                     "TF1 graph; a tf.Variable initialised once from a placeholder (resident)"),
    "eager-numpy": Mode("eager", "numpy", "conv-pool", False,
                        "TF2 eager ops called on the NumPy array"),
    "eager-tensor": Mode("eager", "tensor", "conv-pool", False,
                         "TF2 eager ops called on a tensor made once"),
    "function-arg": Mode("function", "argument", "conv-pool", False,
                         "tf.function with an input_signature, the data passed as a tensor"),
    "function-const": Mode("function", "captured-tensor", "conv-pool", False,
                           "tf.function closing over tf.constant(x) (captured by reference)"),
    "function-numpy": Mode("function", "numpy", "conv-pool", False,
                           "tf.function closing over the NumPy array (embedded as a constant)"),
    "function-xla": Mode("function", "argument", "conv-pool", True,
                         "function-arg with jit_compile=True (XLA)"),
    "fused": Mode("function", "argument", "fused-conv", False,
                  "function-arg computing one 4x4 stride-2 convolution (3x3 kernel * 2x2 box "
                  "of 1/4), then relu: no 30x30 intermediate"),
    "jax-numpy": Mode("jit", "numpy", "conv-pool", True,
                      "jax.jit of the network, the NumPy array passed at every call (copied to "
                      "the device each call)", "jax"),
    "jax-resident": Mode("jit", "resident", "conv-pool", True,
                         "jax.jit of the network, given an array put on the device once "
                         "(jax.device_put)", "jax"),
    "jax-constant": Mode("jit", "constant", "conv-pool", True,
                         "jax.jit of a function closing over the NumPy array (embedded in the "
                         "program as a constant)", "jax"),
    "torch-numpy": Mode("eager", "numpy", "conv-pool", False,
                        "PyTorch eager, torch.from_numpy(x).to(device) at every call", "torch"),
    "torch-resident": Mode("eager", "resident", "conv-pool", False,
                           "PyTorch eager on a tensor made once on the device", "torch"),
    "torch-compile-arg": Mode("compile", "argument", "conv-pool", False,
                              "torch.compile of the network, the resident tensor passed as an "
                              "argument", "torch"),
    "torch-compile-captured": Mode("compile", "captured-tensor", "conv-pool", False,
                                   "torch.compile of a function closing over the resident "
                                   "tensor", "torch"),
}
# where each framework's measurement lives (imported only for its modes' runs)
FRAMEWORK_MODULES = {"tensorflow": "study.feedmode.measure_tensorflow",
                     "jax": "study.feedmode.measure_jax",
                     "torch": "study.feedmode.measure_torch"}
DTYPES = ("float64", "float32")
DEVICES = ("cpu", "gpu")
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
    """The modes that run on a framework, in MODES order."""
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


def reference(x: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """conv (VALID cross-correlation, as tf.nn.conv2d) -> 2x2 average pool -> relu, in float64."""
    windows = sliding_window_view(x[..., 0].astype(np.float64), (KERNEL, KERNEL), axis=(1, 2))
    conv = np.einsum("nijab,abc->nijc", windows, kernel[:, :, 0, :].astype(np.float64))
    n, h, w, c = conv.shape
    pooled = conv[:, : h // POOL * POOL, : w // POOL * POOL]
    pooled = pooled.reshape(n, h // POOL, POOL, w // POOL, POOL, c).mean(axis=(2, 4))
    return np.maximum(pooled, 0.0)


def fused_reference(x: np.ndarray, kernel4: np.ndarray) -> np.ndarray:
    """One 4x4 stride-2 VALID convolution -> relu, in float64 (the fused mode's arithmetic)."""
    size = kernel4.shape[0]
    windows = sliding_window_view(x[..., 0].astype(np.float64), (size, size), axis=(1, 2))
    windows = windows[:, ::POOL, ::POOL]
    conv = np.einsum("nijab,abc->nijc", windows, kernel4[:, :, 0, :].astype(np.float64))
    return np.maximum(conv, 0.0)


def checksum(y: np.ndarray) -> float:
    return float(np.sum(y, dtype=np.float64))
