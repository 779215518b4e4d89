"""One folder per framework, each with the same module names (Keras 3's backend/<name>/ shape;
docs/extending.md lists them). The studies, the bench and the engine reach a framework only
through the registry's tables, so a new one is its folder plus its name in FOLDERS (and its
pyproject extra).
"""

from __future__ import annotations

import importlib

from study.frameworks import registry

FOLDERS = ("numpy", "tensorflow", "keras", "jax", "torch", "cupy")  # in declaration order

for _folder in FOLDERS:
    importlib.import_module(f"{__name__}.{_folder}")
registry._load_plugins_or_exit()
