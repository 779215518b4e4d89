"""A fifth framework in one folder, the worked example of docs/extending.md and the seam test
(tests/test_seam.py): 'toy', NumPy underneath under its own name, with the shipped frameworks'
module names: `backend.py` (its regression backend, with an option of its own), `feedmode.py`
(two feed-mode study modes), `train.py` (its train-study adapter: native toy models, `toy:sgd`),
`twin.py` (the bench's hand-written loops on it). Named in CONVERGENCE_STUDY_BACKENDS (this
folder's path), it is registered by study.frameworks.registry in every process that inherits the
variable (the sweep's runs too); no file under study/ names it.

A plugin declares FRAMEWORK and BACKEND and the registry registers them; the module names below
follow the package's name (`__name__`), whatever the folder is called."""

from __future__ import annotations

from pathlib import Path

from study.frameworks.registry import DTYPES, FORMULATIONS, PER_CALL, Backend, FeedMode, Framework

HERE = Path(__file__).resolve().parent
STYLE = ((0, (1, 1, 5, 1)), "*")  # its runs' line style and marker (regression and train)

FRAMEWORK = Framework(
    "toy", "numpy", "Toy", ("numpy",), None, preload=("numpy",), gpu_nodes="", devices=("cpu",),
    feedmode=f"{__name__}.feedmode", feedmodes={
        "toy-numpy": FeedMode("eager", "numpy", "conv-pool", False,
                              "the NumPy reference, converted at every call",
                              ("toy-resident", PER_CALL)),
        "toy-resident": FeedMode("eager", "resident", "conv-pool", False,
                                 "the NumPy reference on an array converted once"),
    }, train=f"{__name__}.train")
BACKEND = Backend(
    "toy", "toy", f"{__name__}.backend", "ToyBackend",
    {"dtype": DTYPES, "formulation": FORMULATIONS, "chunk": (1, 4)},
    files=(str(HERE / "backend.py"),), styles={"toy": STYLE}, twin=f"{__name__}.twin")
