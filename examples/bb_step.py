# bb_step.py
"""Gradient descent with the Barzilai-Borwein step (Barzilai and Borwein 1988): after a first
step of 1/L, each step is s's / s'y, with s the last move of the iterate and y the change of
the gradient it made (the "long" BB step). Its loss is not monotone, and no classical bound in
kappa speaks for it (no `family`). docs/your-optimizer.md runs it beside GD, Nesterov and
L-BFGS: convergence-study regress --optimizer examples/bb_step.py:BarzilaiBorwein
"""

from dataclasses import dataclass
from typing import NamedTuple

from optimizers.base import Optimizer, positive


class BBState(NamedTuple):
    w: object  # the iterate
    f: object  # its loss
    g: object  # its gradient
    step: object  # the step the next update takes


@dataclass(frozen=True)
class BarzilaiBorwein(Optimizer):
    first_step: float | None = None  # None: 1/L, from the problem's curvature (setup)
    name: str = "bb"  # its label in the rows, figures and report
    evaluations = {"nfev": 1, "ngev": 1, "nhvp": 0}  # one loss and gradient per iteration
    straight_line = True  # no branch on the data: a CUDA graph can capture the step

    def __post_init__(self):
        positive("first_step", self.first_step, optimizer=self.name, allow_none=True)

    def hyperparameters(self) -> dict:
        return {"first_step": self.first_step}

    def setup(self, problem, objective, ops):
        return ops.scalar(self.first_step or 1.0 / problem.curvature_bounds()[1])

    def init(self, objective, ops, params, w0) -> BBState:
        return BBState(w0, *objective.value_and_grad(w0), params)

    def update(self, objective, ops, params, state) -> BBState:
        w = state.w - state.step * state.g
        f, g = objective.value_and_grad(w)
        s, y = w - state.w, g - state.g
        sy = ops.vdot(s, y)
        step = ops.where(sy > 0, ops.vdot(s, s) / ops.maximum(sy, ops.tiny), state.step)
        return BBState(w, f, g, step)
