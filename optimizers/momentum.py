"""Heavy-ball momentum (Polyak), in Keras's SGD(momentum) form:

  v = beta * v - lr * g
  w = w + v
step="fixed" takes learning_rate and momentum; step="textbook" takes Polyak's optimal choices for
a quadratic from the Hessian's extreme eigenvalues mu and L (setup, one pass over X):
  lr = 4 / (sqrt(L) + sqrt(mu))^2,   beta = ((sqrt(L) - sqrt(mu)) / (sqrt(L) + sqrt(mu)))^2,
which converge like ((sqrt(kappa) - 1) / (sqrt(kappa) + 1))^k, against (1 - 1/kappa)^k for GD 1/L.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from optimizers.base import MomentumMethod, check_momentum_step


class MomentumState(NamedTuple):
    w: object
    f: object
    g: object
    v: object  # the last step w_k - w_{k-1}


class MomentumParams(NamedTuple):
    learning_rate: object
    momentum: object


@dataclass(frozen=True)
class Momentum(MomentumMethod):
    step: str = "textbook"
    learning_rate: float | None = None
    momentum: float | None = None
    name: str = "momentum"
    evaluations = {"nfev": 1, "ngev": 1, "nhvp": 0}

    def __post_init__(self):
        check_momentum_step(self.name, self.step, self.learning_rate, self.momentum)

    def hyperparameters(self) -> dict:
        return {"step": self.step, "learning_rate": self.learning_rate, "momentum": self.momentum}

    @staticmethod
    def textbook(mu: float, L: float) -> tuple[float, float]:
        """Polyak's optimal learning rate and beta for a quadratic."""
        root_L, root_mu = math.sqrt(L), math.sqrt(mu)
        return 4.0 / (root_L + root_mu) ** 2, ((root_L - root_mu) / (root_L + root_mu)) ** 2

    def setup(self, problem, objective, ops) -> MomentumParams:
        chosen = self.chosen(problem)
        return MomentumParams(ops.scalar(chosen.learning_rate), ops.scalar(chosen.beta))

    def init(self, objective, ops, params, w0) -> MomentumState:
        return MomentumState(w0, *objective.value_and_grad(w0), ops.zeros_like(w0))

    def update(self, objective, ops, params, state) -> MomentumState:
        v = params.momentum * state.v - params.learning_rate * state.g
        w = state.w + v
        return MomentumState(w, *objective.value_and_grad(w), v)
