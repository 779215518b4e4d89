"""An optax optimizer of your own from a file: `path/to/file.py:factory`, a function that returns
an `optax.GradientTransformation` (as `optax.adam` does), its keyword arguments the
hyperparameters, on the jax backend, in each of its modes (the fused loop included): an
iteration is `tx.update(g, opt_state, w)`, `optax.apply_updates`, then the objective at the new
iterate. A transformation whose update needs more arguments (optax.lbfgs's `value_fn`) fails the
probe, refused in one line: optax's L-BFGS runs as `optax-lbfgs`."""

from __future__ import annotations

import sys
from typing import NamedTuple

from convergence_study.errors import InputError, first_line
from datasets.user_file import load, split
from optimizers.base import Optimizer
from optimizers.from_file import call

OPTAX_PREFIX = "optax:"


class OptaxTransformState(NamedTuple):
    w: object
    f: object
    g: object
    opt_state: object  # the transformation's own state (a pytree)


def optax_factory(name: str):
    """The function `path.py:factory` names where its file uses optax (imports it, or a name
    from it), or None."""
    found = load(name, "optimizer")
    optax = sys.modules.get("optax")
    if optax is None or isinstance(found, type) or not callable(found):
        return None
    uses = any(value is optax or str(getattr(value, "__module__", "")).startswith("optax")
               for value in getattr(found, "__globals__", {}).values())
    return found if uses else None


class OptaxTransform(Optimizer):
    only_on = "jax"
    evaluations = {"nfev": 1, "ngev": 1, "nhvp": 0}
    straight_line = True  # optax's updates are array code (a branch on data is a jnp.where)

    def __init__(self, file_name: str, factory, **config):
        self.file_name, self.factory, self.config = file_name, factory, dict(config)
        self.name = OPTAX_PREFIX + factory.__name__
        where = f"{split(file_name)[0]}: {split(file_name)[1]}"
        try:
            self.tx = factory(**config)
        except TypeError as exc:  # an argument it does not take
            raise InputError(f"{where}: {first_line(exc)}") from None
        except Exception as exc:
            raise InputError(f"{where}(...) raised {type(exc).__name__}: "
                             f"{first_line(exc)}") from None
        import optax

        if not isinstance(self.tx, optax.GradientTransformation):
            raise InputError(f"{where} must return an optax.GradientTransformation (as "
                             f"optax.adam does), got a {type(self.tx).__name__}")

    def hyperparameters(self) -> dict:
        return dict(self.config)

    def setup(self, problem, objective, ops):
        return ()

    def init(self, objective, ops, params, w0) -> OptaxTransformState:
        return OptaxTransformState(w0, *objective.value_and_grad(w0), self.tx.init(w0))

    def update(self, objective, ops, params, state) -> OptaxTransformState:
        import optax

        updates, opt_state = self.tx.update(state.g, state.opt_state, state.w)
        w = optax.apply_updates(state.w, updates)
        return OptaxTransformState(w, *objective.value_and_grad(w), opt_state)


def checked_transform(name: str, optimizer):
    """An optax transformation from a file, updated once from zeros with a unit gradient (on
    JAX, eagerly): an update that raises (one that needs more arguments, as optax.lbfgs's
    value_fn) or is not finite is one line naming the file."""
    import jax
    import jax.numpy as jnp

    where = f"{split(name)[0]}: {split(name)[1]}"
    x64 = jax.config.read("jax_enable_x64")
    w = jnp.zeros((4, 1), dtype=jnp.float64 if x64 else jnp.float32)
    tx = optimizer.tx
    state = call(where, "init", tx.init, w)
    updates, _ = call(where, "update", tx.update, jnp.ones_like(w), state, w)
    if not bool(jnp.isfinite(updates).all()):
        raise InputError(f"{where}: the first update is not finite (a unit gradient from zeros)")
    return optimizer


def build(name: str, factory, hyperparameters: dict):
    """The optimizer running a file's optax factory, probed once (optimizers.from_file)."""
    return checked_transform(name, OptaxTransform(name, factory, **hyperparameters))
