"""One folder per framework, each with the same module names (Keras 3's backend/<name>/ shape).

A framework's folder holds everything that names it: `__init__.py` declares it (its `Framework`
and `Backend` entries in study.frameworks.registry, its own optimizers' names), `backend.py` its
array ops and compiled loops for the regression study, `optimizers.py` its library's optimizers
(optax, torch.optim, TensorFlow Probability, Keras), `feedmode.py` the feed-mode study's network
and feeds on it, `train.py` the train study's adapter, `twin.py` the bench's hand-written loops,
`examples.py` its shipped native models. `base.py` is what every backend shares. The studies,
the bench and the engine reach a framework only through the registry's tables, so a new one is
its folder plus its name in FOLDERS (and its pyproject extra).
"""

from __future__ import annotations

import importlib

from study.frameworks import registry

FOLDERS = ("numpy", "tensorflow", "keras", "jax", "torch", "cupy")  # in declaration order

for _folder in FOLDERS:
    importlib.import_module(f"{__name__}.{_folder}")
registry._load_plugins_or_exit()
