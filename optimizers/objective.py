"""The least-squares objective evaluated on a backend, in one of two formulations.

"data": every evaluation reads X (n x d): two passes per loss-and-gradient.
"gram": one pass in setup forms X^T X (d x d), X^T y and y^T y; afterwards every evaluation
costs O(d^2), independent of n. The loss is then (w^T A w - 2 w^T b + c) / n, which cancels
digits when f* is much smaller than y^T y / n: float32 gram runs cannot resolve small
suboptimalities, and the float64 check of every run's final iterate shows it.

`prepare_data` puts what a formulation needs on the backend once (setup, timed apart);
`make_objective` wraps those arrays and costs nothing, so compiled steps can take the arrays as
arguments and build the objective inside. The data matrix is stored in the backend's own layout
(`ops.data_matrix`), and only the backend's `data_*` products touch it.
"""

from __future__ import annotations

FORMULATIONS = ("data", "gram")


class LeastSquaresObjective:
    """f(w) = (1/n)||Xw - y||^2 on backend `ops`; each method says its passes over X."""

    formulation = "data"

    def __init__(self, ops, X, y):
        self.ops = ops
        self.X = X  # in the backend's layout (ops.data_matrix)
        self.y = y
        self.inv_n = ops.scalar(1.0 / y.shape[0])

    def value_and_grad(self, w):
        """Loss and gradient at w: two passes over X (X w, then X^T r)."""
        ops = self.ops
        r = ops.data_matvec(self.X, w) - self.y
        f = ops.vdot(r, r) * self.inv_n
        g = (2 * self.inv_n) * ops.data_rmatvec(self.X, r)
        return f, g

    def curvature(self, direction):
        """direction^T H direction for the Hessian H = 2/n X^T X: one pass over X."""
        q = self.ops.data_matvec(self.X, direction)
        return (2 * self.inv_n) * self.ops.vdot(q, q)

    def hessian_product(self, direction):
        """H direction = 2/n X^T (X direction): two passes over X."""
        ops = self.ops
        return (2 * self.inv_n) * ops.data_rmatvec(self.X, ops.data_matvec(self.X, direction))

    def hessian_diagonal(self):
        """diag(H) = 2/n * sum_i x_ij^2, shaped (d, 1) to broadcast over label columns."""
        return (2 * self.inv_n) * self.ops.data_column_squares(self.X)[:, None]


class GramObjective:
    """The same f, gradient and curvature from the sufficient statistics A = X^T X, b = X^T y,
    c = sum(y^2): formed in one pass (setup), then O(d^2) per evaluation."""

    formulation = "gram"

    def __init__(self, ops, A, b, c, inv_n):
        self.ops, self.A, self.b, self.c, self.inv_n = ops, A, b, c, inv_n

    def value_and_grad(self, w):
        ops = self.ops
        Aw = ops.matmul(self.A, w)
        f = (ops.vdot(w, Aw) - 2 * ops.vdot(w, self.b) + self.c) * self.inv_n
        g = (2 * self.inv_n) * (Aw - self.b)
        return f, g

    def curvature(self, direction):
        ops = self.ops
        return (2 * self.inv_n) * ops.vdot(direction, ops.matmul(self.A, direction))

    def hessian_product(self, direction):
        return (2 * self.inv_n) * self.ops.matmul(self.A, direction)

    def hessian_diagonal(self):
        return (2 * self.inv_n) * self.ops.diag_part(self.A)[:, None]


def prepare_data(ops, X, y, formulation: str = "data") -> tuple:
    """The backend arrays a formulation works from, made once from host X (n x d) and y."""
    Xd, yd = ops.data_matrix(X), ops.asarray(y)
    if formulation == "data":
        return (Xd, yd)
    return (ops.data_gram(Xd), ops.data_rmatvec(Xd, yd), ops.vdot(yd, yd),
            ops.scalar(1.0 / X.shape[0]))


def make_objective(ops, data: tuple, formulation: str = "data"):
    """Wrap `prepare_data`'s arrays (cheap: safe to call inside a compiled step)."""
    return GramObjective(ops, *data) if formulation == "gram" else LeastSquaresObjective(ops, *data)
