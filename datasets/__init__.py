"""Data sets by name: each factory returns a validated least-squares Problem."""

from __future__ import annotations

import inspect

from datasets import eve, synthetic, tabular
from datasets.errors import InputError
from datasets.problem import Problem, Spectrum

DATASETS = {"eve": eve.load, "synthetic": synthetic.load, "tabular": tabular.load}


def make_problem(name: str, **params) -> Problem:
    """Build the named data set; unknown names and parameters are rejected with the allowed ones."""
    factory = DATASETS.get(name)
    if factory is None:
        raise InputError(f"unknown dataset '{name}'; allowed: {', '.join(DATASETS)}")
    allowed = list(inspect.signature(factory).parameters)
    for key in params:
        if key not in allowed:
            raise InputError(f"dataset '{name}' has no parameter '{key}'; allowed: "
                             f"{', '.join(allowed)}")
    return factory(**params)


__all__ = ["DATASETS", "InputError", "Problem", "Spectrum", "make_problem"]
