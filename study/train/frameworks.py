"""Which of the registry's frameworks the train study can run, and the one way its code picks
per-framework code.

The study runs Keras 3, so a framework is usable where the registry declares it
(optimizers/backends/registry.py: installed-ness, extras, GPU probes) and Keras has a backend
of that name. Per-framework code is a table keyed by the framework's name, read through `pick`:
an unknown name is one line, never another framework's code run in its place."""

from __future__ import annotations

from datasets.errors import InputError
from optimizers.backends.registry import FRAMEWORKS as REGISTRY

# Keras 3's training backends: the registry's frameworks whose entry names a warm module (one
# list, the registry's; Framework.trainable() says why another is refused)
KERAS_FRAMEWORKS = tuple(name for name, framework in REGISTRY.items() if framework.warm)
KERAS_BACKENDS = KERAS_FRAMEWORKS


def check_framework(name, where: str = "backend") -> str:
    """The name, if the train study can run it; else one line saying why and what is allowed."""
    allowed = ", ".join(KERAS_FRAMEWORKS)
    if name in KERAS_FRAMEWORKS:
        return name
    if isinstance(name, str) and name in REGISTRY:
        try:
            REGISTRY[name].trainable()
        except InputError as exc:
            raise InputError(f"{where}: {exc}") from None
        raise InputError(f"{where}: {name} was registered after the train study listed its "
                         f"frameworks; allowed: {allowed}")
    raise InputError(f"{where}: unknown {name!r}; allowed: {allowed}")


def pick(table: dict, name: str, what: str):
    """table[name] for the framework `name`, or one line naming what has no entry for it."""
    if name not in table:
        raise InputError(f"{what} has no code for the framework {name!r} (has: "
                         f"{', '.join(table)}); the train study runs {', '.join(KERAS_FRAMEWORKS)}")
    return table[name]
