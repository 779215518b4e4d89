"""Keras 3, the train study's model library on the TensorFlow, JAX and PyTorch backends (not a
backend of its own). Keras is imported inside functions only: a process picks its backend
(KERAS_BACKEND) before the import."""

from __future__ import annotations

from optimizers import PREFIXES
from optimizers.from_file import FILE_LIBRARIES
from study.frameworks.keras.optimizers import KERAS_PREFIX, KerasOptimizer, build, keras_class
from study.frameworks.registry import Framework, register

register(None, Framework(
    "keras", "keras", "Keras", ("keras",), None, gpu_nodes="", models=f"{__name__}.train",
    examples={name: f"{__name__}.examples:{name.replace('-', '_')}"
              for name in ("digits-cnn", "eve-mlp", "mnist-convnet", "mnist-net")}))

PREFIXES[KERAS_PREFIX] = KerasOptimizer
FILE_LIBRARIES[KERAS_PREFIX] = (keras_class, build)  # a file's Keras optimizer class
