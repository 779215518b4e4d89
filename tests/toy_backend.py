"""A fifth framework in one file, for the seam test (tests/test_seam.py): 'toy', NumPy underneath
under its own name, with its regression backend, its line style and two feed-mode study modes;
it names no bench twin (`Backend.twin`), so the bench measures its engine and says it has no
hand-written loop and no copy measurement.
Named in CONVERGENCE_STUDY_BACKENDS, it is registered by optimizers.backends.registry in every
process that inherits the variable (the sweep's runs too); no other file names it."""

from __future__ import annotations

from optimizers.backends.numpy import NumpyBackend
from optimizers.backends.registry import DTYPES, FORMULATIONS, Backend, FeedMode, Framework

FRAMEWORK = Framework(
    "toy", "numpy", "Toy", ("numpy",), None, preload=("numpy",), gpu_nodes="", devices=("cpu",),
    feedmode="toy_backend", feedmodes={
        "toy-numpy": FeedMode("eager", "numpy", "conv-pool", False,
                              "the NumPy reference, converted at every call",
                              ("toy-resident", "time per call")),
        "toy-resident": FeedMode("eager", "resident", "conv-pool", False,
                                 "the NumPy reference on an array converted once"),
    })
BACKEND = Backend("toy", "toy", "toy_backend", "ToyBackend",
                  {"dtype": DTYPES, "formulation": FORMULATIONS, "chunk": (1, 4)},
                  files=("tests/toy_backend.py",), styles={"toy": ((0, (1, 1, 5, 1)), "*")})


class ToyBackend(NumpyBackend):
    """NumPy's backend under another name (the regression study cannot tell it is NumPy), with
    an option of its own that no study knows (`chunk`, which changes nothing)."""

    name = "toy"

    def __init__(self, dtype: str = "float64", formulation: str = "data", chunk: int = 1):
        super().__init__(dtype, formulation)
        self.chunk = chunk


def build(spec, x, kernel, clock):
    """A toy feed mode: the NumPy reference, given the array as is or converted once. (A
    plugin imports the studies inside its functions: it is loaded while the registry is, before
    the studies read their tables from it.)"""
    from study.feedmode import model as fm
    from study.feedmode.measure import Prepared

    dtype = x.dtype
    if fm.MODES[spec.mode].feed == "resident":
        with clock.phase("data"):
            x = x.copy()
    return Prepared(lambda: fm.reference(x, kernel).astype(dtype), lambda y: y,
                    lambda: {"executable_bytes": None}, placed={"device": "cpu"})


def out_of_memory(exc: BaseException) -> bool:
    return False
