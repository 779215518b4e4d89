"""Adadelta with TensorFlow's exact update (ApplyAdadelta, as in TF1's AdadeltaOptimizer and Keras).

  accum        = rho * accum + (1 - rho) * g^2
  update       = sqrt(accum_update + eps) / sqrt(accum + eps) * g
  accum_update = rho * accum_update + (1 - rho) * update^2
  w            = w - lr * update
Defaults are the original program's: AdadeltaOptimizer(learning_rate=1), rho 0.95 and TF1's
epsilon 1e-8 (Keras 3 uses 1e-7: that alone changes the loss after 100 steps, so it is recorded).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from optimizers.base import PerCoordinate, fraction, positive


class AdadeltaState(NamedTuple):
    w: object
    f: object
    g: object
    accum: object
    accum_update: object


class AdadeltaParams(NamedTuple):
    learning_rate: object
    rho: object
    epsilon: object


@dataclass(frozen=True)
class Adadelta(PerCoordinate):
    learning_rate: float = 1.0
    rho: float = 0.95
    epsilon: float = 1e-8
    name: str = "adadelta"
    Params, State = AdadeltaParams, AdadeltaState

    def __post_init__(self):
        positive("learning_rate", self.learning_rate, optimizer="adadelta")
        positive("epsilon", self.epsilon, optimizer="adadelta")
        fraction("rho", self.rho, optimizer="adadelta")

    def slots(self, ops, w0):
        return ops.zeros_like(w0), ops.zeros_like(w0)

    def update(self, objective, ops, params, state) -> AdadeltaState:
        rho, eps = params.rho, params.epsilon
        g = state.g
        accum = rho * state.accum + (1 - rho) * g * g
        step = ops.sqrt(state.accum_update + eps) / ops.sqrt(accum + eps) * g
        accum_update = rho * state.accum_update + (1 - rho) * step * step
        w = state.w - params.learning_rate * step
        return AdadeltaState(w, *objective.value_and_grad(w), accum, accum_update)
