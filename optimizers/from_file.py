"""A user's own optimizer from a file: `--optimizer path/to/my_method.py:MyMethod`, or
`name = "path/to/my_method.py:MyMethod"` in a study's [[optimizers]] (docs/your-optimizer.md).

It is written as the shipped ones are (optimizers/gd.py) and runs wherever they run, compiled
loops included. Before it is used it is checked once per content and hyperparameters
(`checked`): the class's kind and name, then one step on a small well-conditioned problem on
NumPy. Each failure is one line naming the file and what is wrong (an InputError: exit 2)."""

from __future__ import annotations

import dataclasses
import json
from functools import lru_cache

import numpy as np

from convergence_study.errors import InputError, first_line
from datasets import make_problem
from datasets.user_file import absolute, content_hash, is_file_name, load, split
from optimizers.base import Optimizer, construct
from optimizers.bounds import FAMILIES
from optimizers.objective import make_objective, problem_data

__all__ = ["absolute", "checked", "declared_name", "is_file_name", "provenance"]

ITERATIVE = ("setup", "init", "update", "hyperparameters")  # what it must define itself
STATE_FIELDS = ("w", "f", "g")
EVALUATION_KEYS = ("nfev", "ngev", "nhvp")
# the probe: small, well conditioned, the kind of problem every first-order method solves
PROBE = {"n": 64, "d": 4, "kappa": 10.0, "noise": 0.1, "seed": 0}
# set by the framework folders (study/frameworks): a file's object that a library's harness runs
# (a torch.optim subclass, an optax factory), prefix -> (found(name) -> the object or None,
# build(name, found, hyperparameters) -> optimizer); and the NumPy ops the probe steps on
FILE_LIBRARIES: dict[str, tuple] = {}
PROBE_OPS: list = []  # [make(dtype) -> ArrayOps]


def optimizer_class(name: str, shipped=()) -> type:
    """The class `path.py:Name` names, checked to be an optimizer written as ours are;
    `shipped`: the names it may not take."""
    path, attribute = split(name)
    where = f"{path}: {attribute}"
    cls = load(name, "optimizer")
    if not isinstance(cls, type) or not issubclass(cls, Optimizer):
        raise InputError(f"{where} is not an optimizer: a class deriving from "
                         f"optimizers.base.Optimizer is needed, got {describe(cls)}")
    if not dataclasses.is_dataclass(cls):
        raise InputError(f"{where} is not a dataclass: declare its hyperparameters as fields "
                         "with @dataclass(frozen=True), as optimizers/gd.py does")
    missing = [m for m in ITERATIVE if not callable(getattr(cls, m, None))
               or getattr(cls, m) is getattr(Optimizer, m, None)]
    if missing:
        raise InputError(f"{where} is not an iterative optimizer: it defines no "
                         f"{', '.join(missing)} (see optimizers/base.py)")
    declared = getattr(cls, "name", None)
    if not isinstance(declared, str) or not declared or ":" in declared or declared in shipped:
        raise InputError(f"{where}: its `name` (its label) must be a non-empty string without "
                         f"':' and not a shipped optimizer's, got {declared!r}")
    evaluations = getattr(cls, "evaluations", None)
    if not isinstance(evaluations, dict) or set(evaluations) != set(EVALUATION_KEYS) or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0
            for v in evaluations.values()):
        raise InputError(f"{where}: `evaluations` must say what one iteration costs, as "
                         f"{{'nfev': 1, 'ngev': 1, 'nhvp': 0}}, got {evaluations!r}")
    if cls.family is not None and cls.family not in FAMILIES:
        raise InputError(f"{where}: unknown family {cls.family!r}; allowed: "
                         f"{', '.join(FAMILIES)} or None (no bound)")
    return cls


def describe(value) -> str:
    return f"the class {value.__name__}" if isinstance(value, type) else \
        f"a {type(value).__name__}"


def declared_name(name: str) -> str:
    """The label of `path.py:Name` (its class's `name`), or the class's own name where the file
    cannot be read any more."""
    try:
        for prefix, (found, _) in FILE_LIBRARIES.items():
            library = found(name)
            if library is not None:  # a library's optimizer: by the library and its own name
                return f"{prefix}{library.__name__}"
        return optimizer_class(name).name
    except InputError:
        return split(name)[1]


def checked(name: str, hyperparameters: dict, shipped=()) -> Optimizer:
    """The user's optimizer built and probed, once per file content and hyperparameters."""
    path, _ = split(name)
    key = json.dumps(hyperparameters, sort_keys=True, default=str)
    return _checked(name, content_hash(path.resolve()) if path.is_file() else "", key,
                    tuple(shipped))


@lru_cache(maxsize=64)
def _checked(name: str, _content: str, key: str, shipped: tuple) -> Optimizer:
    cls = optimizer_class(name, shipped)
    where = f"{split(name)[0]}: {split(name)[1]}"
    try:
        optimizer = construct(cls, cls.name, json.loads(key))
    except InputError as exc:
        raise InputError(f"{where}: {exc}") from None
    except Exception as exc:
        raise InputError(f"{where}(...) raised {type(exc).__name__}: {first_line(exc)}") from None
    probe(optimizer, where)
    return optimizer


def probe(optimizer, where: str) -> None:
    """One setup, init and update on a small problem on NumPy: a broken file is refused in one
    line before any data set is made."""
    problem = make_problem("synthetic", **PROBE)
    ops = PROBE_OPS[0]("float64")
    objective = make_objective(ops, problem_data(ops, problem, "data"), "data", problem.objective)
    w0 = np.zeros((problem.d, problem.k))
    with np.errstate(all="ignore"):  # a non-finite step is said below, not warned about
        params = call(where, "setup", optimizer.setup, problem, objective, ops)
        state = call(where, "init", optimizer.init, objective, ops, params, w0)
        check_state(where, "init", state, None, w0.shape)
        after = call(where, "update", optimizer.update, objective, ops, params, state)
        check_state(where, "update", after, state, w0.shape)
    values = [np.asarray(after.f, dtype=float), np.asarray(after.w, dtype=float)]
    if not all(np.isfinite(v).all() for v in values):
        raise InputError(f"{where}: the first step is not finite (loss {float(values[0]):.3g}) "
                         f"on a small well-conditioned problem (synthetic {PROBE})")


def call(where: str, what: str, method, *args):
    try:
        return method(*args)
    except InputError:
        raise
    except Exception as exc:
        raise InputError(f"{where}: {what} raised {type(exc).__name__}: "
                         f"{first_line(exc)}") from None


def check_state(where: str, what: str, state, before, shape) -> None:
    """A NamedTuple with w, f and g at least (the stopping rules read them), of init's type,
    w and g of w0's shape, f a scalar."""
    fields = getattr(state, "_fields", None)
    if not isinstance(state, tuple) or fields is None or not set(STATE_FIELDS) <= set(fields):
        raise InputError(f"{where}: {what} must return a NamedTuple with at least the fields "
                         f"w, f, g (the iterate, its loss and gradient), got "
                         f"{type(state).__name__}{tuple(fields) if fields else ''}")
    if before is not None and type(state) is not type(before):
        raise InputError(f"{where}: update must return the state type init returns "
                         f"({type(before).__name__}), got {type(state).__name__}")
    for field in ("w", "g"):
        got = np.shape(getattr(state, field))
        if got != shape:
            raise InputError(f"{where}: {what}'s state.{field} has shape {got}, not the "
                             f"iterate's {shape}")
    if np.ndim(state.f) != 0:
        raise InputError(f"{where}: {what}'s state.f must be the loss (a scalar), got shape "
                         f"{np.shape(state.f)}")


def provenance(name: str) -> dict:
    """The row's columns for a file's optimizer: the file and its content's hash."""
    path, _ = split(name)
    path = path.resolve()
    return {"optimizer_file": str(path),
            "optimizer_file_sha256": content_hash(path) if path.is_file() else None}
