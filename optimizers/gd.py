"""Full-batch gradient descent: a fixed step, the 1/L step, or the original diagonal step.

step="diag" is the original NumPy program's update `betas -= (gradient / gradient_two) / len(betas)`
with gradient_two = 2 * sum(x^2): a Jacobi-preconditioned step damped by 1/d, which always
converges on least squares. Its constant diagonal is formed once in setup rather than every step,
which leaves the iterates unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from datasets.errors import InputError
from datasets.problem import gram_matrix
from optimizers.base import positive

STEPS = ("fixed", "1/L", "diag")


class GDState(NamedTuple):
    w: object
    f: object
    g: object


class GDParams(NamedTuple):
    scale: object  # a scalar learning rate, or a (d, 1) per-coordinate step


@dataclass(frozen=True)
class GradientDescent:
    step: str = "1/L"
    learning_rate: float | None = None
    name: str = "gd"
    evaluations = {"nfev": 1, "ngev": 1, "nhvp": 0}

    def __post_init__(self):
        if self.step not in STEPS:
            raise InputError(f"gd: unknown step '{self.step}'; allowed: {', '.join(STEPS)}")
        if self.step == "fixed":
            if self.learning_rate is None:
                raise InputError("gd: step='fixed' needs a learning_rate")
            positive("learning_rate", self.learning_rate, optimizer="gd")
        elif self.learning_rate is not None:
            raise InputError(f"gd: step='{self.step}' chooses its own step; "
                             "give learning_rate only with step='fixed'")

    def hyperparameters(self) -> dict:
        return {"step": self.step, "learning_rate": self.learning_rate}

    def setup(self, problem, objective, ops) -> GDParams:
        if self.step == "fixed":
            return GDParams(ops.scalar(self.learning_rate))
        if self.step == "1/L":  # one pass to form X^T X; timed as setup
            L = float(np.linalg.eigvalsh(gram_matrix(problem.X))[-1])
            return GDParams(ops.scalar(1.0 / L))
        return GDParams(1.0 / (problem.d * objective.hessian_diagonal()))

    def init(self, objective, ops, params, w0) -> GDState:
        return GDState(w0, *objective.value_and_grad(w0))

    def update(self, objective, ops, params, state) -> GDState:
        w = state.w - params.scale * state.g
        return GDState(w, *objective.value_and_grad(w))
