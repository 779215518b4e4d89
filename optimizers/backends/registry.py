"""Every backend declared once, without importing its framework.

A `Framework` says how to find and describe one (its import name, the distributions whose
versions a row records, the pip extra that installs it, what a warm process may import ahead of
a run, how to ask in a subprocess how many GPUs it sees). A `Backend` says what a run can ask of
it (options and their allowed values, defaults), where its code is (the module and class, and the
source files a run's fingerprint covers) and how its engine reads in a label. The engine, the
config checks, the labels, the figures and the command line read these tables and never name a
framework; adding one is its module plus an entry here.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from dataclasses import dataclass, field

from datasets.errors import InputError

DTYPES = ("float64", "float32")
FORMULATIONS = ("data", "gram")
DEVICES = ("cpu", "gpu")
NOUNS = {"feed": "feed mode"}  # how a message names an option


@dataclass(frozen=True)
class Framework:
    name: str
    module: str  # what `import` names
    title: str  # how a sentence names it
    packages: tuple[str, ...]  # distributions whose versions every row records
    extra: str | None  # `pip install 'convergence-study[EXTRA]'` installs it (None: always)
    preload: tuple[str, ...] = ()  # a warm process imports these (import only, no device)
    gpu_count: str = ""  # Python code printing how many GPUs the framework sees

    def installed(self) -> bool:
        """Its distribution is installed (asked of the package metadata, not the import system,
        which would run import hooks such as study.tensorflow_logs' early)."""
        try:
            importlib.metadata.distribution(self.packages[0])
        except importlib.metadata.PackageNotFoundError:
            return False
        return True

    def require(self) -> None:
        """One line naming the extra when the framework is not installed."""
        if not self.installed():
            how = (f"pip install 'convergence-study[{self.extra}]'" if self.extra else
                   f"pip install {self.packages[0]}")
            raise InputError(f"the {self.name} backend needs {self.title}, which is not "
                             f"installed: {how}")


FRAMEWORKS = {
    "tensorflow": Framework(
        "tensorflow", "tensorflow", "TensorFlow",
        ("tensorflow", "keras", "tensorflow-probability"), None,
        preload=("tensorflow",),
        gpu_count="import tensorflow as tf; print(len(tf.config.list_physical_devices('GPU')))"),
    "jax": Framework(
        "jax", "jax", "JAX", ("jax", "jaxlib", "optax"), "jax",
        preload=("jax", "jax.numpy", "jax.scipy.linalg"),
        gpu_count="import jax\ntry:\n    print(len(jax.devices('gpu')))\n"
                  "except RuntimeError:\n    print(0)"),
    "torch": Framework(
        "torch", "torch", "PyTorch", ("torch",), "torch",
        preload=("torch",),
        gpu_count="import torch; print(torch.cuda.device_count())"),
}


@dataclass(frozen=True)
class Backend:
    name: str
    framework: str | None  # a key of FRAMEWORKS; None: the NumPy stack, always present
    module: str
    cls: str
    options: dict = field(default_factory=dict)  # option -> allowed values (first: default)
    files: tuple[str, ...] = ()  # source files a run's code fingerprint covers
    labels: dict = field(default_factory=dict)  # feed mode -> how the engine reads
    # (option, value) -> (option, value, why) it needs: refused before anything runs
    needs: dict = field(default_factory=dict)

    def allowed(self, option: str) -> tuple:
        return self.options.get(option, ())

    def default(self, option: str):
        values = self.options.get(option)
        return values[0] if values else None

    def check(self, options: dict) -> None:
        """Option names and values against the declaration: one line naming the bad one."""
        for key, value in options.items():
            if key not in self.options:
                raise InputError(f"backend '{self.name}' has no option '{key}'; allowed: "
                                 f"{', '.join(self.options)}")
            allowed = self.options[key]
            if isinstance(allowed[0], bool) and not isinstance(value, bool):
                raise InputError(f"{self.name}: {key} must be true or false, got {value!r}")
            if value not in allowed or isinstance(value, bool) != isinstance(allowed[0], bool):
                raise InputError(f"unknown {NOUNS.get(key, key)} {value!r} for {self.name}; "
                                 f"allowed: {', '.join(map(str, allowed))}")
        for (key, value), (other, required, why) in self.needs.items():
            given = options.get(other, self.default(other))
            if options.get(key) == value and given != required:
                raise InputError(f"{self.name}: {NOUNS.get(key, key)} {value!r} needs {other} "
                                 f"{required!r} ({why}), not {given!r}")

    def label(self, options: dict) -> str:
        """The engine as figures and tables name it (without device and dtype)."""
        feed = options.get("feed") or self.default("feed")
        engine = self.labels.get(feed, f"{self.name}-{feed}" if feed else self.name)
        if options.get("xla") is True:
            engine += "+xla"
        if options.get("formulation") == "gram":
            engine += "+gram"
        return engine

    def load(self):
        """The backend's class, its framework checked first (one line naming the extra)."""
        if self.framework is not None:
            FRAMEWORKS[self.framework].require()
        return getattr(importlib.import_module(self.module), self.cls)


BACKENDS = {
    "numpy": Backend(
        "numpy", None, "optimizers.backends.numpy", "NumpyBackend",
        {"dtype": DTYPES, "formulation": FORMULATIONS},
        files=("optimizers/backends/numpy.py",)),
    "tensorflow": Backend(
        "tensorflow", "tensorflow", "optimizers.backends.tensorflow", "TensorflowBackend",
        {"dtype": DTYPES, "formulation": FORMULATIONS, "device": DEVICES,
         "feed": ("fused", "feed", "resident", "tf1"), "xla": (False, True)},
        files=("optimizers/backends/numpy.py", "optimizers/backends/tensorflow.py",
               "optimizers/backends/tf1.py"),
        labels={"feed": "tf-feed", "resident": "tf-resident", "fused": "tf-fused",
                "tf1": "tf1"}),
    "jax": Backend(
        "jax", "jax", "optimizers.backends.jax", "JaxBackend",
        {"dtype": DTYPES, "formulation": FORMULATIONS, "device": DEVICES,
         "feed": ("fused", "feed", "resident")},
        files=("optimizers/backends/jax.py",)),
    "torch": Backend(
        "torch", "torch", "optimizers.backends.torch", "TorchBackend",
        {"dtype": DTYPES, "formulation": FORMULATIONS, "device": DEVICES,
         "feed": ("resident", "feed", "compiled", "graphed")},
        needs={("feed", "graphed"): ("device", "gpu", "it replays CUDA graphs")},
        files=("optimizers/backends/torch.py",)),
}


def backend(name: str) -> Backend:
    found = BACKENDS.get(name)
    if found is None:
        raise InputError(f"unknown backend '{name}'; allowed: {', '.join(BACKENDS)}")
    return found


def framework_of(name: str) -> Framework | None:
    """The framework a backend runs on (None for NumPy)."""
    key = backend(name).framework
    return None if key is None else FRAMEWORKS[key]


def make_backend(name: str, dtype: str = "float64", **options):
    """The named backend, its options checked against the declaration before its framework is
    imported; a framework that is not installed is one line naming the extra."""
    declared = backend(name)
    declared.check({"dtype": dtype, **options})
    return declared.load()(dtype=dtype, **options)
