"""NumPy, the stack every install has: `backend.py` runs the regression study's loop on the
host (the reference the other backends are checked against), `twin.py` is the bench's
hand-written loop. NumPy has no feed modes, train adapter or optimizers of its own."""

from __future__ import annotations

from study.frameworks.registry import DTYPES, FORMULATIONS, Backend, register

register(Backend(
    "numpy", None, f"{__name__}.backend", "NumpyBackend",
    {"dtype": DTYPES, "formulation": FORMULATIONS},
    files=("study/frameworks/numpy/backend.py",),
    styles={"numpy": ("-", "o"), "numpy+gram": ((0, (8, 2, 1, 2)), "s")},
    twin=f"{__name__}.twin"))
