"""Conjugate gradient on the normal equations (CGLS): the method of choice for least squares.

CG on H w = b with H = 2/n X^T X, on the objective's Hessian product (two passes over X per
iteration; X^T X is never formed). The loss and gradient are carried by recurrence:
  alpha = -g.p / p^T H p,  w = w + alpha p,  f = f + alpha g.p / 2,  g = g + alpha H p,
  beta = |g_new|^2 / |g|^2 (Fletcher-Reeves),  p = -g_new + beta p.
Every `restart` iterations ("d", the default, after which exact CG has terminated; or "never")
the direction restarts from -g and the loss and gradient are recomputed from X (residual
replacement bounds the recurrence's drift; not counted in nfev/ngev).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from convergence_study.errors import InputError
from optimizers.base import Optimizer


class CGLSState(NamedTuple):
    w: object
    f: object
    g: object
    p: object  # the search direction
    gg: object  # g.g, the denominator of the next beta
    k: object  # iterations done, a scalar of the run's dtype


class CGLSParams(NamedTuple):
    period: object  # restart every `period` iterations; None: never


@dataclass(frozen=True)
class CGLS(Optimizer):
    restart: int | str = "d"
    name: str = "cgls"
    solves = "least-squares"
    evaluations = {"nfev": 0, "ngev": 0, "nhvp": 1}  # plus one loss and gradient per restart

    def __post_init__(self):
        if self.restart not in ("d", "never") and (isinstance(self.restart, bool) or not
                                                    isinstance(self.restart, int)
                                                    or self.restart < 1):
            raise InputError(f"cgls: restart must be 'd', 'never' or an integer >= 1, "
                             f"got {self.restart!r}")

    def branches(self) -> str | None:
        return "its restart test branches on the data"

    def hyperparameters(self) -> dict:
        return {"restart": str(self.restart)}  # one column type for 'd', 'never' and periods

    def setup(self, problem, objective, ops) -> CGLSParams:
        if self.restart == "never":
            return CGLSParams(None)
        return CGLSParams(ops.scalar(problem.d if self.restart == "d" else self.restart))

    def init(self, objective, ops, params, w0) -> CGLSState:
        f, g = objective.value_and_grad(w0)
        return CGLSState(w0, f, g, -g, ops.vdot(g, g), ops.scalar(0))

    def update(self, objective, ops, params, state) -> CGLSState:
        p, k = state.p, state.k + 1
        Hp = objective.hessian_product(p)
        curvature, slope = ops.vdot(p, Hp), ops.vdot(state.g, p)
        alpha = ops.where(curvature > 0, -slope / ops.maximum(curvature, ops.tiny), 0)
        w = state.w + alpha * p

        def recurred():
            return state.f + alpha * slope / 2, state.g + alpha * Hp

        if params.period is None:
            f, g = recurred()
            restart = False
        else:
            restart = k % params.period == 0
            f, g = ops.cond(restart, lambda: objective.value_and_grad(w), recurred)
        gg = ops.vdot(g, g)
        beta = ops.where(state.gg > 0, gg / ops.maximum(state.gg, ops.tiny), 0)
        if params.period is not None:
            beta = ops.where(restart, 0, beta)
        return CGLSState(w, f, g, -g + beta * p, gg, k)
