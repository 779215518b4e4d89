"""L-BFGS with a fixed-size history, and the exact line search of a quadratic or a strong-Wolfe
line search (optimizers.linesearch).

`line_search` "exact" (the default for least squares: alpha = -g.p / p^T H p, one extra pass
over X) or "wolfe" (the only choice for logistic regression; it tries the unit step, 1/||g||
before the first curvature pair, and its evaluations are counted in the state).

The history is a fixed-shape queue (m x d x k, oldest first) so the same code runs in a
compiled loop; empty slots hold s = y = 0 and rho = 0, so their terms vanish without branching.
A direction that is not a descent direction (rounding) falls back to -g; a pair with s.y <= 0
is not stored.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from convergence_study.errors import InputError
from datasets.memory import available_bytes
from optimizers.base import Optimizer, count
from optimizers.linesearch import strong_wolfe

LINE_SEARCHES = ("exact", "wolfe")


class LBFGSState(NamedTuple):
    w: object
    f: object
    g: object
    S: object  # (m, d, k) steps, oldest first
    Y: object  # (m, d, k) gradient differences
    rho: object  # (m,) 1 / s.y, zero for empty slots
    evaluations: object = 0  # loss-and-gradient evaluations after init (a scalar)


@dataclass(frozen=True)
class LBFGS(Optimizer):
    history: int = 10
    line_search: str | None = None  # None: "exact" on least squares, "wolfe" on logistic
    name: str = "lbfgs"
    straight_line = True
    evaluations = {"nfev": 1, "ngev": 1, "nhvp": 1}  # per iteration, with the exact search

    def __post_init__(self):
        count("history", self.history, optimizer="lbfgs")
        if self.line_search is not None and self.line_search not in LINE_SEARCHES:
            raise InputError(f"lbfgs: unknown line_search '{self.line_search}'; allowed: "
                             f"{', '.join(LINE_SEARCHES)}")

    def branches(self) -> str | None:
        """As it runs (`for_problem` makes the line search explicit)."""
        return "its Wolfe line search loops on the loss" if self.line_search == "wolfe" else None

    def for_problem(self, problem) -> LBFGS:
        """The line search made explicit for this problem (so the record says which ran)."""
        quadratic = problem.objective == "least-squares"
        m = self.history  # the pairs S, Y (m x d x k) and about 4 m x m arrays of `direction`
        need = (2 * m * getattr(problem, "d", 0) * getattr(problem, "k", 0) + 4 * m * m) * 8
        if need > available_bytes():  # (a config's check knows no d yet: m x m then)
            raise InputError(f"lbfgs: history={m} needs about {need / 2**30:.3g} GiB, "
                             f"{available_bytes() / 2**30:.1f} GiB available; use a shorter "
                             "history")
        if self.line_search == "exact" and not quadratic:
            raise InputError(f"lbfgs: the exact line search needs a quadratic objective, not "
                             f"{problem.objective}; use line_search='wolfe'")
        return replace(self, line_search=self.line_search or ("exact" if quadratic else "wolfe"))

    def state_record(self, state) -> dict | None:
        """Counts of the Wolfe search (the exact search's are fixed per iteration)."""
        if self.line_search != "wolfe":
            return None
        evaluations = 1 + int(np.asarray(state.evaluations))
        return {"nfev": evaluations, "ngev": evaluations, "nhvp": 0}

    def setup(self, problem, objective, ops):
        return ()

    def init(self, objective, ops, params, w0) -> LBFGSState:
        f, g = objective.value_and_grad(w0)
        m = self.history
        history = ops.zeros((m, *w0.shape), like=w0)
        return LBFGSState(w0, f, g, history, history, ops.zeros((m,), like=w0), f * 0)

    def direction(self, ops, state):
        """-H g for the L-BFGS matrix H with H_0 = gamma I, gamma = s.y / y.y of the newest pair,
        from its compact representation (Byrd, Nocedal and Schnabel 1994):
            H g = gamma g + S^T t - gamma Y^T u,   u = R^-1 S g,
            t = R^-T ((D + gamma Y Y^T) u - gamma Y g),
        S, Y the pairs as rows, R the upper triangle of S Y^T, D its diagonal (from the stored
        1/rho). The two-loop recursion's vector in a dozen whole-array operations instead of
        about 8 per pair; an empty slot gets R_jj = 1, D_jj = 0, and its terms vanish."""
        m = self.history
        S = ops.reshape(state.S, (m, -1))
        Y = ops.reshape(state.Y, (m, -1))
        g = ops.reshape(state.g, (-1, 1))
        sy, yy = ops.vdot(state.S[-1], state.Y[-1]), ops.vdot(state.Y[-1], state.Y[-1])
        gamma = ops.where(yy > 0, sy / ops.maximum(yy, ops.tiny), 1)
        filled = state.rho > 0
        stored_sy = 1 / ops.maximum(state.rho, ops.tiny)
        R = ops.strict_upper(ops.matmul(S, ops.transpose(Y))) \
            + ops.eye(m, like=S) * ops.where(filled, stored_sy, 1)
        D = ops.where(filled, stored_sy, 0)[:, None]
        u = ops.solve_triangular(R, ops.matmul(S, g), lower=False)
        Yg = ops.matmul(Y, g)
        t = D * u + gamma * (ops.matmul(Y, ops.matmul_t(Y, u)) - Yg)
        t = ops.solve_triangular(ops.transpose(R), t, lower=True)
        Hg = gamma * g + ops.matmul_t(S, t) - gamma * ops.matmul_t(Y, u)
        return -ops.reshape(Hg, state.g.shape)

    def update(self, objective, ops, params, state) -> LBFGSState:
        p = self.direction(ops, state)
        slope = ops.vdot(state.g, p)
        p = ops.where(slope < 0, p, -state.g)
        slope = ops.where(slope < 0, slope, -ops.vdot(state.g, state.g))
        if self.line_search == "wolfe":
            started = ops.sum(state.rho) > 0  # a curvature pair scales p; else try 1/||g||
            alpha0 = ops.where(started, 1, 1 / ops.maximum(ops.sqrt(-slope), ops.tiny))
            alpha, f, g, used = strong_wolfe(objective, ops, state.w, state.f, state.g, p,
                                             alpha0)
            w = state.w + alpha * p
        else:
            curvature = objective.curvature(p, state.w)
            alpha = ops.where(curvature > 0, -slope / ops.maximum(curvature, ops.tiny), 0)
            w = state.w + alpha * p
            f, g = objective.value_and_grad(w)
            used = 1
        s, y = w - state.w, g - state.g
        sy = ops.vdot(s, y)
        keep = sy > 0
        S = ops.where(keep, ops.push(state.S, s), state.S)
        Y = ops.where(keep, ops.push(state.Y, y), state.Y)
        rho = ops.where(keep, ops.push(state.rho, 1 / ops.maximum(sy, ops.tiny)),
                        state.rho)
        return LBFGSState(w, f, g, S, Y, rho, state.evaluations + used)
