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

from convergence_study.errors import InputError
from optimizers.base import Optimizer, Settling, fraction, positive

STEPS = ("textbook", "fixed")
# The stall rule waits this many time constants (MomentumStep.settling).
SETTLING_TIME_CONSTANTS = 10
# A wait that never ends (beta 1: the momentum never decays), exact in every loop's float64.
MAX_PATIENCE = 2**53


class MomentumState(NamedTuple):
    w: object  # Nesterov: the look-ahead point y
    f: object
    g: object
    v: object  # the last step


class MomentumParams(NamedTuple):
    learning_rate: object
    momentum: object


def hessian_bounds(problem, optimizer: str) -> tuple[float, float]:
    """(mu, L) of the Hessian as the methods iterate on it (X as given: kappa_raw), one pass to
    form X^T X (timed as setup); the textbook step needs mu > 0. X^T X cannot resolve mu below
    about 1e-16 L, so for least squares mu is L / kappa_raw from the reference's QR (0 where
    that found X rank deficient)."""
    mu, L = problem.curvature_bounds()
    if problem.objective == "least-squares":
        reference = problem.reference  # cached: solved before any clock
        mu = L / reference.kappa_raw if reference.rank == problem.d else 0.0
    if not mu > 0:
        raise InputError(f"{optimizer}: the textbook parameters need a strongly convex problem "
                         f"(smallest Hessian eigenvalue {mu:.3g}); give step='fixed'")
    return mu, L


class MomentumStep(NamedTuple):
    """The learning rate and beta a momentum method runs with, and where they came from."""

    learning_rate: float
    beta: float
    source: str

    def settling(self, optimizer: str) -> Settling:
        """On a quadratic each eigenmode's error shrinks by at best about sqrt(beta) per
        iteration (the roots of its two-term recurrence multiply to beta, or beta (1 - lr lambda)
        for Nesterov): time constant T = 1 / (1 - sqrt(beta)), within a few of which the loss may
        rise far above its best and come back. On eve the longest wait for a new best was 7.4 T
        (textbook heavy ball) and 0.2 to 1.2 T (Nesterov); the stall rule waits
        SETTLING_TIME_CONSTANTS T."""
        gap = 1.0 - math.sqrt(self.beta)  # 0 where a textbook beta rounds to 1 (kappa > 1e32)
        patience = (min(math.ceil(SETTLING_TIME_CONSTANTS / gap), MAX_PATIENCE) if gap > 0
                    else MAX_PATIENCE)
        why = (f"{SETTLING_TIME_CONSTANTS} time constants 1/(1 - sqrt(beta)) of {optimizer} "
               f"with beta {self.beta:.6g}, whose loss is not monotone")
        return Settling(patience, why,
                        {"momentum_beta": self.beta, "momentum_learning_rate": self.learning_rate,
                         "momentum_source": self.source})


@dataclass(frozen=True)
class Momentum(Optimizer):
    step: str = "textbook"
    learning_rate: float | None = None
    momentum: float | None = None
    name: str = "momentum"
    straight_line = True
    nesterov: ClassVar[bool] = False  # a class constant, so the hyperparameters (and run ids) stay
    evaluations = {"nfev": 1, "ngev": 1, "nhvp": 0}

    def __post_init__(self):
        """step 'fixed' needs both values, 'textbook' chooses both."""
        if self.step not in STEPS:
            raise InputError(f"{self.name}: unknown step '{self.step}'; allowed: "
                             f"{', '.join(STEPS)}")
        if self.step == "fixed":
            if self.learning_rate is None or self.momentum is None:
                raise InputError(f"{self.name}: step='fixed' needs a learning_rate and a "
                                 "momentum")
            positive("learning_rate", self.learning_rate, optimizer=self.name)
            fraction("momentum", self.momentum, optimizer=self.name, closed_low=True)
        elif self.learning_rate is not None or self.momentum is not None:
            raise InputError(f"{self.name}: step='textbook' chooses its own learning_rate and "
                             "momentum from L and mu; give them only with step='fixed'")

    def textbook(self, mu: float, L: float) -> tuple[float, float]:
        """The optimal constant learning rate and beta (see the module's docstring)."""
        root_L, root_mu = math.sqrt(L), math.sqrt(mu)
        if self.nesterov:
            return 1.0 / L, (root_L - root_mu) / (root_L + root_mu)
        return 4.0 / (root_L + root_mu) ** 2, ((root_L - root_mu) / (root_L + root_mu)) ** 2

    def chosen(self, problem) -> MomentumStep:
        """The learning rate and beta of a run on `problem`, on the host."""
        if self.step == "fixed":
            return MomentumStep(self.learning_rate, self.momentum, "given (step 'fixed')")
        mu, L = hessian_bounds(problem, self.name)
        learning_rate, beta = self.textbook(mu, L)
        hessian = "2/n X^T X + lam I" if problem.lam else "2/n X^T X"
        if problem.objective == "logistic":
            hessian = "the logistic Hessian's bounds lam and lambda_max(X^T X) / 4n + lam"
        return MomentumStep(learning_rate, beta, f"textbook: mu {mu:.4g} and L {L:.4g} of "
                                                 f"{hessian} (kappa {L / mu:.4g})")

    def settling(self, problem) -> Settling:
        return self.chosen(problem).settling(self.name)

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
