"""What a model function returns, recognised: `file.py:function` (or a shipped native example by
name, study.train.native_examples) called with `(input_shape, outputs)` (and `seed=` when its
signature takes it) may return

  a Keras model                        -> None: the Keras path (study.train.model) runs it
  a torch.nn.Module                    -> PyTorch, the loss by name (--loss)
  (torch.nn.Module, loss)              -> PyTorch, loss(outputs, labels) -> scalar tensor
  an Equinox module [, loss]           -> JAX, applied per example under jax.vmap
  a Flax NNX module [, loss]           -> JAX, applied on a batch
  (init_params, apply) [, loss]        -> JAX: init_params(key) -> pytree,
                                          apply(params, x) -> outputs on a batch

Nothing here imports a framework the function did not: a type is recognised through the
modules already loaded. A torch module drawn without a seed is drawn again after
`torch.manual_seed(seed)` (its initializers use torch's global generator), so a seed gives
the same instance; a pair's `init_params` gets `jax.random.key(seed)`.

A native model runs on its own framework only: it compares optimizers and devices within that
framework (a framework comparison needs a Keras model, which Keras runs on all three).
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
from dataclasses import dataclass
from pathlib import Path

from datasets.errors import InputError
from study.train.workload import describe

KINDS = {"torch.nn.Module": "torch", "equinox": "jax", "flax-nnx": "jax", "jax-pair": "jax"}


@dataclass
class NativeModel:
    framework: str  # torch or jax
    kind: str  # torch.nn.Module, equinox, flax-nnx, jax-pair
    obj: object  # the module, or (init_params, apply)
    loss: object  # a callable returned with the model, or None (the loss by name)
    what: str  # "model 'file.py:function'", for messages
    outputs: int
    source: str = ""  # the model's name (file.py:function or a shipped example), to build again
    input_shape: tuple = ()
    seed: int = 0


def native_examples() -> dict:
    from study.train.native_examples import NATIVE_MODELS

    return NATIVE_MODELS


def function_of(model: str):
    """(function, what) behind a model name, or None for a shipped Keras model or a .keras
    file."""
    examples = native_examples()
    if model in examples:
        return examples[model], f"model '{model}'"
    head, sep, name = model.rpartition(":")
    if not sep or not head.endswith(".py"):
        return None
    path, what = Path(head), f"model '{model}'"
    if not path.is_file():
        raise InputError(f"model: file '{path}' does not exist")
    try:
        spec = importlib.util.spec_from_file_location(f"user_model_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except Exception as exc:
        raise InputError(f"{what}: importing '{path}' failed: {describe(exc)}") from None
    function = getattr(module, name, None)
    if not callable(function):
        raise InputError(f"{what}: '{path}' defines no function '{name}'")
    return function, what


def load(model: str, input_shape, outputs: int, seed: int = 0) -> NativeModel | None:
    """The native model behind `model`, or None where it is a Keras one (a shipped Keras
    example, a .keras file, or a function returning a Keras model)."""
    found = function_of(model)
    if found is None:
        return None
    function, what = found
    takes_seed = _takes(function, "seed")
    built = _call(function, input_shape, outputs, seed, takes_seed, what)
    kind, obj, loss = classify(built, what)
    if kind is None:
        return None
    if kind == "torch.nn.Module" and not takes_seed:
        import torch

        torch.manual_seed(seed)
        kind, obj, loss = classify(_call(function, input_shape, outputs, seed, False, what), what)
    if loss is not None and not callable(loss):
        raise InputError(f"{what}: the loss returned with the model is not callable")
    return NativeModel(KINDS[kind], kind, obj, loss, what, int(outputs), model,
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
    """The layers of a native model that are random or batch-dependent in training (dropout,
    batch normalization), by their class names, found by each framework's own types. A JAX
    pair has none it could draw with: its apply(params, x) takes no key."""
    if native.kind == "torch.nn.Module":
        import torch

        kinds = (torch.nn.modules.dropout._DropoutNd, torch.nn.modules.batchnorm._BatchNorm)
        layers = [m for m in native.obj.modules()
                  if isinstance(m, kinds) and getattr(m, "p", 1.0) > 0]
    elif native.kind == "equinox":
        import equinox as eqx
        import jax

        kinds = (eqx.nn.Dropout, eqx.nn.BatchNorm)
        layers = [m for m in jax.tree_util.tree_leaves(native.obj,
                                                      is_leaf=lambda m: isinstance(m, kinds))
                  if isinstance(m, kinds) and not getattr(m, "inference", False)
                  and getattr(m, "p", 1.0) > 0]
    elif native.kind == "flax-nnx":
        from flax import nnx

        kinds = (nnx.Dropout, nnx.BatchNorm)
        layers = [m for _, m in nnx.iter_graph(native.obj)
                  if isinstance(m, kinds) and not getattr(m, "deterministic", False)
                  and not getattr(m, "use_running_average", False)
                  and getattr(m, "rate", 1.0) > 0]
    else:
        layers = []
    return sorted({type(m).__name__ for m in layers})


def classify(built, what: str):
    """(kind, model object, loss or None); kind None for a Keras model."""
    if _is(built, "keras", "Model"):
        return None, built, None
    if isinstance(built, tuple | list):
        parts = list(built)
        if len(parts) == 2 and _module_kind(parts[0]) is not None:
            return _module_kind(parts[0]), parts[0], parts[1]
        if len(parts) in (2, 3) and all(callable(p) for p in parts[:2]) \
                and not any(_module_kind(p) for p in parts[:2]):
            return "jax-pair", (parts[0], parts[1]), parts[2] if len(parts) == 3 else None
    elif _module_kind(built) is not None:
        return _module_kind(built), built, None
    raise InputError(f"{what} did not give a model: it must return a Keras model, a "
                     "torch.nn.Module, an Equinox or Flax NNX module (optionally with a loss), "
                     "or (init_params, apply[, loss]); got "
                     f"{type(built).__name__}"
                     + (f" of {len(built)}" if isinstance(built, tuple | list) else ""))


def _module_kind(value) -> str | None:
    if _is(value, "torch.nn", "Module"):
        return "torch.nn.Module"
    if _is(value, "equinox", "Module"):
        return "equinox"
    if _is(value, "flax.nnx", "Module"):
        return "flax-nnx"
    return None


def _is(value, module: str, name: str) -> bool:
    loaded = sys.modules.get(module)
    cls = getattr(loaded, name, None) if loaded is not None else None
    return isinstance(cls, type) and isinstance(value, cls)


def _takes(function, name: str) -> bool:
    try:
        return name in inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False


def _call(function, input_shape, outputs, seed, takes_seed, what):
    try:
        if takes_seed:
            return function(tuple(input_shape), outputs, seed=seed)
        return function(tuple(input_shape), outputs)
    except InputError:
        raise
    except Exception as exc:
        raise InputError(f"{what} failed to build: {describe(exc)}") from None


def check_backend(native: NativeModel, backend: str | None) -> None:
    """A native model on another framework than its own: one line (no framework comparison)."""
    if backend is not None and backend != native.framework:
        title = {"torch": "PyTorch", "jax": "JAX"}.get(native.framework, native.framework)
        raise InputError(f"{native.what} is a native {title} model ({native.kind}): it runs on "
                         f"{native.framework} only, not {backend}; a native model compares "
                         "optimizers and devices within its framework (a framework comparison "
                         "needs a Keras model)")


def workload(native: NativeModel, arrays: dict, loss, metric: str, device: str = "cpu",
             initial=None, seed: int = 0):
    """The framework's adapter of the workload interface (study.train.workload)."""
    if native.framework == "torch":
        from study.train.native_torch import TorchWorkload

        return TorchWorkload(native, arrays, loss, metric, device, initial)
    if native.framework == "jax":
        from study.train.native_jax import JaxWorkload

        return JaxWorkload(native, arrays, loss, metric, device, initial, seed)
    raise InputError(f"{native.what}: no native adapter for the framework "
                     f"{native.framework!r}; native models run on torch or jax")
