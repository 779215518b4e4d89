"""What a model function returns, recognised: `file.py:function` (or a shipped native example)
called with `(input_shape, outputs)` (and `seed=` when its signature takes it) may return

  a Keras model                        -> None: the Keras path runs it
  a framework's module [, loss]        -> that framework's native model (its adapter's
                                          `module_kind`)
  (init_params, apply) [, loss]        -> the framework whose adapter takes a pair (`PAIR`)

A type is recognised through the modules already loaded (`loaded`), so nothing here imports a
framework. A model drawn without a seed is drawn again under it where its framework's
initializers use a global generator (the adapter's `reseeded`). A native model runs on its own
framework only (a framework comparison needs a Keras model).
"""

from __future__ import annotations

import inspect
import sys
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

from convergence_study.errors import InputError
from study.train.frameworks import adapter, native_adapters, native_modules
from study.train.models.examples import NATIVE_MODELS
from study.train.models.input_rows import build_failure
from study.train.models.model import beside, import_file, model_file


@dataclass
class NativeModel:
    framework: str  # the registry's name of its framework
    kind: str  # what its adapter recognised (torch.nn.Module, equinox, flax-nnx, jax-pair)
    obj: object  # the module, or (init_params, apply)
    loss: object  # a callable returned with the model, or None (the loss by name)
    what: str  # "model 'file.py:function'", for messages
    outputs: int
    source: str = ""  # the model's name (file.py:function or a shipped example), to build again
    input_shape: tuple = ()
    seed: int = 0


def function_of(model: str):
    """(function, what) behind a model name, or None for a shipped Keras model or .keras file."""
    if model in NATIVE_MODELS:
        return NATIVE_MODELS[model], f"model '{model}'"
    head, sep, name = model.rpartition(":")
    if not sep or not head.endswith(".py"):
        return None
    path, what = Path(head), f"model '{model}'"
    if not path.is_file():
        raise InputError(f"model: file '{path}' does not exist")
    module = import_file(path, what)
    function = getattr(module, name, None)
    if not callable(function):
        raise InputError(f"{what}: '{path}' defines no function '{name}'")
    return function, what


def load(model: str, input_shape, outputs: int, seed: int = 0) -> NativeModel | None:
    """The native model behind `model`, or None where it is a Keras one."""
    found = function_of(model)
    if found is None:
        return None
    function, what = found
    takes_seed = _takes(function, "seed")
    path = model_file(model)
    with beside(path) if path is not None else nullcontext():
        built = call_model(function, input_shape, outputs, what, seed if takes_seed else None)
        kind, framework, obj, loss = classify(built, what)
        if kind is None:
            return None
        if not takes_seed:
            again = adapter(framework).reseeded(
                seed, lambda: call_model(function, input_shape, outputs, what))
            if again is not None:
                kind, framework, obj, loss = classify(again, what)
    if loss is not None and not callable(loss):
        raise InputError(f"{what}: the loss returned with the model is not callable")
    return NativeModel(framework, kind, obj, loss, what, int(outputs), model,
                       tuple(input_shape), seed)


def with_outputs(native: NativeModel, outputs: int) -> NativeModel:
    """The model built again for `outputs` outputs (a loss returned with the model decides the
    labels' shape, which the first build could only guess from the loss by name)."""
    if outputs == native.outputs or not native.source:
        return native
    again = load(native.source, native.input_shape, outputs, native.seed)
    if again is None or again.kind != native.kind:
        raise InputError(f"{native.what} gave another kind of model when built again")
    return again


def stochastic_layers(native: NativeModel) -> list[str]:
    """The layers of a native model that are random or batch-dependent in training, by name."""
    return sorted(set(adapter(native.framework).stochastic_layers(native)))


def classify(built, what: str):
    """(kind, framework, model object, loss or None); kind None for a Keras model."""
    if loaded(built, "keras", "Model"):
        return None, None, built, None
    if isinstance(built, tuple | list):
        parts = list(built)
        if len(parts) == 2 and _module_kind(parts[0]) is not None:
            return (*_module_kind(parts[0]), parts[0], parts[1])
        pair = next((a for a in native_adapters() if a.PAIR), None)
        if pair is not None and len(parts) in (2, 3) and all(callable(p) for p in parts[:2]) \
                and not any(_module_kind(p) for p in parts[:2]):
            return pair.PAIR, pair.NAME, (parts[0], parts[1]), \
                parts[2] if len(parts) == 3 else None
    elif _module_kind(built) is not None:
        return (*_module_kind(built), built, None)
    raise InputError(f"{what} did not give a model: it must return a Keras model, "
                     f"{native_modules()} (optionally with a loss), or (init_params, "
                     f"apply[, loss]); got {type(built).__name__}"
                     + (f" of {len(built)}" if isinstance(built, tuple | list) else ""))


def _module_kind(value) -> tuple[str, str] | None:
    """(kind, framework) of a framework's module, None for anything else."""
    for native in native_adapters():
        kind = native.module_kind(value)
        if kind is not None:
            return kind, native.NAME
    return None


def loaded(value, module: str, name: str) -> bool:
    """Whether `value` is an instance of `module.name`, where that module is already imported
    (so recognising a type never imports a framework)."""
    found = sys.modules.get(module)
    cls = getattr(found, name, None) if found is not None else None
    return isinstance(cls, type) and isinstance(value, cls)


def _takes(function, name: str) -> bool:
    try:
        return name in inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False


def call_model(function, input_shape, outputs, what: str, seed: int | None = None):
    """A model function called with (input_shape, outputs[, seed=]); any failure one line."""
    try:
        if seed is not None:
            return function(tuple(input_shape), outputs, seed=seed)
        return function(tuple(input_shape), outputs)
    except InputError:
        raise
    except (Exception, SystemExit) as exc:
        raise build_failure(what, input_shape, outputs, exc) from None


def check_backend(native: NativeModel, backend: str | None) -> None:
    """A native model on another framework than its own: one line (no framework comparison)."""
    if backend is not None and backend != native.framework:
        title = adapter(native.framework).TITLE
        raise InputError(f"{native.what} is a native {title} model ({native.kind}): it runs on "
                         f"{native.framework} only, not {backend}; a native model compares "
                         "optimizers and devices within its framework (a framework comparison "
                         "needs a Keras model)")


def workload(native: NativeModel, arrays: dict, loss, metric: str, device: str = "cpu",
             initial=None, seed: int = 0):
    """Its framework's adapter of the workload interface (study.train.models.workload)."""
    return adapter(native.framework).workload(native, arrays, loss, metric, device, initial,
                                              seed)
