"""What every iterative optimizer provides, and the checks of its hyperparameters.

An optimizer is written once against a backend `ops` and an objective (optimizers/objective.py):
  setup(problem, objective, ops) -> params   constants it needs (step sizes), as backend arrays
  init(objective, ops, params, w0) -> state  a NamedTuple with at least w, f (loss), g (gradient)
  update(objective, ops, params, state) -> state   one iteration
The state holds the loss and gradient at its iterate, so stopping rules never re-evaluate them.
`evaluations` says what one iteration costs (loss, gradient, curvature products); `init` costs
one loss and one gradient.
"""

from __future__ import annotations

import math
from typing import Protocol

from datasets.errors import InputError


class Optimizer(Protocol):
    name: str
    evaluations: dict

    def hyperparameters(self) -> dict: ...
    def setup(self, problem, objective, ops): ...
    def init(self, objective, ops, params, w0): ...
    def update(self, objective, ops, params, state): ...


def positive(name: str, value, *, optimizer: str, allow_none: bool = False):
    """A finite number > 0, or an InputError naming the hyperparameter."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value <= 0:
        raise InputError(f"{optimizer}: {name} must be a finite number > 0, got {value!r}")
    return float(value)
