"""Data sets by name: each factory returns a validated Problem (least squares or logistic)."""

from __future__ import annotations

import inspect

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
    try:
        VALIDATORS[name](**params)
    except TypeError as exc:  # a required parameter is missing
        raise InputError(f"dataset '{name}': {exc}") from None


def objective_of(name: str, params: dict) -> str:
    """The objective a data set's parameters make, known without making it."""
    return "logistic" if name == "synthetic-logistic" else params.get("objective",
                                                                        "least-squares")


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


__all__ = ["DATASETS", "InputError", "Problem", "Spectrum", "make_problem", "objective_of",
           "validate_dataset"]
