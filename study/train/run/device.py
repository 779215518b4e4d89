"""The device a train run asks for (the `device` axis: cpu or gpu) and the one it ran on.

A Keras run happens inside its framework's placement (`scope` of the Keras models' module). A
GPU asked for where the framework sees none is skipped, never run on the CPU; and after the run
the weights' device is read back, so a row never says gpu for a run that lay on the CPU
(TensorFlow places ops softly: it would fall back without a word)."""

from __future__ import annotations

from study.frameworks.registry import FRAMEWORKS
from study.train.frameworks import adapter

DEVICES = ("cpu", "gpu")


def no_gpu(backend: str) -> str:
    return FRAMEWORKS[backend].no_gpu()


def gpu_seen(backend: str) -> bool:
    """Whether the run's framework (in this process) sees a GPU."""
    return adapter(backend).gpu_seen()


def check_placed(device: str, name: str) -> None:
    on_gpu = name.lower().startswith(("gpu", "cuda"))
    if on_gpu != (device == "gpu"):
        raise RuntimeError(f"asked for the {device.upper()} but the weights lie on {name}")
