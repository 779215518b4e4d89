"""Adagrad, in Keras 3's update:

  a = a + g^2   (a starts at initial_accumulator_value)
  w = w - lr * g / sqrt(a + epsilon)
Epsilon sits inside the square root; Keras 3's default is 1e-7, TF1's AdagradOptimizer has none
(epsilon = 0, allowed since a starts above zero); `epsilon_convention` records which. Both start
a at 0.1. Defaults are Keras 3's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from datasets import values
from optimizers.base import PerCoordinate, hyperparameter, positive

EPSILONS = {"keras3": 1e-7, "tf1": 0.0}


class AdagradState(NamedTuple):
    w: object
    f: object
    g: object
    accumulator: object


class AdagradParams(NamedTuple):
    learning_rate: object
    epsilon: object


@dataclass(frozen=True)
class Adagrad(PerCoordinate):
    learning_rate: float = 0.001
    initial_accumulator_value: float = 0.1
    epsilon: float = 1e-7
    name: str = "adagrad"
    epsilons = EPSILONS
    Params, State = AdagradParams, AdagradState

    def __post_init__(self):
        positive("learning_rate", self.learning_rate, optimizer=self.name)
        positive("initial_accumulator_value", self.initial_accumulator_value,
                 optimizer=self.name)
        hyperparameter(self.name, "epsilon", self.epsilon, values.number(0))

    def slots(self, ops, w0):
        return (ops.zeros_like(w0) + self.initial_accumulator_value,)

    def update(self, objective, ops, params, state) -> AdagradState:
        g = state.g
        accumulator = state.accumulator + g * g
        w = state.w - params.learning_rate * g / ops.sqrt(accumulator + params.epsilon)
        return AdagradState(w, *objective.value_and_grad(w), accumulator)
