"""Momentum, heavy-ball (Polyak) or Nesterov's, in Keras's SGD(momentum, nesterov) form: one
update with a flag.

Heavy ball:  v = beta * v - lr * g(w);  w = w + v
Nesterov (Keras's and TF1's form, Sutskever et al. 2013): the stored iterate is the look-ahead
point y, so one gradient per iteration, at the iterate whose loss the stopping rules see:
             v = beta * v - lr * g(y);  y = y + beta * v - lr * g(y)
step="fixed" takes learning_rate and momentum; step="textbook" the optimal constants for a
quadratic from the Hessian's mu and L (one pass over X in setup):
  heavy ball: lr = 4 / (sqrt(L) + sqrt(mu))^2, beta = ((sqrt(L) - sqrt(mu)) / (sqrt(L) +
              sqrt(mu)))^2, converging like ((sqrt(kappa) - 1) / (sqrt(kappa) + 1))^k;
  Nesterov:   lr = 1 / L, beta = (sqrt(L) - sqrt(mu)) / (sqrt(L) + sqrt(mu)),
              converging like (1 - 1/sqrt(kappa))^k, against (1 - 1/kappa)^k for GD 1/L.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, NamedTuple

from optimizers.base import MomentumMethod, check_momentum_step


class MomentumState(NamedTuple):
    w: object  # Nesterov: the look-ahead point y
    f: object
    g: object
    v: object  # the last step


class MomentumParams(NamedTuple):
    learning_rate: object
    momentum: object


@dataclass(frozen=True)
class Momentum(MomentumMethod):
    step: str = "textbook"
    learning_rate: float | None = None
    momentum: float | None = None
    name: str = "momentum"
    straight_line = True
    nesterov: ClassVar[bool] = False  # a class constant, so the hyperparameters (and run ids) stay
    evaluations = {"nfev": 1, "ngev": 1, "nhvp": 0}

    def __post_init__(self):
        check_momentum_step(self.name, self.step, self.learning_rate, self.momentum)

    def textbook(self, mu: float, L: float) -> tuple[float, float]:
        """The optimal constant learning rate and beta (see the module's docstring)."""
        root_L, root_mu = math.sqrt(L), math.sqrt(mu)
        if self.nesterov:
            return 1.0 / L, (root_L - root_mu) / (root_L + root_mu)
        return 4.0 / (root_L + root_mu) ** 2, ((root_L - root_mu) / (root_L + root_mu)) ** 2

    def setup(self, problem, objective, ops) -> MomentumParams:
        chosen = self.chosen(problem)
        return MomentumParams(ops.scalar(chosen.learning_rate), ops.scalar(chosen.beta))

    def init(self, objective, ops, params, w0) -> MomentumState:
        return MomentumState(w0, *objective.value_and_grad(w0), ops.zeros_like(w0))

    def update(self, objective, ops, params, state) -> MomentumState:
        step = params.learning_rate * state.g
        v = params.momentum * state.v - step
        w = state.w + (params.momentum * v - step if self.nesterov else v)
        return MomentumState(w, *objective.value_and_grad(w), v)


@dataclass(frozen=True)
class Nesterov(Momentum):
    """Momentum with nesterov=True, under its own name."""
    name: str = "nesterov"
    nesterov: ClassVar[bool] = True
