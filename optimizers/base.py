"""What every iterative optimizer provides, and the checks of its hyperparameters.

An optimizer is written once against a backend `ops` and an objective (optimizers/objective.py):
  setup(problem, objective, ops) -> params   constants it needs (step sizes), as backend arrays
  init(objective, ops, params, w0) -> state  a NamedTuple with at least w, f (loss), g (gradient)
  update(objective, ops, params, state) -> state   one iteration
The state holds the loss and gradient at its iterate, so stopping rules never re-evaluate them.
`evaluations` says what one iteration costs (loss, gradient, curvature products); `init` costs
one loss and one gradient. A method whose loss is not monotone may also declare
  settling(problem) -> Settling   how long the stall rule must wait, why, and what it ran with
which the driver reads on the host before the run (optimizers.driver.run).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

from convergence_study.errors import InputError
from datasets import values


class Optimizer:
    """The base of every optimizer, shipped or a user's (benchopt's BaseSolver): the optional
    hooks have declared defaults here, so callers never ask hasattr. An iterative one provides
    name, evaluations, setup, init, update; a self-driven one (SciPy, closed form) overrides
    `minimize` instead."""

    # what it can solve: "any", "least-squares" (built on linear least squares) or
    # "plain least-squares" (ignores a ridge term too); see `unsupported`
    solves = "any"
    # the one backend it runs on (its library's; numpy for a self-driven reference), or None
    only_on: str | None = None
    # its step is straight-line code (no branch on the data): a CUDA graph can capture it
    straight_line = False
    # the classical bound of a user's own method (a key of optimizers.bounds.FAMILIES), or None;
    # shipped methods are matched by their name and step (optimizers.bounds.predict)
    family: str | None = None
    # the libraries' default epsilons ({"keras3": 1e-7, ...}): the record says whose the run's is
    epsilons: dict | None = None
    # a library whose classes a config checks all at once, apart, instead of building each one
    # here (Keras: building one would start TensorFlow in the sweep's process):
    # check_apart(points, timeout) gives each (name, parameters) point's None or one-line error
    check_apart = None

    def hyperparameters(self) -> dict:
        """The values a row records: its dataclass fields but `name` (a user's own optimizer
        defines this itself, optimizers.from_file)."""
        found = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                 if f.name != "name"}
        if self.epsilons:
            found["epsilon_convention"] = next(
                (who for who, value in self.epsilons.items() if value == self.epsilon), "custom")
        return found

    def for_problem(self, problem) -> Optimizer:
        """Itself as it runs on `problem` (e.g. L-BFGS's line search made explicit)."""
        return self

    def settling(self, problem) -> Settling | None:
        """How long the stall rule must wait, where the loss is not monotone; None: no wait."""
        return None

    def unavailable(self) -> str | None:
        """Why it cannot run here (its library not installed), or None: the run is skipped."""
        return None

    def state_record(self, state) -> dict | None:
        """Counts only it knows (nfev, ngev, nhvp, columns of its own) from its final state;
        None keeps the fixed per-iteration counts (optimizers.driver.counts)."""
        return None

    def branches(self) -> str | None:
        """Why its step branches on the data (so no CUDA graph can capture it), or None."""
        return None if self.straight_line else "its step is not declared straight-line code"

    def refuse_backend(self, name: str) -> None:
        """One line where it is asked of a backend it does not run on (`only_on`)."""
        if self.only_on not in (None, name):
            raise InputError(f"{self.name} runs on the {self.only_on} backend only, not '{name}'")

    def minimize(self, problem, rules, backend, w0):
        """The run: an iterative method is driven by the backend's loop."""
        return backend.minimize(problem, self, rules, w0)


class PerCoordinate(Optimizer):
    """The adaptive per-coordinate methods (Adam, RMSprop, Adagrad, Adadelta): one loss and
    gradient an iteration, straight-line code, their constants the hyperparameters `Params`
    names (as backend scalars), and a state of w, f, g and the slots `slots` starts."""

    straight_line = True
    evaluations = {"nfev": 1, "ngev": 1, "nhvp": 0}
    Params: type[NamedTuple]
    State: type[NamedTuple]

    def setup(self, problem, objective, ops):
        return self.Params(*(ops.scalar(getattr(self, name)) for name in self.Params._fields))

    def init(self, objective, ops, params, w0):
        return self.State(w0, *objective.value_and_grad(w0), *self.slots(ops, w0))


def construct(cls, name: str, hyperparameters: dict):
    """An optimizer dataclass built from its hyperparameters; an unknown key lists the known."""
    allowed = [f.name for f in dataclasses.fields(cls) if f.name != "name"]
    for key in hyperparameters:
        if key not in allowed:
            raise InputError(f"optimizer '{name}' has no hyperparameter '{key}'; allowed: "
                             f"{', '.join(allowed) or 'none'}")
    return cls(**hyperparameters)


def hyperparameter(optimizer: str, name: str, value, spec: values.Value):
    """A hyperparameter checked by datasets.values: `adam: beta_1 must be ..., got ...`."""
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


class Settling(NamedTuple):
    """A method whose loss is not monotone: the stall rule waits `patience` iterations (`why`
    joins its message), and `record` joins the run's row."""

    patience: int
    why: str
    record: dict


def unsupported(optimizer, problem) -> str | None:
    """Why `optimizer` cannot solve `problem` (its `solves`), or None."""
    solves = optimizer.solves
    if solves == "any":
        return None
    if problem.objective != "least-squares":
        return f"{optimizer.name} solves least squares only, not {problem.objective} regression"
    if solves == "plain least-squares" and problem.lam:
        return f"{optimizer.name} solves plain least squares only, not with a ridge term (lam)"
    return None
