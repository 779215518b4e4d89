"""The CuPy modes of the feed-mode study (imported only for their runs: it imports CuPy).

The network written once in NumPy's API (nine shifted products for the 3x3 convolution, a
reshape-mean for the pool, a maximum), run on CuPy arrays on the GPU: `cupy-numpy` copies the
NumPy array to the GPU at every call, `cupy-resident` computes on an array copied once. CuPy
compiles each elementwise kernel on its first use (cached on disk afterwards): that is in the
first call. The CUDA modules come through `study.frameworks.cupy.backend._cuda`, which the tests
replace with NumPy to run these modes on the CPU.
"""

from __future__ import annotations

import numpy as np

from study.feedmode import model as fm
from study.feedmode.measure import Clock, Prepared
from study.feedmode.spec import Spec
from study.frameworks.cupy import backend as cupy_backend


def network(xp, inputs, kernel):
    """conv (VALID cross-correlation, NHWC x HWIO) -> 2x2 average pool -> relu."""
    n, size = inputs.shape[0], fm.IMAGE - fm.KERNEL + 1
    conv = sum(inputs[:, a:a + size, b:b + size, :] * kernel[a, b, 0, :]
               for a in range(fm.KERNEL) for b in range(fm.KERNEL))
    pooled = conv.reshape(n, fm.OUT, fm.POOL, fm.OUT, fm.POOL, -1).mean(axis=(2, 4))
    return xp.maximum(pooled, 0)


def build(spec: Spec, x: np.ndarray, kernel: np.ndarray, clock: Clock) -> Prepared:
    """The mode's callable, with its setup phases timed through `clock`."""
    mode = fm.MODES[spec.mode]
    if mode.model != "conv-pool" or spec.grappler != "default" or spec.device != "gpu":
        raise ValueError(f"{spec.mode}: CuPy modes compute the conv-pool network on the GPU, "
                         "without grappler variants")
    cuda = cupy_backend._cuda()
    xp = cuda.xp
    with clock.phase("session"):
        weight = xp.asarray(kernel)
        cuda.synchronize()
    if mode.feed == "numpy":
        def source():
            return xp.asarray(x)
    elif mode.feed == "resident":
        with clock.phase("data"):
            data = xp.asarray(x)
            cuda.synchronize()

        def source():
            return data
    else:
        raise ValueError(f"unknown feed '{mode.feed}'")

    def compute():
        y = network(xp, source(), weight)
        cuda.synchronize()
        return y
    return Prepared(compute, cuda.to_host, lambda: {"executable_bytes": None},
                    placed={"device": cuda.name()})


def out_of_memory(exc: BaseException) -> bool:
    return isinstance(exc, cupy_backend._cuda().out_of_memory)
