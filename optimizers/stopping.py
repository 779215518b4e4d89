"""Stopping rules: each says whether it fires at the current iterate and with which status.

Rules only use comparisons and arithmetic on the values in `Context`, so the same rule objects
work on the host (Python/NumPy scalars) and as tensor predicates inside a TensorFlow loop. A rule
that needs memory (a patience counter) keeps it in a small tuple of scalars it initialises itself.
`StoppingRules` composes rules as any-of; divergence is always checked first.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import sys
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from convergence_study.errors import InputError
from datasets import values

# What a run itself can end with (a study's measure adds its own: study.sweep.plugin's
# MEASURE_STATUSES); the runner adds "error" and "oom" for runs that end abnormally.
# "converged" is a claim: the target tol was reached (and the float64 check of the final iterate
# agrees, optimizers.driver.run); every other rule's status names what stopped the run instead.
STOPPING_STATUSES = ("converged", "grad_tol", "stalled", "max_iter", "timeout", "diverged",
                     "solved", "skipped", "failed", "reference-error")
# "grad_tol": the gradient-norm rule fired (a small gradient is not the target)
# "solved": a direct solve (closed form) run without a target, or that missed it (rounding)
# "skipped": the run could not start here (a GPU asked for but none visible); set by a backend
# "failed": a closed-form solve that LAPACK refused (Cholesky of a singular X^T X), or a
# library optimizer whose own update failed (convergence_study.errors.LibraryFailure, in a sweep)
# "reference-error": the final loss is below the certified f* by more than its accuracy


class Context(NamedTuple):
    iteration: object  # iterations done so far (0 at the starting point)
    elapsed: object  # seconds in the timed region so far
    f: object  # loss at the current iterate
    f0: object  # loss at the starting point
    f_prev: object  # loss at the previous iterate (NaN at the start)
    suboptimality: object  # (f - f*) / f*
    grad_norm: object  # ||g||_2


def _tolerance(name: str, value) -> float:
    return values.positive().check(f"stopping rule: {name}", value)


def _count(name: str, value) -> int:
    return values.integer(1).check(f"stopping rule: {name}", value)


class Quiet(NamedTuple):
    """Where a rule cannot fire: a loss in (low, high], before `iterations` and `seconds`. The
    host loop skips the full check of an iterate inside every rule's region (a few comparisons)."""

    low: float = -math.inf
    high: float = math.inf
    iterations: float = math.inf
    seconds: float = math.inf


class Rule:
    """What every rule shares: no memory unless it keeps one, and its message from `reason`."""

    def init_state(self, ops):
        return ()

    def quiet(self, problem, f0) -> Quiet | None:
        """Where this rule cannot fire, for a run from loss f0 (None: a rule with memory, or
        one that reads more than the loss, iteration and clock, is checked at every iterate)."""
        return None

    def message(self, iteration: int) -> str:
        return f"{self.reason()} at iteration {iteration}"


@dataclass(frozen=True)
class Suboptimality(Rule):
    """(f - f*) / f* <= tol: the common target every backend is timed to."""

    tol: float
    status = "converged"

    def __post_init__(self):
        _tolerance("tol", self.tol)

    def reason(self) -> str:
        return f"suboptimality reached tol {self.tol:g}"

    def check(self, ops, ctx, state):
        return ctx.suboptimality <= self.tol, state

    def quiet(self, problem, f0) -> Quiet:
        """suboptimality = (f - f*) / scale (datasets.problem) <= tol only where
        f <= f* + tol * scale up to a few roundings, which the margins cover."""
        slack = self.tol * problem.reference.scale * (1 + 1e-9)
        return Quiet(low=problem.f_star + slack + 1e-15 * (abs(problem.f_star) + slack))


@dataclass(frozen=True)
class GradientNorm(Rule):
    """||g|| <= tol: a small gradient, which says nothing of the suboptimality target."""

    tol: float
    status = "grad_tol"

    def __post_init__(self):
        _tolerance("grad_tol", self.tol)

    def reason(self) -> str:
        return f"the gradient norm fell to grad_tol {self.tol:g}"

    def check(self, ops, ctx, state):
        return ctx.grad_norm <= self.tol, state


@dataclass(frozen=True)
class RelativeImprovement(Rule):
    """No new best loss for `patience` iterations: the run has stalled.

    As Keras's EarlyStopping (min_delta relative here): the count is of iterations since a loss
    last beat the best by more than tol relative, so small improvements add up and a floor's
    rounding noise cannot keep resetting it. A method whose loss rises and falls declares a
    longer patience (optimizers.base.Settling), and `why` says so in the message."""

    tol: float
    patience: int = 10
    why: str = ""
    status = "stalled"

    def __post_init__(self):
        _tolerance("rel_tol", self.tol)
        _count("patience", self.patience)

    def reason(self, best_at: str = "") -> str:
        return (f"no improvement over the best loss{best_at} by more than rel_tol "
                f"{self.tol:g} for {self.patience} iterations"
                f"{f' ({self.why})' if self.why else ''}")

    def message(self, iteration: int) -> str:
        best_at = f" (reached at iteration {iteration - self.patience})"
        return f"{self.reason(best_at)} at iteration {iteration}"

    def init_state(self, ops):
        return (ops.scalar(0.0), ops.scalar(0))  # the best loss (set at iteration 0), the count

    def check(self, ops, ctx, state):
        best, count = state
        start = ctx.iteration == 0
        improved = (best - ctx.f) > self.tol * ops.abs(best)
        best = ops.where(start | improved, ctx.f, best)
        count = ops.where(start | improved, 0 * count, count + 1)
        return count >= self.patience, (best, count)


@dataclass(frozen=True)
class ExactRepeat(Rule):
    """The original program's rule: stop when the RMSE equals the previous one exactly."""

    status = "stalled"

    def reason(self) -> str:
        return "the RMSE repeated exactly (the original program's rule)"

    def check(self, ops, ctx, state):
        return ops.sqrt(ctx.f) == ops.sqrt(ctx.f_prev), state


@dataclass(frozen=True)
class MaxIter(Rule):
    max_iter: int
    status = "max_iter"

    def __post_init__(self):
        _count("max_iter", self.max_iter)

    def reason(self) -> str:
        return f"the iteration budget max_iter {self.max_iter} ran out"

    def check(self, ops, ctx, state):
        return ctx.iteration >= self.max_iter, state

    def quiet(self, problem, f0) -> Quiet:
        return Quiet(iterations=self.max_iter)


@dataclass(frozen=True)
class TimeBudget(Rule):
    seconds: float
    status = "timeout"

    def __post_init__(self):
        _tolerance("time_budget", self.seconds)

    def reason(self) -> str:
        return f"the time budget of {self.seconds:g} s ran out"

    def check(self, ops, ctx, state):
        return ctx.elapsed >= self.seconds, state

    def quiet(self, problem, f0) -> Quiet:
        return Quiet(seconds=self.seconds)


# The divergence rule for every study: a loss not finite, or grown past this times its start.
DIVERGENCE_FACTOR = 1e5


@dataclass(frozen=True)
class Divergence(Rule):
    """Loss not finite, or grown past `factor` times its start: recorded, never raised."""

    factor: float = DIVERGENCE_FACTOR
    status = "diverged"

    def reason(self) -> str:
        return f"the loss became non-finite or grew past {self.factor:g} times its start"

    def check(self, ops, ctx, state):
        return ops.logical_or(ops.logical_not(ops.isfinite(ctx.f)),
                              ctx.f > self.factor * ctx.f0), state

    def quiet(self, problem, f0) -> Quiet:
        """A finite loss up to factor * f0: the check's complement (an infinite limit is made
        the largest float, so that an infinite loss is checked; a NaN limit: none is quiet)."""
        limit = self.factor * f0
        limit = sys.float_info.max if limit == math.inf else (
            limit if limit == limit else -math.inf)
        return Quiet(high=limit)

    def past(self, f: float, f0: float) -> bool:
        """This rule on host floats (the train study's loop): a start at or below 0 (a loss that
        can go negative) has no growth to measure."""
        start = f0 if f0 > 0 else float("inf")
        ctx = Context(0, 0.0, f, start, float("nan"), float("nan"), float("nan"))
        return bool(self.check(HOST_OPS, ctx, ())[0])


class HostOps:
    """The operations rules use, on host float64 scalars (a compiled loop passes its framework's
    ops instead): plain Python, the same IEEE arithmetic as NumPy's functions without a 0-d array
    per call (NumPy's took 14 us an iteration with the stall rule, on a step of 60 us)."""

    tiny = float(np.finfo(np.float64).tiny)
    scalar = float
    maximum = staticmethod(lambda a, b: a if a >= b or a != a else b)  # NaN first, as np's
    abs = abs
    where = staticmethod(lambda condition, x, y: x if condition else y)
    isfinite = staticmethod(math.isfinite)
    logical_or = staticmethod(lambda a, b: bool(a or b))
    logical_not = staticmethod(lambda a: not a)
    sqrt = staticmethod(lambda x: math.sqrt(x) if x >= 0 else math.nan)  # NaN below 0, as np's


HOST_OPS = HostOps()


class Ending(NamedTuple):
    """How a run ended: its status, a one-line message, and the rule that fired (None when the
    method stopped by itself), so that callers test the rule, not the message's wording."""

    status: str
    message: str
    rule: object = None


class StoppingRules:
    """Any-of composition. `check` returns (index of the first rule that fired or -1, states)."""

    def __init__(self, rules, spec: dict | None = None):
        rules = list(rules)
        self.spec = dict(spec or {})  # the keyword form, recorded with every run
        if not any(isinstance(r, (MaxIter, TimeBudget)) for r in rules):
            raise InputError("stopping rules need an iteration or time budget (max_iter or "
                             "time_budget) so that every run ends")
        self.rules = [Divergence(), *rules]

    def init_state(self, ops):
        return tuple(rule.init_state(ops) for rule in self.rules)

    def check(self, ops, ctx, states):
        fired, new_states = [], []
        for rule, state in zip(self.rules, states, strict=True):
            hit, state = rule.check(ops, ctx, state)
            fired.append(hit)
            new_states.append(state)
        return fired, tuple(new_states)

    def quiet(self, problem, f0) -> Quiet | None:
        """Where no rule can fire (the rules' Quiet regions intersected), or None when one must
        be checked at every iterate."""
        regions = [rule.quiet(problem, f0) for rule in self.rules]
        if any(region is None for region in regions):
            return None
        return Quiet(max(r.low for r in regions), min(r.high for r in regions),
                     min(r.iterations for r in regions), min(r.seconds for r in regions))

    def first(self, fired) -> int:
        return next((i for i, hit in enumerate(fired) if bool(hit)), -1)

    def ending(self, index: int, iteration: int) -> Ending:
        rule = self.rules[index]
        return Ending(rule.status, rule.message(iteration), rule)

    def waiting(self, patience: int, why: str) -> StoppingRules:
        """A copy whose stall rule waits at least `patience` iterations, saying why (a method
        whose loss is not monotone: optimizers.base.Settling); the spec stays the config's."""
        clone = copy.copy(self)
        clone.rules = [dataclasses.replace(rule, patience=patience,
                                           why=f"patience {rule.patience} raised: {why}")
                       if isinstance(rule, RelativeImprovement) and rule.patience < patience
                       else rule for rule in self.rules]
        return clone

    def stall_patience(self) -> int | None:
        """The patience the stall rule runs with (None without one)."""
        return next((rule.patience for rule in self.rules
                     if isinstance(rule, RelativeImprovement)), None)


def _numeric_fields(rule) -> list[str]:
    return [field.name for field in dataclasses.fields(rule)
            if isinstance(getattr(rule, field.name), (int, float))
            and not isinstance(getattr(rule, field.name), bool)]


def rule_values(rules: StoppingRules) -> tuple:
    """Every numeric field of every rule, in order: what enters a compiled loop as arguments
    (so that a tolerance is an input of the compiled program, not a constant baked into it)."""
    return tuple(float(getattr(rule, name)) for rule in rules.rules
                 for name in _numeric_fields(rule))


def rules_on_tensors(rules: StoppingRules, values) -> StoppingRules:
    """A copy of `rules` whose numeric fields are the given values (traced scalars of a compiled
    loop), in `rule_values`' order."""
    values = list(values)
    clone = copy.copy(rules)
    clone.rules = []
    for rule in rules.rules:
        rule = copy.copy(rule)
        for name in _numeric_fields(rule):
            object.__setattr__(rule, name, values.pop(0))
        clone.rules.append(rule)
    return clone


def build_rules(*, tol=None, grad_tol=None, rel_tol=None, patience=10, exact_repeat=False,
                max_iter=None, time_budget=None) -> StoppingRules:
    """The rules a run asks for by keyword, in a fixed priority order."""
    spec = {"tol": tol, "grad_tol": grad_tol, "rel_tol": rel_tol, "patience": patience,
            "exact_repeat": exact_repeat, "max_iter": max_iter, "time_budget": time_budget}
    _count("patience", patience)
    values.boolean().check("stopping rule: exact_repeat", exact_repeat)
    rules = []
    if tol is not None:
        rules.append(Suboptimality(tol))
    if grad_tol is not None:
        rules.append(GradientNorm(grad_tol))
    if rel_tol is not None:
        rules.append(RelativeImprovement(rel_tol, patience))
    if exact_repeat:
        rules.append(ExactRepeat())
    if max_iter is not None:
        rules.append(MaxIter(max_iter))
    if time_budget is not None:
        rules.append(TimeBudget(time_budget))
    return StoppingRules(rules, spec)
