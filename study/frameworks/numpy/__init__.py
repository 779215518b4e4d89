"""NumPy, the stack every install has: the reference backend, and the ops a file's optimizer is
probed on. It has no feed modes, train adapter or optimizers of its own."""

from __future__ import annotations

from optimizers.from_file import PROBE_OPS
from study.frameworks.registry import DTYPES, FORMULATIONS, Backend, make_backend, register

register(Backend(
    "numpy", None, f"{__name__}.backend", "NumpyBackend",
    {"dtype": DTYPES, "formulation": FORMULATIONS},
    files=("study/frameworks/numpy/backend.py",),
    styles={"numpy": ("-", "o"), "numpy+gram": ((0, (8, 2, 1, 2)), "s")},
    twin=f"{__name__}.twin"))
# a file's optimizer is probed on NumPy's ops (NumPy's backend is its own ops)
PROBE_OPS.append(lambda dtype: make_backend("numpy", dtype))
