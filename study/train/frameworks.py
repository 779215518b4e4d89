"""The train study's frameworks and the one way its code reaches one. Each framework's part of the
study is its adapter, one module in its folder (study/frameworks/<name>/train.py) named by its
registry entry (`Framework.train`, declared in study/frameworks/<name>/__init__.py), as Keras 3
keeps one folder per backend. The rest of the study reads a framework only through
`adapter(name)` and the lists below, so no train module names a framework, and a new one is its
registry entry plus its adapter (plus its shipped examples, if any, in
study/frameworks/<name>/examples.py, named by `Framework.examples`).

What an adapter module provides (`Adapter`; a member it leaves out takes its `DEFAULTS` value, as
a study plugin does): where Keras 3 runs on it, the Keras path's pieces (the warm-up of a sweep's
process, the GPU probe, device scope and placement, the segmented loop's stepper); for L-BFGS its
flat value_and_grad; where it has native models, how to recognise them, what is random in them
in training, its workload and its optimizers by name (the prefix, e.g. `torch:`)."""

from __future__ import annotations

import functools
import importlib
from types import SimpleNamespace
from typing import Any, Protocol

from convergence_study.errors import InputError
from study.frameworks.registry import FRAMEWORKS as REGISTRY


class Adapter(Protocol):
    """One framework's train knowledge (the members of its module, defaults filled in)."""

    NAME: str  # the registry's name of the framework (KERAS_BACKEND where KERAS)
    KERAS: bool  # Keras 3 has a backend of this name: Keras models run on it
    DEFAULT: bool  # the one-run command's backend when none is given (one adapter says so)
    STYLE: tuple[str, str]  # line style and marker of its runs in the train figures
    # its native models and its library's optimizers (LIBRARY None: it has none)
    LIBRARY: str | None  # the prefix of its optimizers by name: `torch` in torch:<Class>
    OPTIMIZER_FORM: str  # what follows the prefix, in messages: <Class>, <name>
    OPTIMIZER_KIND: str  # how a message names one of its optimizers ("a PyTorch optimizer")
    MODELS: str  # how a message names one of its models ("a PyTorch model")
    MODULES: str  # how a message names the modules it recognises ("a torch.nn.Module")
    RATE: str  # its optimizers' learning-rate argument (the tuning protocol sets learning_rate)
    PAIR: str | None  # the kind of a pair of functions (init_params, apply), where it takes one
    KNOWN_LOSSES: dict  # a loss callable's qualified name -> (its outputs, its labels' family)
    CODE_FILES: tuple[str, ...]  # the files checking its optimizers (a run's fingerprint)
    COLUMNS: tuple  # its own columns of the runs table (study.sweep.schema.Column)
    LINE_SEARCH: tuple[str, ...]  # its optimizers with a line search (no noisy objective)

    def warm(self) -> None:
        """In a sweep's warm process: Keras imported on it (study.train.run.warm)."""

    def gpu_seen(self) -> bool:
        """Whether it sees a GPU in this process."""

    def scope(self, device: str) -> Any:
        """A Keras model's placement on its first device of that kind (cpu, gpu)."""

    def placed(self, value) -> str:
        """Where a Keras weight's value lies, in its own words (cpu:0, cuda:0, GPU:0...)."""

    def keras_stepper(self, model, loss, x, y, rows) -> Any:
        """The segmented loop's stepper of a compiled Keras model (study.train.run.loop)."""

    def flat_value_and_grad(self, weights, loss_at, data, device) -> Any:
        """f(w) -> (float, float64 gradient) at a flat vector (study.train.run.flat)."""

    def module_kind(self, value) -> str | None:
        """The kind of its native model `value` is (torch.nn.Module...), None if not its own."""

    def stochastic_layers(self, native) -> list[str]:
        """The layers of its native model that are random or batch-dependent in training."""

    def reseeded(self, seed: int, build) -> Any:
        """Its model function's result drawn again under `seed`, where the function takes no
        seed and its initializers draw from a global generator (`build()` calls it); None
        where a seed needs no second draw."""

    def workload(self, native, arrays, loss, metric, device, initial, seed) -> Any:
        """Its workload (study.train.models.workload) for a native model."""

    def submission(self, name: str, hyperparameters: dict) -> Any:
        """The submission of its optimizer `name` (after the prefix)."""

    def check_optimizer(self, name: str) -> None:
        """Its optimizer's name, where that is known before any framework starts."""


def _title_default(member: str):
    return lambda entry: {"OPTIMIZER_KIND": f"a {entry.title} optimizer",
                          "MODELS": f"a {entry.title} model",
                          "MODULES": f"a {entry.title} module"}[member]


# member -> its default, made from the registry entry
DEFAULTS = {
    "KERAS": lambda entry: False, "DEFAULT": lambda entry: False,
    "STYLE": lambda entry: ("-", "o"), "LIBRARY": lambda entry: None,
    "OPTIMIZER_FORM": lambda entry: "<name>", "OPTIMIZER_KIND": _title_default("OPTIMIZER_KIND"),
    "MODELS": _title_default("MODELS"), "MODULES": _title_default("MODULES"),
    "RATE": lambda entry: "learning_rate",
    "PAIR": lambda entry: None, "KNOWN_LOSSES": lambda entry: {},
    "CODE_FILES": lambda entry: (), "COLUMNS": lambda entry: (),
    "LINE_SEARCH": lambda entry: (),
    "module_kind": lambda entry: lambda value: None,
    "stochastic_layers": lambda entry: lambda native: [],
    "reseeded": lambda entry: lambda seed, build: None,
    "check_optimizer": lambda entry: lambda name: None,
}


@functools.cache
def adapter(framework: str) -> Adapter:
    """The adapter of `framework`; a framework the train study cannot run is one line (the
    registry's: unknown, or Keras has no backend of that name and it has no adapter)."""
    entry = REGISTRY.get(framework)
    if entry is None:
        raise InputError(f"unknown framework {framework!r}; allowed: {', '.join(trainable())}")
    entry.trainable()
    module = importlib.import_module(entry.train)
    members = {name: make(entry) for name, make in DEFAULTS.items()}
    members.update({name: value for name, value in vars(module).items()
                    if name.isupper() or callable(value)})
    members.update(NAME=entry.name, TITLE=entry.title, module=entry.train)
    return SimpleNamespace(**members)


def trainable() -> tuple[str, ...]:
    """The frameworks the train study runs: those whose registry entry names an adapter."""
    return tuple(name for name, entry in REGISTRY.items() if entry.train)


def keras_frameworks() -> tuple[str, ...]:
    """Keras 3's backends among them: where a Keras model runs."""
    return tuple(name for name in trainable() if adapter(name).KERAS)


def native_adapters() -> list[Adapter]:
    """The adapters of frameworks with native models and optimizers of their own."""
    return [adapter(name) for name in trainable() if adapter(name).LIBRARY]


def native_titles() -> str:
    """The frameworks with native models, as a sentence names them (JAX, PyTorch)."""
    return ", ".join(a.TITLE for a in native_adapters())


def of_library(library: str) -> Adapter | None:
    """The adapter whose optimizers have that prefix (torch, optax), None for another."""
    return next((a for a in native_adapters() if a.LIBRARY == library), None)


def default_framework() -> str:
    """The one-run command's framework for a Keras model when --backend is not given."""
    return next(name for name in keras_frameworks() if adapter(name).DEFAULT)


def check_framework(name, where: str = "backend") -> str:
    """The name, if the train study can run it; else one line saying why and what is allowed."""
    if name in trainable():
        return name
    if isinstance(name, str) and name in REGISTRY:
        try:
            REGISTRY[name].trainable()
        except InputError as exc:
            raise InputError(f"{where}: {exc}") from None
    raise InputError(f"{where}: unknown {name!r}; allowed: {', '.join(trainable())}")


def check_keras(framework: str, what: str, where: str | None = None) -> None:
    """A Keras model on a framework Keras has no backend for: one line."""
    if not adapter(framework).KERAS:
        head = f"{where}: " if where else ""
        raise InputError(f"{head}{what} is a Keras model, and Keras has no "
                         f"{adapter(framework).TITLE} backend; allowed: "
                         f"{', '.join(keras_frameworks())}")
