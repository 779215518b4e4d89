"""The bench's hand-written twins on the toy (study.bench.twins documents the roles): NumPy
underneath, so its loops are NumPy's minimal GD loop and its copy the host's."""

from __future__ import annotations

from study.bench.twins import no_loop
from study.frameworks.numpy.twin import copy_call, hand_numpy_gd

__all__ = ["copy_call", "hand_loop", "minimal_loop"]


def hand_loop(problem, feed: str, dtype: str, device: str, iterations: int) -> float:
    """Seconds per iteration of GD (1/L), the loss read to the host every iteration."""
    if feed:
        raise no_loop("toy", feed)
    return hand_numpy_gd(problem, dtype, "data", iterations)


def minimal_loop(options: dict, formulation: str):
    def loop(problem, dtype, iterations):
        return hand_numpy_gd(problem, dtype, formulation, iterations)

    return "driver vs hand-written NumPy loop", loop
