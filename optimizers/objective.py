"""The least-squares objective evaluated on a backend, in one of two formulations.

"data": every evaluation reads X (n x d): two passes per loss-and-gradient.
"gram": one pass in setup forms X^T X (d x d), X^T y and y^T y; afterwards every evaluation
costs O(d^2), independent of n. The loss is then (w^T A w - 2 w^T b + c) / n, which cancels
digits when f* is much smaller than y^T y / n: float32 gram runs cannot resolve small
suboptimalities, and the float64 check of every run's final iterate shows it.
"""

from __future__ import annotations

FORMULATIONS = ("data", "gram")


class LeastSquaresObjective:
    """f(w) = (1/n)||Xw - y||^2 on backend `ops`; each method says its passes over X."""

    formulation = "data"

    def __init__(self, ops, X, y):
        self.ops = ops
        self.X = X
        self.y = y
        self.inv_n = ops.scalar(1.0 / X.shape[0])

    def value_and_grad(self, w):
        """Loss and gradient at w: two passes over X (X w, then X^T r)."""
        ops = self.ops
        r = ops.matmul(self.X, w) - self.y
        f = ops.vdot(r, r) * self.inv_n
        g = (2 * self.inv_n) * ops.matmul_t(self.X, r)
        return f, g

    def curvature(self, direction):
        """direction^T H direction for the Hessian H = 2/n X^T X: one pass over X."""
        ops = self.ops
        q = ops.matmul(self.X, direction)
        return (2 * self.inv_n) * ops.vdot(q, q)

    def hessian_diagonal(self):
        """diag(H) = 2/n * sum_i x_ij^2, shaped (d, 1) to broadcast over label columns."""
        ops = self.ops
        return (2 * self.inv_n) * ops.sum(self.X * self.X, axis=0)[:, None]


class GramObjective:
    """The same f, gradient and curvature from the sufficient statistics A = X^T X, b = X^T y,
    c = sum(y^2): formed in one pass (setup), then O(d^2) per evaluation."""

    formulation = "gram"

    def __init__(self, ops, X, y):
        self.ops = ops
        self.inv_n = ops.scalar(1.0 / X.shape[0])
        self.A = ops.matmul_t(X, X)
        self.b = ops.matmul_t(X, y)
        self.c = ops.sum(y * y)

    def value_and_grad(self, w):
        ops = self.ops
        Aw = ops.matmul(self.A, w)
        f = (ops.sum(w * Aw) - 2 * ops.sum(w * self.b) + self.c) * self.inv_n
        g = (2 * self.inv_n) * (Aw - self.b)
        return f, g

    def curvature(self, direction):
        ops = self.ops
        return (2 * self.inv_n) * ops.sum(direction * ops.matmul(self.A, direction))

    def hessian_diagonal(self):
        ops = self.ops
        return (2 * self.inv_n) * ops.diag_part(self.A)[:, None]


def make_objective(ops, X, y, formulation: str = "data"):
    """The objective for a formulation; X and y are already on the backend, in its dtype."""
    return GramObjective(ops, X, y) if formulation == "gram" else LeastSquaresObjective(ops, X, y)
