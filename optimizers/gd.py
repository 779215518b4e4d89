"""Full-batch gradient descent: a fixed step, the 1/L step, the original diagonal step, or a
backtracking (Armijo) step.

step="armijo" halves a trial step until sufficient decrease (optimizers.linesearch.armijo),
trying twice the last accepted step (first learning_rate, else 1) so that it can grow back.
step="diag" is the original NumPy program's `betas -= (gradient / gradient_two) / len(betas)`,
gradient_two = 2 * sum(x^2): a Jacobi-preconditioned step damped by 1/d, which always converges
on least squares; its constant diagonal is formed once in setup.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from convergence_study.errors import InputError
from optimizers.base import Optimizer, positive
from optimizers.linesearch import GROW, armijo

STEPS = ("fixed", "1/L", "diag", "armijo")


class GDState(NamedTuple):
    w: object
    f: object
    g: object


class ArmijoState(NamedTuple):
    w: object
    f: object
    g: object
    step: object  # the last accepted step
    evaluations: object  # loss-and-gradient evaluations after init


class GDParams(NamedTuple):
    scale: object  # a scalar learning rate, or a (d, 1) per-coordinate step


@dataclass(frozen=True)
class GradientDescent(Optimizer):
    step: str = "1/L"
    learning_rate: float | None = None
    name: str = "gd"
    straight_line = True
    evaluations = {"nfev": 1, "ngev": 1, "nhvp": 0}

    def __post_init__(self):
        if self.step not in STEPS:
            raise InputError(f"gd: unknown step '{self.step}'; allowed: {', '.join(STEPS)}")
        if self.step == "fixed":
            if self.learning_rate is None:
                raise InputError("gd: step='fixed' needs a learning_rate")
            positive("learning_rate", self.learning_rate, optimizer="gd")
        elif self.step == "armijo":
            positive("learning_rate", self.learning_rate, optimizer="gd", allow_none=True)
        elif self.learning_rate is not None:
            raise InputError(f"gd: step='{self.step}' chooses its own step; "
                             "give learning_rate only with step='fixed' or 'armijo'")

    def branches(self) -> str | None:
        return ("its Armijo step backtracks in a loop on the loss" if self.step == "armijo"
                else None)

    def setup(self, problem, objective, ops) -> GDParams:
        if self.step == "fixed":
            return GDParams(ops.scalar(self.learning_rate))
        if self.step == "armijo":  # the first trial step
            return GDParams(ops.scalar(self.learning_rate or 1.0))
        if self.step == "1/L":  # one pass to form X^T X; timed as setup
            L = problem.curvature_bounds()[1]
            return GDParams(ops.scalar(1.0 / L))
        return GDParams(1.0 / (problem.d * objective.hessian_diagonal()))

    def init(self, objective, ops, params, w0):
        f, g = objective.value_and_grad(w0)
        if self.step == "armijo":
            return ArmijoState(w0, f, g, params.scale / GROW, f * 0)
        return GDState(w0, f, g)

    def update(self, objective, ops, params, state):
        if self.step == "armijo":
            p = -state.g
            alpha, f, g, used = armijo(objective, ops, state.w, state.f, state.g, p,
                                       GROW * state.step)
            return ArmijoState(state.w + alpha * p, f, g, ops.where(alpha > 0, alpha, state.step),
                               state.evaluations + used)
        w = state.w - params.scale * state.g
        return GDState(w, *objective.value_and_grad(w))

    def state_record(self, state) -> dict | None:
        """Counts of the Armijo search (the other steps cost one evaluation per iteration)."""
        if self.step != "armijo":
            return None
        evaluations = 1 + int(np.asarray(state.evaluations))
        return {"nfev": evaluations, "ngev": evaluations, "nhvp": 0}
