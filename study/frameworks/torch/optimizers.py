"""torch.optim's own optimizers by name (`torch:LBFGS`, `torch:Adam`, ...) on the torch backend
(docs/regress.md says how they run and what the record holds).

The library's optimizer updates a parameter tensor whose `.grad` we set from the objective's
analytic gradient (no autograd graph). For LBFGS, the state at the accepted point is the line
search's own evaluation there. In `compiled` the library's step stays out of the compiled graph
(`torch.compiler.disable`): LBFGS's closure-driven line search would break the graph at every
branch. The hyperparameters the harness fixes (FIXED) are refused.
"""

from __future__ import annotations

import inspect
import json
import sys
from typing import NamedTuple

from convergence_study.errors import InputError, first_line
from datasets.user_file import load, split
from optimizers.base import Optimizer
from optimizers.from_file import call
from optimizers.ranges import FRACTION, NONNEGATIVE, RATE, UNIT, check_ranges
from study.frameworks.registry import FRAMEWORKS

TORCH_PREFIX = PREFIX = "torch:"  # a torch.optim optimizer by class name
CLASSES = ("LBFGS", "SGD", "Adam", "RMSprop", "Adagrad", "Adadelta")
TORCH_RANGES = {
    "lr": RATE, "eps": RATE,
    "momentum": FRACTION, "alpha": FRACTION, "rho": FRACTION, "betas[0]": FRACTION,
    "betas[1]": FRACTION, "dampening": UNIT,
    "weight_decay": NONNEGATIVE, "lr_decay": NONNEGATIVE, "initial_accumulator_value": NONNEGATIVE,
}
COUNTS = ("history_size",)
SWITCHES = ("nesterov", "amsgrad", "centered", "capturable", "differentiable",
            "decoupled_weight_decay", "foreach", "fused")  # True or False; the last two also None
# what the harness sets, for every class that has the parameter
FIXED = {"maximize": False,  # the study minimises
         "max_iter": 1, "max_eval": 1, "tolerance_grad": 0.0, "tolerance_change": 0.0,
         "line_search_fn": "strong_wolfe"}


class TorchState(NamedTuple):
    w: object
    f: object
    g: object


def _torch():
    """torch; where it is not installed, one line naming the extra (looked up once: an LBFGS
    step calls this inside the timed loop)."""
    if "torch" not in sys.modules:

        FRAMEWORKS["torch"].require()
    import torch

    return torch


class TorchOptimizer(Optimizer):
    only_on = "torch"
    evaluations = {"nfev": 1, "ngev": 1, "nhvp": 0}  # nominal; `report` gives the counts

    def __init__(self, class_name: str, library_class=None, **config):
        # library_class: a user's own torch.optim.Optimizer subclass (optimizers.from_file)
        self.class_name, self.config, self.library_class = class_name, dict(config), library_class
        self.name = PREFIX + (library_class.__name__ if library_class else class_name)
        self._param = self._library = self._eager_step = None
        self._evaluations = 0
        self._build(_torch().zeros(1))  # refuses a bad class or parameter before any data

    def _arguments(self) -> dict:
        """The class's keyword arguments: the config checked, with the harness's own values."""
        _torch()  # installed, or one line naming the extra
        if self.class_name not in CLASSES and self.library_class is None:
            raise InputError(f"unknown torch optimizer '{self.class_name}'; allowed: "
                             f"{', '.join(CLASSES)}")
        return torch_arguments(self.name, self._class(), self.config, FIXED)

    def _build(self, param):
        arguments = self._arguments()
        try:
            return self._class()([param], **arguments)
        except (TypeError, ValueError) as exc:  # the library's own checks, e.g. nesterov
            raise InputError(f"{self.name}: {first_line(exc)}") from None

    def _class(self):
        return self.library_class or getattr(_torch().optim, self.class_name)

    def hyperparameters(self) -> dict:
        return dict(self.config)

    def setup(self, problem, objective, ops):
        torch = _torch()
        self._param = torch.zeros((problem.d, problem.k), dtype=ops.torch_dtype,
                                  device=ops.device)
        self._library = self._build(self._param)
        step = self._lbfgs_step if self.class_name == "LBFGS" else self._step
        self._eager_step = torch.compiler.disable(step)  # see the module docstring
        return ()

    def init(self, objective, ops, params, w0) -> TorchState:
        """The start point in the parameter and the library's state emptied (a compiled run's
        warm-up has stepped it); the object itself is kept, so a compiled step's guards hold."""
        self._param.copy_(w0)
        self._library.state.clear()
        self._evaluations = 1
        w = self._param.clone()
        return TorchState(w, *objective.value_and_grad(w))

    def update(self, objective, ops, params, state) -> TorchState:
        if self.class_name == "LBFGS":
            return self._eager_step(objective)
        self._eager_step(state.g)
        w = self._param.clone()
        return TorchState(w, *objective.value_and_grad(w))

    def _step(self, g) -> None:
        self._param.grad = g
        self._library.step()
        self._evaluations += 1  # the evaluation at the new iterate, which follows

    def _lbfgs_step(self, objective) -> TorchState:
        """One LBFGS step; the state at the accepted point from the closure's evaluations."""
        torch = _torch()
        param, seen = self._param, []

        def closure():
            f, g = objective.value_and_grad(param)
            param.grad = g
            seen.append((param.clone(), f, g))
            return f

        self._library.step(closure)
        self._evaluations += len(seen)
        for x, f, g in reversed(seen):  # the accepted point is x + t d, bitwise as evaluated
            if torch.equal(x, param):
                return TorchState(x, f, g)
        self._evaluations += 1  # not evaluated where it ended: one evaluation more
        w = param.clone()
        return TorchState(w, *objective.value_and_grad(w))

    def state_record(self, state) -> dict:
        """Every evaluation the run made, and what the record says of the library's object."""
        torch = _torch()
        return {"nfev": self._evaluations, "ngev": self._evaluations, "nhvp": 0,
                "torch_class": type(self._library).__name__,
                "torch_config": json.dumps(self._library.defaults, sort_keys=True, default=str),
                "torch_version": torch.__version__}


def torch_arguments(name: str, cls, config: dict, fixed: dict) -> dict:
    """A torch.optim class's keyword arguments: `config` checked against its signature, the
    switches and the study's ranges, what the caller sets (`fixed`) refused in it and added."""
    accepted = [p for p in inspect.signature(cls).parameters if p != "params"]
    fixed = {k: v for k, v in fixed.items() if k in accepted}
    allowed = [p for p in accepted if p not in fixed]
    for key, value in config.items():
        if key in fixed:
            raise InputError(f"{name}: {key} is set by the harness ({fixed[key]!r}); "
                             f"allowed: {', '.join(allowed)}")
        if key not in allowed:
            raise InputError(f"{name} has no parameter '{key}'; allowed: {', '.join(allowed)}")
        if key in SWITCHES and not (isinstance(value, bool) or (
                value is None and key in ("foreach", "fused"))):
            raise InputError(f"{name}: {key} must be true or false, got {value!r}")
    numbers = dict(config)
    betas = numbers.pop("betas", None)
    if betas is not None:
        if not isinstance(betas, (list, tuple)) or len(betas) != 2:
            raise InputError(f"{name}: betas must be a pair [beta1, beta2], got {betas!r}")
        numbers.update({"betas[0]": betas[0], "betas[1]": betas[1]})
    check_ranges(name, numbers, TORCH_RANGES, COUNTS)
    return {**config, **fixed, **({"betas": tuple(betas)} if betas is not None else {})}


def torch_class(name: str):
    """The torch.optim.Optimizer subclass `path.py:Name` names (torch.optim's harness runs it,
    this module's TorchOptimizer), or None: the file's object is for `checked`. A file that
    subclasses torch's has imported torch."""
    found = load(name, "optimizer")
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(found, type) or not issubclass(found, torch.optim.Optimizer):
        return None
    if issubclass(found, torch.optim.LBFGS):
        raise InputError(f"{split(name)[0]}: {found.__name__} steps with a closure (as "
                         "torch.optim.LBFGS does): from a file, only a step on the gradient "
                         "(optimizer.step()) runs; torch:LBFGS is torch's own")
    return found


def build(name: str, library, hyperparameters: dict):
    """torch.optim's harness running a file's subclass (optimizers.from_file), stepped once on a
    small parameter with a unit gradient: a step that raises or is not finite is one line naming
    the file."""
    torch = sys.modules["torch"]
    where = f"{split(name)[0]}: {split(name)[1]}"
    optimizer = call(where, "building it",
                     lambda: TorchOptimizer(name, library, **hyperparameters))
    param = torch.zeros((4, 1), dtype=torch.float64)
    built = optimizer._build(param)
    param.grad = torch.ones_like(param)
    call(where, "step", built.step)
    if not bool(torch.isfinite(param).all()):
        raise InputError(f"{where}: the first step is not finite (a unit gradient from zeros)")
    return optimizer
