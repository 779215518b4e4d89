"""optax's L-BFGS with its own zoom line search (`optax-lbfgs`, docs/regress.md), a library
reference on the jax backend, in every JAX mode.

The loss and gradient at the new iterate are those its line search stored in the state, so none
is evaluated twice (nfev = 1 + optax's `num_linesearch_steps`). The loss is given our analytic
gradient as its derivative (`jax.custom_jvp`), so each line-search step is one evaluation of the
objective. optax's defaults stand; it has no convergence test of its own.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import NamedTuple

from optimizers.base import Optimizer, count


class OptaxState(NamedTuple):
    w: object
    f: object
    g: object
    opt_state: object  # optax's: the L-BFGS memory and the line search's last value and grad
    nfev: object  # evaluations so far (an int64 array, counted on the device)


def analytic_loss(objective):
    """The loss as a function JAX can differentiate, its derivative our analytic gradient."""
    import jax

    @jax.custom_jvp
    def loss(w):
        return objective.value_and_grad(w)[0]

    @loss.defjvp
    def _(primals, tangents):
        f, g = objective.value_and_grad(primals[0])
        return f, (g * tangents[0]).sum()

    return loss


@dataclass(frozen=True)
class OptaxLBFGS(Optimizer):
    history: int = 10
    name: str = "optax-lbfgs"
    only_on = "jax"
    evaluations = {"nfev": 1, "ngev": 1, "nhvp": 0}  # nominal; `report` gives optax's counts

    def __post_init__(self):
        count("history", self.history, optimizer=self.name)

    def hyperparameters(self) -> dict:
        return {"history": self.history}

    def unavailable(self) -> str | None:
        if importlib.util.find_spec("optax") is None:
            return "optax-lbfgs needs optax, which is not installed: pip install " \
                   "'convergence-study[jax]'"
        return None

    def _solver(self):
        import optax

        return optax.lbfgs(memory_size=self.history)

    def setup(self, problem, objective, ops):
        return ()

    def init(self, objective, ops, params, w0) -> OptaxState:
        import jax.numpy as jnp

        f, g = objective.value_and_grad(w0)
        return OptaxState(w0, f, g, self._solver().init(w0), jnp.asarray(1, jnp.int64))

    def update(self, objective, ops, params, state) -> OptaxState:
        import optax

        updates, opt_state = self._solver().update(
            state.g, state.opt_state, state.w, value=state.f, grad=state.g,
            value_fn=analytic_loss(objective))
        w = optax.apply_updates(state.w, updates)
        steps = optax.tree.get(opt_state, "num_linesearch_steps")
        return OptaxState(w, optax.tree.get(opt_state, "value"),
                          optax.tree.get(opt_state, "grad"), opt_state, state.nfev + steps)

    def state_record(self, state) -> dict:
        import optax

        nfev = int(state.nfev)
        return {"nfev": nfev, "ngev": nfev, "nhvp": 0, "optax_version": optax.__version__}
