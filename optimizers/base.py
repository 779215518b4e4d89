"""What every iterative optimizer provides, and the checks of its hyperparameters.

An optimizer is written once against a backend `ops` and an objective (optimizers/objective.py):
  setup(problem, objective, ops) -> params   constants it needs (step sizes), as backend arrays
  init(objective, ops, params, w0) -> state  a NamedTuple with at least w, f (loss), g (gradient)
  update(objective, ops, params, state) -> state   one iteration
The state holds the loss and gradient at its iterate, so stopping rules never re-evaluate them.
`evaluations` says what one iteration costs (loss, gradient, curvature products); `init` costs
one loss and one gradient.
"""

from __future__ import annotations

from typing import Protocol

from datasets import values
from datasets.errors import InputError


class Optimizer(Protocol):
    name: str
    evaluations: dict

    def hyperparameters(self) -> dict: ...
    def setup(self, problem, objective, ops): ...
    def init(self, objective, ops, params, w0): ...
    def update(self, objective, ops, params, state): ...


def hyperparameter(optimizer: str, name: str, value, spec: values.Value):
    """A hyperparameter checked by the one validation layer (datasets.values), its message
    naming the optimizer and the hyperparameter: `adam: beta_1 must be ..., got ...`."""
    return spec.check(f"{optimizer}: {name}", value)


def positive(name: str, value, *, optimizer: str, allow_none: bool = False):
    """A finite number > 0, or an InputError naming the hyperparameter."""
    return hyperparameter(optimizer, name, value, values.positive(optional=allow_none))


def fraction(name: str, value, *, optimizer: str, closed_low: bool = False) -> float:
    """A number in (0, 1) ([0, 1) with closed_low), or an InputError naming the hyperparameter."""
    return hyperparameter(optimizer, name, value, values.fraction(closed_low=closed_low))


def count(name: str, value, *, optimizer: str) -> int:
    """An integer >= 1 (a history size, a restart period)."""
    return hyperparameter(optimizer, name, value, values.integer(1))


def flag(name: str, value, *, optimizer: str) -> bool:
    return hyperparameter(optimizer, name, value, values.boolean())


MOMENTUM_STEPS = ("textbook", "fixed")


def check_momentum_step(optimizer: str, step, learning_rate, momentum) -> None:
    """momentum and nesterov: step 'fixed' needs both values, 'textbook' chooses both."""
    if step not in MOMENTUM_STEPS:
        raise InputError(f"{optimizer}: unknown step '{step}'; allowed: "
                         f"{', '.join(MOMENTUM_STEPS)}")
    if step == "fixed":
        if learning_rate is None or momentum is None:
            raise InputError(f"{optimizer}: step='fixed' needs a learning_rate and a momentum")
        positive("learning_rate", learning_rate, optimizer=optimizer)
        fraction("momentum", momentum, optimizer=optimizer, closed_low=True)
    elif learning_rate is not None or momentum is not None:
        raise InputError(f"{optimizer}: step='textbook' chooses its own learning_rate and "
                         "momentum from L and mu; give them only with step='fixed'")


def hessian_bounds(problem, optimizer: str) -> tuple[float, float]:
    """(mu, L): bounds of the Hessian's eigenvalues (exact for least squares: 2/n X^T X + lam I),
    from one pass to form X^T X (timed as setup). The textbook step and momentum need mu > 0."""
    mu, L = problem.curvature_bounds()
    if not mu > 0:
        raise InputError(f"{optimizer}: the textbook parameters need a strongly convex problem "
                         f"(smallest Hessian eigenvalue {mu:.3g}); give step='fixed'")
    return mu, L


def epsilon_convention(epsilon: float, defaults: dict) -> str:
    """Whose default an epsilon is ('keras3', 'tf1'), or 'custom': the libraries differ."""
    return next((who for who, value in defaults.items() if value == epsilon), "custom")


def require_numpy(name: str, backend) -> None:
    """The self-driven SciPy and closed-form references run on the numpy backend only."""
    if backend.name != "numpy":
        raise InputError(f"{name} runs on the numpy backend only, not '{backend.name}'")


def unsupported(optimizer, problem) -> str | None:
    """Why `optimizer` cannot solve `problem` (its `solves` attribute: "least-squares" for
    methods built on linear least squares, "plain least-squares" for those that also ignore a
    ridge term), or None."""
    solves = getattr(optimizer, "solves", "any")
    if solves == "any":
        return None
    if problem.objective != "least-squares":
        return f"{optimizer.name} solves least squares only, not {problem.objective} regression"
    if solves == "plain least-squares" and problem.lam:
        return f"{optimizer.name} solves plain least squares only, not with a ridge term (lam)"
    return None
