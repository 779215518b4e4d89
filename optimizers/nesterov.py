"""Nesterov's accelerated gradient, in the form Keras's SGD(nesterov=True) and TF1's Momentum
optimizer use (Sutskever et al. 2013): the stored iterate is Nesterov's look-ahead point
y_k = x_k + beta (x_k - x_{k-1}), so one gradient per iteration, taken at the iterate whose loss
the stopping rules see:
  v = beta * v - lr * g(y)
  y = y + beta * v - lr * g(y)
step="fixed" takes learning_rate and momentum; step="textbook" takes Nesterov's constant-step
scheme for a mu-strongly convex, L-smooth function (setup, one pass over X):
  lr = 1 / L,   beta = (sqrt(L) - sqrt(mu)) / (sqrt(L) + sqrt(mu)),
which converges like (1 - 1/sqrt(kappa))^k.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from optimizers.base import MomentumMethod, check_momentum_step


class NesterovState(NamedTuple):
    w: object  # the look-ahead point y
    f: object
    g: object
    v: object


class NesterovParams(NamedTuple):
    learning_rate: object
    momentum: object


@dataclass(frozen=True)
class Nesterov(MomentumMethod):
    step: str = "textbook"
    learning_rate: float | None = None
    momentum: float | None = None
    name: str = "nesterov"
    evaluations = {"nfev": 1, "ngev": 1, "nhvp": 0}

    def __post_init__(self):
        check_momentum_step(self.name, self.step, self.learning_rate, self.momentum)

    def hyperparameters(self) -> dict:
        return {"step": self.step, "learning_rate": self.learning_rate, "momentum": self.momentum}

    @staticmethod
    def textbook(mu: float, L: float) -> tuple[float, float]:
        """Nesterov's constant step and momentum for a mu-strongly convex, L-smooth function."""
        root_L, root_mu = math.sqrt(L), math.sqrt(mu)
        return 1.0 / L, (root_L - root_mu) / (root_L + root_mu)

    def setup(self, problem, objective, ops) -> NesterovParams:
        chosen = self.chosen(problem)
        return NesterovParams(ops.scalar(chosen.learning_rate), ops.scalar(chosen.beta))

    def init(self, objective, ops, params, w0) -> NesterovState:
        return NesterovState(w0, *objective.value_and_grad(w0), ops.zeros_like(w0))

    def update(self, objective, ops, params, state) -> NesterovState:
        step = params.learning_rate * state.g
        v = params.momentum * state.v - step
        w = state.w + params.momentum * v - step
        return NesterovState(w, *objective.value_and_grad(w), v)
