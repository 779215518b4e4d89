"""The device a train run asks for (the `device` axis: cpu or gpu) and the one it ran on.

Keras places a model's variables and tensors through each framework's own placement (the
adapter's `scope`), so the whole run (building, loading the weights, training, evaluating)
happens inside `scope`. A GPU asked for where the framework sees none is skipped, never run on
the CPU; and after the run the weights' device is read back (the adapter's `placed`), so a row
never says gpu for a run that lay on the CPU (TensorFlow places ops softly: it would fall back
without a word)."""

from __future__ import annotations

from study.frameworks.registry import FRAMEWORKS
from study.train.frameworks import adapter

DEVICES = ("cpu", "gpu")


def no_gpu(backend: str) -> str:
    return FRAMEWORKS[backend].no_gpu()


def gpu_seen(backend: str) -> bool:
    """Whether the run's framework (in this process) sees a GPU."""
    return adapter(backend).gpu_seen()


def scope(device: str):
    """Keras's placement on the framework's first device of that kind."""
    import keras

    return adapter(keras.backend.backend()).scope(device)


def placed(model) -> str:
    """Where the model's first weight lies, in the framework's own words (cpu:0, cuda:0,
    GPU:0...)."""
    import keras

    return adapter(keras.backend.backend()).placed(model.weights[0].value)


def check_placed(device: str, name: str) -> None:
    on_gpu = name.lower().startswith(("gpu", "cuda"))
    if on_gpu != (device == "gpu"):
        raise RuntimeError(f"asked for the {device.upper()} but the weights lie on {name}")
