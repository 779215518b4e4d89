"""Data sets by name: each factory returns a validated Problem (least squares or logistic)."""

from __future__ import annotations

import inspect
from typing import NamedTuple

from datasets import eve, synthetic, synthetic_logistic, tabular
from datasets.errors import InputError
from datasets.problem import Problem, Spectrum

DATASETS = {"eve": eve.load, "synthetic": synthetic.load,
            "synthetic-logistic": synthetic_logistic.load, "tabular": tabular.load}
VALIDATORS = {"eve": eve.validate_params, "synthetic": synthetic.validate_params,
              "synthetic-logistic": synthetic_logistic.validate_params,
              "tabular": tabular.validate_params}


def validate_dataset(name: str, **params) -> None:
    """Check a data set's name, parameter names and values without generating any data."""
    _check_names(name, params)
    required = [p.name for p in inspect.signature(VALIDATORS[name]).parameters.values()
                if p.default is p.empty]
    missing = [key for key in required if key not in params]
    if missing:
        raise InputError(f"dataset '{name}' needs {', '.join(missing)} (--{missing[0]} on the "
                         f"command line, {missing[0]} = ... in a config)")
    VALIDATORS[name](**params)


class ProblemKind(NamedTuple):
    """What the checks of an optimizer against a problem read, known without making the data:
    the objective and the ridge term (see optimizers.driver.for_problem)."""

    objective: str
    lam: float


def problem_kind(name: str, params: dict) -> ProblemKind:
    objective = "logistic" if name == "synthetic-logistic" else params.get("objective",
                                                                           "least-squares")
    return ProblemKind(objective, float(params.get("lam") or 0.0))


def make_problem(name: str, **params) -> Problem:
    """Build the named data set; unknown names and parameters are rejected with the allowed ones."""
    _check_names(name, params)
    return DATASETS[name](**params)


def _check_names(name: str, params: dict) -> None:
    factory = DATASETS.get(name)
    if factory is None:
        raise InputError(f"unknown dataset '{name}'; allowed: {', '.join(DATASETS)}")
    allowed = list(inspect.signature(factory).parameters)
    for key in params:
        if key not in allowed:
            raise InputError(f"dataset '{name}' has no parameter '{key}'; allowed: "
                             f"{', '.join(allowed)}")


__all__ = ["DATASETS", "InputError", "Problem", "ProblemKind", "Spectrum", "make_problem",
           "problem_kind", "validate_dataset"]
