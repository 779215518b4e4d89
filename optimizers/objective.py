"""The objective evaluated on a backend: least squares (in one of two formulations, with an
optional ridge term) or L2-regularized logistic regression. Optimizers see only
`value_and_grad`, `hessian_product`, `curvature` and `hessian_diagonal`, never which one.

"data": every evaluation reads X (n x d), in the backend's own layout (`ops.data_matrix`).
"gram": one pass in setup forms X^T X, X^T y and y^T y; then each evaluation costs O(d^2). Its
loss (w^T A w - 2 w^T b + c) / n cancels digits when f* is much smaller than y^T y / n: float32
gram runs cannot resolve small suboptimalities (the final float64 check shows it).

`prepare_data` puts the arrays on the backend once (setup); `make_objective` wraps them and
costs nothing, so compiled steps take the arrays as arguments and build the objective inside.
"""

from __future__ import annotations

from convergence_study.errors import InputError

FORMULATIONS = ("data", "gram")


class LeastSquaresObjective:
    """f(w) = (1/n)||Xw - y||^2 on backend `ops`; each method says its passes over X."""

    formulation = "data"
    ARRAYS = ("X", "y")  # what the data tuple holds before an optional lam (`rebound`)

    def __init__(self, ops, X, y, lam=None):
        self.ops = ops
        self.X = X  # in the backend's layout (ops.data_matrix)
        self.y = y
        self.inv_n = ops.scalar(1.0 / y.shape[0])
        self.two_inv_n = ops.scalar(2.0 / y.shape[0])  # made once: an eager op less per call
        self.ridge = Ridge(ops, lam)

    def value_and_grad(self, w):
        """Loss and gradient at w: two passes over X (X w, then X^T r)."""
        ops = self.ops
        r = ops.data_matvec(self.X, w) - self.y
        f = ops.vdot(r, r) * self.inv_n
        g = self.two_inv_n * ops.data_rmatvec(self.X, r)
        return self.ridge.value_and_grad(f, g, w)

    def curvature(self, direction, w=None):
        """direction^T H direction for the Hessian H = 2/n X^T X: one pass over X."""
        q = self.ops.data_matvec(self.X, direction)
        return self.ridge.curvature(self.two_inv_n * self.ops.vdot(q, q), direction)

    def hessian_product(self, direction, w=None):
        """H direction = 2/n X^T (X direction): two passes over X."""
        ops = self.ops
        Hv = self.two_inv_n * ops.data_rmatvec(self.X, ops.data_matvec(self.X, direction))
        return self.ridge.product(Hv, direction)

    def hessian_diagonal(self):
        """diag(H) = 2/n * sum_i x_ij^2, shaped (d, 1) to broadcast over label columns."""
        return self.ridge.diagonal(
            self.two_inv_n * self.ops.data_column_squares(self.X)[:, None])


class Ridge:
    """The term (lam/2)||w||^2 added to a loss, its gradient and Hessian; lam None: no term and
    no operations at all."""

    def __init__(self, ops, lam):
        self.ops, self.lam = ops, lam

    def value_and_grad(self, f, g, w):
        if self.lam is None:
            return f, g
        return f + (self.lam / 2) * self.ops.vdot(w, w), g + self.lam * w

    def curvature(self, value, direction):
        return value if self.lam is None else value + self.lam * self.ops.vdot(direction, direction)

    def product(self, Hv, direction):
        return Hv if self.lam is None else Hv + self.lam * direction

    def diagonal(self, diagonal):
        return diagonal if self.lam is None else diagonal + self.lam


class LogisticObjective:
    """f(w) = (1/n) sum softplus(-y x^T w) + (lam/2)||w||^2 on backend `ops` (labels +-1), with
    the backends' stable softplus and sigmoid; the curvature depends on w."""

    formulation = "data"
    ARRAYS = ("X", "y")

    def __init__(self, ops, X, y, lam):
        self.ops, self.X, self.y = ops, X, y
        self.inv_n = ops.scalar(1.0 / y.shape[0])
        self.neg_inv_n = ops.scalar(-1.0 / y.shape[0])  # made once: an eager op less per call
        self.ridge = Ridge(ops, lam)

    def value_and_grad(self, w):
        """Loss and gradient at w: two passes over X (X w, then X^T r)."""
        ops = self.ops
        margin = self.y * ops.data_matvec(self.X, w)
        f = ops.sum(ops.softplus(-margin)) * self.inv_n
        g = self.neg_inv_n * ops.data_rmatvec(self.X, self.y * ops.sigmoid(-margin))
        return self.ridge.value_and_grad(f, g, w)

    def _weights(self, w):
        s = self.ops.sigmoid(self.y * self.ops.data_matvec(self.X, w))
        return s * (1 - s)

    def curvature(self, direction, w):
        """direction^T H(w) direction: two passes over X."""
        q = self.ops.data_matvec(self.X, direction)
        value = self.ops.sum(self._weights(w) * q * q) * self.inv_n
        return self.ridge.curvature(value, direction)

    def hessian_product(self, direction, w):
        """H(w) direction = (1/n) X^T (s (1 - s) X direction) + lam direction: three passes."""
        ops = self.ops
        q = self._weights(w) * ops.data_matvec(self.X, direction)
        return self.ridge.product(self.inv_n * ops.data_rmatvec(self.X, q), direction)

    def hessian_diagonal(self):
        """An upper bound of diag(H) valid at every w: s (1 - s) <= 1/4."""
        return self.ridge.diagonal(
            (self.inv_n / 4) * self.ops.data_column_squares(self.X)[:, None])


class GramObjective:
    """The same f, gradient and curvature from A = X^T X, b = X^T y, c = sum(y^2)."""

    formulation = "gram"
    ARRAYS = ("A", "b", "c", "inv_n")

    def __init__(self, ops, A, b, c, inv_n, lam=None):
        self.ops, self.A, self.b, self.c, self.inv_n = ops, A, b, c, inv_n
        self.ridge = Ridge(ops, lam)

    def value_and_grad(self, w):
        ops = self.ops
        Aw = ops.matmul(self.A, w)
        f = (ops.vdot(w, Aw) - 2 * ops.vdot(w, self.b) + self.c) * self.inv_n
        g = (2 * self.inv_n) * (Aw - self.b)
        return self.ridge.value_and_grad(f, g, w)

    def curvature(self, direction, w=None):
        ops = self.ops
        value = (2 * self.inv_n) * ops.vdot(direction, ops.matmul(self.A, direction))
        return self.ridge.curvature(value, direction)

    def hessian_product(self, direction, w=None):
        return self.ridge.product((2 * self.inv_n) * self.ops.matmul(self.A, direction),
                                  direction)

    def hessian_diagonal(self):
        return self.ridge.diagonal((2 * self.inv_n) * self.ops.diag_part(self.A)[:, None])


def rebound(objective, data: tuple):
    """`objective` on another copy of the same data (a feed's fresh copy at every step): its
    constants kept, its arrays and lam those of `data`. In PyTorch's feed loop at 1k rows, made
    again it cost about 8 us a step over reusing one; bound this way, about 3."""
    names = type(objective).ARRAYS
    bound = object.__new__(type(objective))
    bound.__dict__.update(objective.__dict__, **dict(zip(names, data, strict=False)))
    if len(data) > len(names):
        bound.ridge = Ridge(objective.ops, data[len(names)])
    return bound


def check_formulation(objective: str, formulation: str) -> None:
    """Logistic regression has no sufficient statistics, so only the 'data' formulation."""
    if objective == "logistic" and formulation != "data":
        raise InputError(f"logistic regression has no '{formulation}' formulation (no "
                         "sufficient statistics): use formulation 'data'")


def prepare_data(ops, X, y, formulation: str = "data", objective: str = "least-squares",
                 lam: float = 0.0) -> tuple:
    """The backend arrays a formulation works from, made once from host X and y; lam joins them
    as a backend scalar (an input, not a constant baked into a compiled step)."""
    check_formulation(objective, formulation)
    penalty = (ops.scalar(lam),) if lam or objective == "logistic" else ()
    Xd, yd = ops.data_matrix(X), ops.asarray(y)
    if formulation == "data":
        return (Xd, yd, *penalty)
    return (ops.data_gram(Xd), ops.data_rmatvec(Xd, yd), ops.vdot(yd, yd),
            ops.scalar(1.0 / X.shape[0]), *penalty)


def problem_data(ops, problem, formulation: str = "data") -> tuple:
    """`prepare_data` for a datasets.problem.Problem: its arrays, objective and lam."""
    return prepare_data(ops, problem.X, problem.y, formulation, problem.objective, problem.lam)


def make_objective(ops, data: tuple, formulation: str = "data", objective: str = "least-squares"):
    """Wrap `prepare_data`'s arrays (cheap: safe to call inside a compiled step)."""
    if objective == "logistic":
        return LogisticObjective(ops, *data)
    return GramObjective(ops, *data) if formulation == "gram" else LeastSquaresObjective(ops, *data)
