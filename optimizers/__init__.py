"""Optimizers by name and `run` for one configuration."""

from __future__ import annotations

from convergence_study.errors import InputError
from optimizers.adadelta import Adadelta
from optimizers.adagrad import Adagrad
from optimizers.adam import Adam
from optimizers.base import construct
from optimizers.cgls import CGLS
from optimizers.closed_form import ClosedForm
from optimizers.driver import INITS, run
from optimizers.from_file import FILE_LIBRARIES, is_file_name
from optimizers.from_file import checked as from_file
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
# This table, OPTIMIZERS and optimizers.from_file.FILE_LIBRARIES are completed by the framework
# folders (study/frameworks/<name>/), which add their libraries' optimizers when study.frameworks
# is imported: the algorithms' layer never imports a framework's.
PREFIXES: dict[str, type] = {}


def prefix_of(name: str) -> str | None:
    """The library prefix a name starts with (`keras:`, `torch:`), or None."""
    return next((prefix for prefix in PREFIXES if name.startswith(prefix)), None)


def library_of(name: str) -> str | None:
    """The library whose harness runs a name (a key of PREFIXES or FILE_LIBRARIES): its prefix,
    `torch:` for a file's torch.optim.Optimizer subclass, `optax:` for a file's optax factory;
    None for ours and a user's own Optimizer."""
    if is_file_name(name):
        return next((prefix for prefix, (found, _) in FILE_LIBRARIES.items()
                     if found(name) is not None), None)
    return prefix_of(name)


def make_optimizer(name: str, **hyperparameters):
    """Build the named optimizer; unknown names or hyperparameters list the allowed ones.
    `keras:<Class>` is Keras's optimizer of that class and `torch:<Class>` torch.optim's, their
    parameters the library's own; `path/to/file.py:Name` is a user's own (optimizers.from_file).
    """
    if is_file_name(name):
        for found, build in FILE_LIBRARIES.values():  # a torch.optim subclass, an optax factory
            library = found(name)
            if library is not None:
                return build(name, library, hyperparameters)
        return from_file(name, hyperparameters, shipped=tuple(OPTIMIZERS))
    prefix = prefix_of(name)
    if prefix is not None:
        return PREFIXES[prefix](name[len(prefix):], **hyperparameters)
    cls = OPTIMIZERS.get(name)
    if cls is None:
        raise InputError(f"unknown optimizer '{name}'; allowed: {', '.join(OPTIMIZERS)}, "
                         + ", ".join(f"{p}<Class>" for p in PREFIXES) + ", path/to/file.py:Name")
    return construct(cls, name, hyperparameters)


__all__ = ["INITS", "OPTIMIZERS", "PREFIXES", "build_rules", "library_of",
           "make_optimizer", "prefix_of", "run"]
