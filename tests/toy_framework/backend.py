"""The toy's regression backend: NumPy's under another name."""

from __future__ import annotations

from study.frameworks.numpy.backend import NumpyBackend


class ToyBackend(NumpyBackend):
    """NumPy's backend under another name (the regression study cannot tell it is NumPy), with
    an option of its own that no study knows (`chunk`, which changes nothing): the base class
    (study.frameworks.base) checks it against BACKEND and keeps it as `self.chunk`."""

    name = "toy"
