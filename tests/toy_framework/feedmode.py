"""The toy's feed-mode study modes (declared in FRAMEWORK.feedmodes): the NumPy reference network,
given the array as is (`toy-numpy`) or converted once, timed as `data` (`toy-resident`)."""

from __future__ import annotations

from study.feedmode import model as fm
from study.feedmode.measure import Prepared


def build(spec, x, kernel, clock):
    """The mode's callable, its setup phases timed through `clock`."""
    dtype = x.dtype
    if fm.MODES[spec.mode].feed == "resident":
        with clock.phase("data"):
            x = x.copy()
    return Prepared(lambda: fm.reference(x, kernel).astype(dtype), lambda y: y,
                    lambda: {"executable_bytes": None}, placed={"device": "cpu"})


def out_of_memory(exc: BaseException) -> bool:
    return False
