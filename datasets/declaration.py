"""What a data set is, declared once beside its code: its parameters and their types, whether
the run's seed draws it, which objective it poses, which parameter --rows sets, which parameters
name input files. Everything else (the config checks, the runs' seeds, the command line, the
fingerprints of input files) reads these declarations, so a new data set is its module alone,
plus its name in datasets/__init__.py."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from convergence_study.errors import InputError
from datasets.values import Value, check_values


@dataclass(frozen=True)
class Dataset:
    name: str
    load: Callable  # (**parameters) -> Problem
    parameters: dict[str, Value]  # every parameter with its type and range
    seeded: bool  # a `seed` parameter draws it; a run's seed fills it in unless set
    objective: str | None = "least-squares"  # None: the `objective` parameter decides
    rows: str | None = None  # the parameter --rows sets
    files: tuple[str, ...] = ()  # parameters that name an input file (hashed into fingerprints)
    required: tuple[str, ...] = ()  # parameters without a default
    check: Callable | None = None  # the rules between parameters and the memory estimate

    def validate(self, params: dict) -> dict:
        """Names, types and ranges, then the cross rules: without making any data."""
        missing = [key for key in self.required if key not in params]
        if missing:
            raise InputError(f"dataset '{self.name}' needs {', '.join(missing)} (--{missing[0]} "
                             f"on the command line, {missing[0]} = ... in a config)")
        checked = check_values(f"dataset '{self.name}'", params, self.parameters)
        if self.check is not None:
            self.check(**checked)
        return checked

    def objective_of(self, params: dict) -> str:
        return self.objective or params.get("objective", "least-squares")
