"""The least-squares objective evaluated on a backend, with the data already in place there."""

from __future__ import annotations


class LeastSquaresObjective:
    """f(w) = (1/n)||Xw - y||^2 on backend `ops`; each method says its passes over X."""

    def __init__(self, ops, X, y):
        self.ops = ops
        self.X = X
        self.y = y
        self.inv_n = ops.scalar(1.0 / X.shape[0])

    def value_and_grad(self, w):
        """Loss and gradient at w: two passes over X (X w, then X^T r)."""
        ops = self.ops
        r = ops.matmul(self.X, w) - self.y
        f = ops.sum(r * r) * self.inv_n
        g = (2 * self.inv_n) * ops.matmul_t(self.X, r)
        return f, g

    def curvature(self, direction):
        """direction^T H direction for the Hessian H = 2/n X^T X: one pass over X."""
        ops = self.ops
        q = ops.matmul(self.X, direction)
        return (2 * self.inv_n) * ops.sum(q * q)

    def hessian_diagonal(self):
        """diag(H) = 2/n * sum_i x_ij^2, shaped (d, 1) to broadcast over label columns."""
        ops = self.ops
        return (2 * self.inv_n) * ops.sum(self.X * self.X, axis=0)[:, None]
