"""The device a train run asks for (the `device` axis: cpu or gpu) and the one it ran on.

Keras places a model's variables and tensors through `keras.device`, which is each framework's
own placement (JAX: `jax.default_device`; TensorFlow: `tf.device`; PyTorch: the device Keras
creates its tensors on), so the whole run (building, loading the weights, training, evaluating)
happens inside `scope`. A GPU asked for where the framework sees none is skipped, never run on
the CPU; and after the run the weights' device is read back, so a row never says gpu for a run
that lay on the CPU (TensorFlow places ops softly: it would fall back without a word)."""

from __future__ import annotations

from study.train.frameworks import pick

DEVICES = ("cpu", "gpu")


def no_gpu(backend: str) -> str:
    from optimizers.backends.registry import FRAMEWORKS

    return f"no GPU visible to {FRAMEWORKS[backend].title}"


def gpu_seen(backend: str) -> bool:
    """Whether the run's framework (in this process) sees a GPU."""
    return pick(GPU_SEEN, backend, "the GPU check")()


def _jax_gpus() -> bool:
    import jax

    try:
        return bool(jax.devices("gpu"))
    except RuntimeError:
        return False


def _tensorflow_gpus() -> bool:
    import tensorflow as tf

    return bool(tf.config.list_physical_devices("GPU"))


def _torch_gpus() -> bool:
    import torch

    return torch.cuda.is_available()


def scope(device: str):
    """Keras's placement on the framework's first device of that kind. Not "cpu:0" for
    PyTorch: Keras moves each new parameter `.to(...)` that name, and to "cpu:0" torch copies
    a CPU parameter into a tensor that no longer collects gradients. TensorFlow: `tf.device`."""
    import keras

    return pick(SCOPES, keras.backend.backend(), "the device placement")(device)


def _tensorflow_scope(device: str):
    import tensorflow as tf

    return tf.device(f"/{device.upper()}:0")


def _keras_scope(device: str):
    import keras

    return keras.device(device)


SCOPES = {"jax": _keras_scope, "tensorflow": _tensorflow_scope, "torch": _keras_scope}


def placed(model) -> str:
    """Where the model's first weight lies, in the framework's own words (cpu:0, cuda:0,
    GPU:0...)."""
    import keras

    backend = keras.backend.backend()
    return pick(PLACED, backend, "the device check")(model.weights[0].value)


def _jax_placed(value) -> str:
    device = next(iter(value.devices()))
    return f"{device.platform}:{device.id}"


PLACED = {"jax": _jax_placed,
          "tensorflow": lambda value: value.device.rsplit("device:", 1)[-1],
          "torch": lambda value: str(value.device)}


def check_placed(device: str, name: str) -> None:
    on_gpu = name.lower().startswith(("gpu", "cuda"))
    if on_gpu != (device == "gpu"):
        raise RuntimeError(f"asked for the {device.upper()} but the weights lie on {name}")


GPU_SEEN = {"jax": _jax_gpus, "tensorflow": _tensorflow_gpus, "torch": _torch_gpus}
