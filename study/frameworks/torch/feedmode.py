"""The PyTorch modes of the feed-mode study (imported only for their runs: it imports torch; the
modes are described in docs/feedmode.md).

Each compiled run starts cold: a fresh Inductor cache directory (TORCHINDUCTOR_CACHE_DIR, this
process only) and `torch._dynamo.reset()`, since Inductor otherwise reuses kernels an earlier
process wrote and the first call would depend on which run came first; `executable_bytes` is
what torch.compile wrote there.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from study.feedmode import model as fm
from study.feedmode.measure import Clock, Prepared
from study.feedmode.spec import Spec
from study.frameworks.torch.backend import quiet_compiler

DEVICE_NAMES = {"cpu": "cpu", "gpu": "cuda"}
CACHE_VARIABLE = "TORCHINDUCTOR_CACHE_DIR"


def network(inputs: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """conv (VALID, OIHW weight) -> 2x2 average pool -> relu on NHWC inputs, NCHW out (with one
    channel, the NHWC -> NCHW permutation is a view)."""
    conv = F.conv2d(inputs.permute(0, 3, 1, 2), weight)
    return torch.relu(F.avg_pool2d(conv, fm.POOL))


def _synchronized(y: torch.Tensor, placed: dict) -> torch.Tensor:
    """The output once its device has finished it (a call's compute ends here)."""
    placed.setdefault("device", str(y.device))
    if y.device.type == "cuda":
        torch.cuda.synchronize(y.device)
    return y


def _to_host(y: torch.Tensor) -> np.ndarray:
    """The fetch: the output on the host, NHWC."""
    return y.cpu().numpy().transpose(0, 2, 3, 1)


class FreshCache:
    """A fresh Inductor cache directory for this process, removed (and the variable put back)
    by `close`."""

    def __init__(self):
        self.previous = os.environ.get(CACHE_VARIABLE)
        self.folder = tempfile.TemporaryDirectory(prefix="feedmode-inductor-")
        os.environ[CACHE_VARIABLE] = self.folder.name

    def size(self) -> int:
        return sum(p.stat().st_size for p in Path(self.folder.name).rglob("*") if p.is_file())

    def close(self) -> None:
        if self.previous is None:
            os.environ.pop(CACHE_VARIABLE, None)
        else:
            os.environ[CACHE_VARIABLE] = self.previous
        self.folder.cleanup()


def build(spec: Spec, x: np.ndarray, kernel: np.ndarray, clock: Clock) -> Prepared:
    """The mode's callable, with its setup phases timed through `clock`."""
    mode = fm.MODES[spec.mode]
    if mode.model != "conv-pool" or spec.grappler != "default":
        raise ValueError(f"{spec.mode}: PyTorch modes compute the conv-pool network, without "
                         "grappler variants")
    device = torch.device(DEVICE_NAMES[spec.device])
    dtype = getattr(torch, spec.dtype)
    with clock.phase("session"):
        weight = torch.tensor(kernel.transpose(3, 2, 0, 1), dtype=dtype, device=device)
        torch.sum(weight).item()
    placed: dict = {}
    if mode.feed == "numpy":
        def compute():
            return _synchronized(network(torch.from_numpy(x).to(device), weight), placed)
        return Prepared(compute, _to_host, lambda: {"executable_bytes": None}, placed=placed)
    with clock.phase("data"):
        data = torch.tensor(x, dtype=dtype, device=device)
        data[:1].sum().item()   # wait for the copy
    if mode.feed == "resident":
        def compute():
            return _synchronized(network(data, weight), placed)
        return Prepared(compute, _to_host, lambda: {"executable_bytes": None}, placed=placed)
    if mode.feed not in ("argument", "captured-tensor"):
        raise ValueError(f"unknown feed '{mode.feed}'")
    cache = FreshCache()
    quiet_compiler()
    torch._dynamo.reset()
    if mode.feed == "argument":
        function, arguments = torch.compile(lambda inputs: network(inputs, weight)), (data,)
    else:
        function, arguments = torch.compile(lambda: network(data, weight)), ()

    def compute():
        return _synchronized(function(*arguments), placed)
    return Prepared(compute, _to_host, lambda: {"executable_bytes": cache.size()}, cache.close,
                    placed)


def out_of_memory(exc: BaseException) -> bool:
    return isinstance(exc, torch.OutOfMemoryError)
