"""The train study's frameworks and the one way its code reaches one: each framework's adapter is
`ADAPTER` of the module its registry entry names (`Framework.train`), an `Adapter` subclass
overriding what differs. The rest of the study reads a framework only through `adapter(name)`
and the lists below, and Keras only through `model_library()`, so no train module names a
framework."""

from __future__ import annotations

import functools
import importlib

from convergence_study.errors import InputError
from study.frameworks.registry import FRAMEWORKS as REGISTRY


class Adapter:
    """One framework's train knowledge, its optional hooks' defaults declared here: the Keras
    path's pieces, L-BFGS's flat value_and_grad, and where it has native models, how to
    recognise them, its workload and its optimizers by name (`LIBRARY:<name>`)."""

    KERAS = False  # Keras 3 has a backend of this name: Keras models run on it
    DEFAULT = False  # the one-run command's backend when none is given (one adapter says so)
    STYLE = ("-", "o")  # line style and marker of its runs in the train figures
    LIBRARY: str | None = None  # its optimizers' prefix (torch in torch:<Class>); None: none
    OPTIMIZER_FORM = "<name>"  # what follows the prefix, in messages
    RATE = "learning_rate"  # its optimizers' learning-rate argument
    PAIR: str | None = None  # the kind of a pair of functions (init_params, apply) it takes
    KNOWN_LOSSES: dict = {}  # a loss callable's qualified name -> (its outputs, labels' family)
    CODE_FILES: tuple[str, ...] = ()  # the files checking its optimizers (a run's fingerprint)
    COLUMNS: tuple = ()  # its own columns of the runs table (study.sweep.schema.Column)
    LINE_SEARCH: tuple[str, ...] = ()  # its optimizers with a line search (no noisy objective)

    @functools.cached_property
    def entry(self):
        """Its registry entry: the one naming this module as its adapter."""
        return next(f for f in REGISTRY.values() if f.train == type(self).__module__)

    # NAME, TITLE and how messages name its optimizers, models and modules: from its entry
    @property
    def NAME(self) -> str:
        return self.entry.name

    @property
    def TITLE(self) -> str:
        return self.entry.title

    @property
    def OPTIMIZER_KIND(self) -> str:
        return f"a {self.TITLE} optimizer"

    @property
    def MODELS(self) -> str:
        return f"a {self.TITLE} model"

    @property
    def MODULES(self) -> str:
        return f"a {self.TITLE} module"

    def warm(self) -> None:
        """In a sweep's warm process (the plugin's preload): Keras imported on it."""
        model_library().prepare(self.NAME)

    def gpu_seen(self) -> bool:
        """Whether it sees a GPU in this process."""
        return False

    def scope(self, device: str):
        """A Keras model's placement on its first device of that kind; None: Keras's own."""
        return None

    def placed(self, value) -> str:
        """Where a Keras weight's value lies, in its own words (cpu:0, cuda:0, GPU:0...)."""
        return str(value.device)

    def keras_stepper(self, model, loss, x, y, rows):
        """The segmented loop's stepper of a compiled Keras model (study.train.run.loop)."""
        raise NotImplementedError

    def flat_value_and_grad(self, weights, loss_at, data, device=None):
        """f(w) -> (float, float64 gradient) at a flat vector (study.train.run.flat)."""
        raise NotImplementedError

    def module_kind(self, value) -> str | None:
        """The kind of its native model `value` is (torch.nn.Module...), None if not its own."""
        return None

    def stochastic_layers(self, native) -> list[str]:
        """The layers of its native model that are random or batch-dependent in training."""
        return []

    def reseeded(self, seed: int, build):
        """Its model function's result drawn again under `seed`, where the function takes no
        seed and its initializers draw from a global generator; None where none is needed."""
        return None

    def workload(self, native, arrays, loss, metric, device="cpu", initial=None, seed=0):
        """Its workload (study.train.models.workload) for a native model."""
        raise NotImplementedError

    def submission(self, name: str, hyperparameters: dict):
        """The submission of its optimizer `name` (after the prefix)."""
        raise NotImplementedError

    def check_optimizer(self, name: str) -> None:
        """Its optimizer's name, where that is known before any framework starts."""


@functools.cache
def model_library():
    """The train module of the model library (Keras 3) its registry entry names."""
    return importlib.import_module(next(f.models for f in REGISTRY.values() if f.models))


@functools.cache
def adapter(framework: str) -> Adapter:
    """The adapter of `framework`; a framework the train study cannot run is one line (the
    registry's: unknown, or Keras has no backend of that name and it has no adapter)."""
    entry = REGISTRY.get(framework)
    if entry is None:
        raise InputError(f"unknown framework {framework!r}; allowed: {', '.join(trainable())}")
    entry.trainable()
    return importlib.import_module(entry.train).ADAPTER


def trainable() -> tuple[str, ...]:
    """The frameworks the train study runs: those whose registry entry names an adapter."""
    return tuple(name for name, entry in REGISTRY.items() if entry.train)


def keras_frameworks() -> tuple[str, ...]:
    """Keras 3's backends among them: where a Keras model runs."""
    return tuple(name for name in trainable() if adapter(name).KERAS)


def native_adapters() -> list[Adapter]:
    """The adapters of frameworks with native models and optimizers of their own."""
    return [adapter(name) for name in trainable() if adapter(name).LIBRARY]


def native_modules() -> str:
    """The native modules the adapters recognise, as a message lists them."""
    return ", ".join(a.MODULES for a in native_adapters())


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
    if isinstance(name, str) and name in REGISTRY and not REGISTRY[name].models:
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
