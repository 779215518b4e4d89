"""Keras 3, the train study's model library on the TensorFlow, JAX and PyTorch backends (not a
backend of its own): `optimizers.py` is any Keras optimizer as `keras:<Class>`, on the
tensorflow regression backend and for the train study's Keras models."""

from __future__ import annotations

from optimizers import LIBRARIES, PREFIXES
from study.frameworks.keras.optimizers import KERAS_PREFIX, KerasOptimizer

PREFIXES[KERAS_PREFIX] = LIBRARIES[KERAS_PREFIX] = KerasOptimizer
