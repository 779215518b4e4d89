"""Optimizers by name, backends by name, and `run` for one configuration."""

from __future__ import annotations

from datasets.errors import InputError
from optimizers.adadelta import Adadelta
from optimizers.adagrad import Adagrad
from optimizers.adam import Adam
from optimizers.backends.registry import BACKENDS, make_backend
from optimizers.base import construct
from optimizers.cgls import CGLS
from optimizers.closed_form import ClosedForm
from optimizers.driver import INITS, run
from optimizers.from_file import checked as from_file
from optimizers.from_file import checked_library, checked_transform, is_file_name, torch_class
from optimizers.gd import GradientDescent
from optimizers.keras_optimizer import KERAS_PREFIX, KerasOptimizer
from optimizers.lbfgs import LBFGS
from optimizers.momentum import Momentum, Nesterov
from optimizers.optax_file import OPTAX_PREFIX, OptaxTransform, optax_factory
from optimizers.optax_lbfgs import OptaxLBFGS
from optimizers.rmsprop import RMSprop
from optimizers.scipy_krylov import ScipyLSMR, ScipyLSQR
from optimizers.scipy_lbfgs import ScipyLBFGS
from optimizers.stopping import build_rules
from optimizers.tfp_lbfgs import TfpLBFGS
from optimizers.torch_optimizer import TORCH_PREFIX, TorchOptimizer

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
    "lbfgs-tfp": TfpLBFGS,  # TensorFlow Probability's, on the tensorflow backend (extra 'tfp')
    "optax-lbfgs": OptaxLBFGS,  # optax's, with its zoom line search, on the jax backend
    "scipy-lbfgs": ScipyLBFGS,
    "scipy-lsqr": ScipyLSQR,
    "scipy-lsmr": ScipyLSMR,
    "closed-form": ClosedForm,
}
# a library's own optimizer object by class name: `keras:Adam`, `torch:LBFGS`
PREFIXES = {KERAS_PREFIX: KerasOptimizer, TORCH_PREFIX: TorchOptimizer}
# the harnesses a library's optimizer runs through (a file's optax factory: optax_file.py)
LIBRARIES = {**PREFIXES, OPTAX_PREFIX: OptaxTransform}


def prefix_of(name: str) -> str | None:
    """The library prefix a name starts with (`keras:`, `torch:`), or None."""
    return next((prefix for prefix in PREFIXES if name.startswith(prefix)), None)


def library_of(name: str) -> str | None:
    """The library whose harness runs a name (a key of LIBRARIES): its prefix, `torch:` for a
    file's torch.optim.Optimizer subclass, `optax:` for a file's optax factory; None for ours
    and a user's own Optimizer."""
    if is_file_name(name):
        return (TORCH_PREFIX if torch_class(name) is not None else
                OPTAX_PREFIX if optax_factory(name) is not None else None)
    return prefix_of(name)


def make_optimizer(name: str, **hyperparameters):
    """Build the named optimizer; unknown names or hyperparameters list the allowed ones.
    `keras:<Class>` is Keras's optimizer of that class and `torch:<Class>` torch.optim's, their
    parameters the library's own; `path/to/file.py:Name` is a user's own (optimizers.from_file).
    """
    if is_file_name(name):
        library = torch_class(name)  # a torch.optim.Optimizer subclass: torch.optim's harness
        if library is not None:
            return checked_library(name, lambda: TorchOptimizer(name, library,
                                                                 **hyperparameters))
        factory = optax_factory(name)  # a function returning an optax GradientTransformation
        if factory is not None:
            return checked_transform(name, OptaxTransform(name, factory, **hyperparameters))
        return from_file(name, hyperparameters, shipped=tuple(OPTIMIZERS))
    prefix = prefix_of(name)
    if prefix is not None:
        return PREFIXES[prefix](name[len(prefix):], **hyperparameters)
    cls = OPTIMIZERS.get(name)
    if cls is None:
        raise InputError(f"unknown optimizer '{name}'; allowed: {', '.join(OPTIMIZERS)}, "
                         + ", ".join(f"{p}<Class>" for p in PREFIXES) + ", path/to/file.py:Name")
    return construct(cls, name, hyperparameters)


__all__ = ["BACKENDS", "INITS", "KERAS_PREFIX", "LIBRARIES", "OPTIMIZERS", "PREFIXES",
           "TORCH_PREFIX", "build_rules", "library_of", "make_backend", "make_optimizer",
           "prefix_of", "run"]
