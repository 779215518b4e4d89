"""RMSprop, in Keras 3's update (momentum 0, not centered):

  v = rho * v + (1 - rho) * g^2
  w = w - lr * g / sqrt(v + epsilon)
Epsilon sits inside the square root, in Keras 3 and in TF1's RMSPropOptimizer alike; they differ
in its default (Keras 3 1e-7, TF1 1e-10, recorded as `epsilon_convention`) and in the start of v
(Keras 3 zeros, TF1 ones). Defaults are Keras 3's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from optimizers.base import PerCoordinate, fraction, positive

EPSILONS = {"keras3": 1e-7, "tf1": 1e-10}


class RMSpropState(NamedTuple):
    w: object
    f: object
    g: object
    v: object


class RMSpropParams(NamedTuple):
    learning_rate: object
    rho: object
    epsilon: object


@dataclass(frozen=True)
class RMSprop(PerCoordinate):
    learning_rate: float = 0.001
    rho: float = 0.9
    epsilon: float = 1e-7
    name: str = "rmsprop"
    epsilons = EPSILONS
    Params, State = RMSpropParams, RMSpropState

    def __post_init__(self):
        positive("learning_rate", self.learning_rate, optimizer=self.name)
        positive("epsilon", self.epsilon, optimizer=self.name)
        fraction("rho", self.rho, optimizer=self.name)

    def slots(self, ops, w0):
        return (ops.zeros_like(w0),)

    def update(self, objective, ops, params, state) -> RMSpropState:
        g = state.g
        v = params.rho * state.v + (1 - params.rho) * g * g
        w = state.w - params.learning_rate * g / ops.sqrt(v + params.epsilon)
        return RMSpropState(w, *objective.value_and_grad(w), v)
