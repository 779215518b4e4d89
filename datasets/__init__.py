"""Data sets by name: each factory returns a validated Problem (least squares or logistic)."""

from __future__ import annotations

from typing import NamedTuple

from convergence_study.errors import InputError
from datasets import eve, from_file, synthetic, tabular
from datasets.declaration import Dataset
from datasets.problem import Problem, Spectrum
from datasets.user_file import is_file_name

DATASETS = {d.name: d for d in (eve.DATASET, synthetic.DATASET, synthetic.LOGISTIC,
                                 tabular.DATASET)}


def dataset(name: str) -> Dataset:
    """A data set's declaration (datasets.declaration), a user's `path.py:load`
    (datasets.from_file), or one line listing the names."""
    if is_file_name(name):
        return from_file.declaration(name)
    found = DATASETS.get(name)
    if found is None:
        raise InputError(f"unknown dataset '{name}'; allowed: {', '.join(DATASETS)}, "
                         "path/to/file.py:load")
    return found


def validate_dataset(name: str, **params) -> None:
    """Check a data set's name, parameter names and values without generating any data."""
    dataset(name).validate(params)


class ProblemKind(NamedTuple):
    """What the checks of an optimizer against a problem read, known without making the data:
    the objective and the ridge term (see optimizers.driver.for_problem)."""

    objective: str
    lam: float


def problem_kind(name: str, params: dict) -> ProblemKind:
    return ProblemKind(dataset(name).objective_of(params), float(params.get("lam") or 0.0))


def make_problem(name: str, **params) -> Problem:
    """Build the named data set, its parameters checked against its declaration first."""
    declared = dataset(name)
    declared.validate(params)
    return declared.load(**params)


__all__ = ["DATASETS", "Dataset", "InputError", "Problem", "ProblemKind", "Spectrum", "dataset",
           "make_problem", "problem_kind", "validate_dataset"]
