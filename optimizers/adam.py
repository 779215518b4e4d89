"""Adam, in the update Keras 3 and TF1 both apply (ApplyAdam):

  m = m + (1 - beta_1) * (g - m);   v = v + (1 - beta_2) * (g^2 - v);   t = t + 1
  w = w - lr_t * m / (sqrt(v) + epsilon),   lr_t = lr * sqrt(1 - beta_2^t) / (1 - beta_1^t)
Epsilon sits outside the square root and is not bias-corrected (the paper's "epsilon hat" form;
the paper's Algorithm 1 adds epsilon to sqrt(v_hat) instead). bias_correction=False drops the
lr_t factor (lr_t = lr). Defaults are Keras 3's (epsilon 1e-7; TF1's AdamOptimizer uses 1e-8);
`epsilon_convention` in the record says whose default the epsilon is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from optimizers.base import PerCoordinate, flag, fraction, positive

EPSILONS = {"keras3": 1e-7, "tf1": 1e-8}


class AdamState(NamedTuple):
    w: object
    f: object
    g: object
    m: object
    v: object
    t: object  # updates done, a scalar of the run's dtype


class AdamParams(NamedTuple):
    learning_rate: object
    beta_1: object
    beta_2: object
    epsilon: object


@dataclass(frozen=True)
class Adam(PerCoordinate):
    learning_rate: float = 0.001
    beta_1: float = 0.9
    beta_2: float = 0.999
    epsilon: float = 1e-7
    bias_correction: bool = True
    name: str = "adam"
    epsilons = EPSILONS
    Params, State = AdamParams, AdamState

    def __post_init__(self):
        positive("learning_rate", self.learning_rate, optimizer=self.name)
        positive("epsilon", self.epsilon, optimizer=self.name)
        fraction("beta_1", self.beta_1, optimizer=self.name, closed_low=True)
        fraction("beta_2", self.beta_2, optimizer=self.name, closed_low=True)
        flag("bias_correction", self.bias_correction, optimizer=self.name)

    def slots(self, ops, w0):
        return ops.zeros_like(w0), ops.zeros_like(w0), ops.scalar(0)

    def update(self, objective, ops, params, state) -> AdamState:
        g, t = state.g, state.t + 1
        m = state.m + (1 - params.beta_1) * (g - state.m)
        v = state.v + (1 - params.beta_2) * (g * g - state.v)
        lr = params.learning_rate
        if self.bias_correction:
            lr = lr * ops.sqrt(1 - params.beta_2 ** t) / (1 - params.beta_1 ** t)
        w = state.w - lr * m / (ops.sqrt(v) + params.epsilon)
        return AdamState(w, *objective.value_and_grad(w), m, v, t)
