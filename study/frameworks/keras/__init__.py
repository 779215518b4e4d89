"""Keras 3, the train study's model library on the TensorFlow, JAX and PyTorch backends (not a
backend of its own): `optimizers.py` is any Keras optimizer as `keras:<Class>`, on the
tensorflow regression backend and for the train study's Keras models, and a file's
Keras optimizer class (`path.py:Name`) on both."""

from __future__ import annotations

from optimizers import LIBRARIES, PREFIXES
from optimizers.from_file import FILE_LIBRARIES
from study.frameworks.keras.optimizers import KERAS_PREFIX, KerasOptimizer, build, keras_class

PREFIXES[KERAS_PREFIX] = LIBRARIES[KERAS_PREFIX] = KerasOptimizer
FILE_LIBRARIES[KERAS_PREFIX] = (keras_class, build)  # a file's Keras optimizer class
