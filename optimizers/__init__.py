"""Optimizers by name and `run` for one configuration."""

from __future__ import annotations

import dataclasses

from datasets.errors import InputError
from optimizers.adadelta import Adadelta
from optimizers.adagrad import Adagrad
from optimizers.adam import Adam
from optimizers.cgls import CGLS
from optimizers.closed_form import ClosedForm
from optimizers.driver import INITS, run
from optimizers.gd import GradientDescent
from optimizers.lbfgs import LBFGS
from optimizers.momentum import Momentum, Nesterov
from optimizers.rmsprop import RMSprop
from optimizers.scipy_krylov import ScipyLSMR, ScipyLSQR
from optimizers.scipy_lbfgs import ScipyLBFGS
from optimizers.stopping import build_rules

OPTIMIZERS = {
    "gd": GradientDescent,
    "adadelta": Adadelta,
    "momentum": Momentum,
    "nesterov": Nesterov,
    "adam": Adam,
    "rmsprop": RMSprop,
    "adagrad": Adagrad,
    "cgls": CGLS,
    "lbfgs": LBFGS,
    "scipy-lbfgs": ScipyLBFGS,
    "scipy-lsqr": ScipyLSQR,
    "scipy-lsmr": ScipyLSMR,
    "closed-form": ClosedForm,
}
# a library's own optimizer object by class name (`keras:Adam`, `torch:LBFGS`): prefix -> class.
# This table and OPTIMIZERS are completed by the framework folders (study/frameworks/<name>/), which
# add their libraries' optimizers when study.frameworks is imported.
PREFIXES: dict[str, type] = {}


def prefix_of(name: str) -> str | None:
    """The library prefix a name starts with (`keras:`, `torch:`), or None."""
    return next((prefix for prefix in PREFIXES if name.startswith(prefix)), None)


def make_optimizer(name: str, **hyperparameters):
    """Build the named optimizer; unknown names or hyperparameters list the allowed ones.
    `keras:<Class>` is Keras's optimizer of that class and `torch:<Class>` torch.optim's, their
    parameters the library's own."""
    prefix = prefix_of(name)
    if prefix is not None:
        return PREFIXES[prefix](name[len(prefix):], **hyperparameters)
    cls = OPTIMIZERS.get(name)
    if cls is None:
        raise InputError(f"unknown optimizer '{name}'; allowed: {', '.join(OPTIMIZERS)}, "
                         + ", ".join(f"{p}<Class>" for p in PREFIXES))
    allowed = [f.name for f in dataclasses.fields(cls) if f.name != "name"]
    for key in hyperparameters:
        if key not in allowed:
            raise InputError(f"optimizer '{name}' has no hyperparameter '{key}'; allowed: "
                             f"{', '.join(allowed) or 'none'}")
    return cls(**hyperparameters)


__all__ = ["INITS", "OPTIMIZERS", "PREFIXES", "build_rules", "make_optimizer", "prefix_of", "run"]
