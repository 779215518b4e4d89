"""A warm process for one framework's train runs: KERAS_BACKEND set, then Keras imported.

Keras picks its backend once, when it is imported, from KERAS_BACKEND; so a process serves one
framework, and the variable is set before the import (a process that already holds Keras on
another backend is refused). The plugin's `preload` names its framework's adapter's `warm`
(`module:warm`, called by the warm process), which calls `prepare`. Importing Keras initialises
no device (forking afterwards is safe)."""

from __future__ import annotations

import os
import sys


def prepare(framework: str) -> None:
    held = sys.modules.get("keras")
    if held is not None and held.backend.backend() != framework:
        raise RuntimeError(f"this process already imported Keras on {held.backend.backend()}")
    os.environ["KERAS_BACKEND"] = framework
    import keras  # noqa: F401 -- the import is the point

    import study.train.run.measure  # noqa: F401 -- and the measuring code, once
