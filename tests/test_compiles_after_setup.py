"""No step compiles after setup: every compile of a timed step happens in the step timed as setup
(train) or before the setup clock stops (regression), never inside the clock. Counted, not
timed: JAX's compile events (jax.monitoring), TensorFlow's tracing counts, TorchDynamo's
counters. A jitted step compiles again for every new argument type: optax.lbfgs's initial
state held weak-typed scalars, so its step compiled a second time at step 2 (issue 43)."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"


@contextlib.contextmanager
def jax_compiles():
    """A list that grows by one per XLA compile while the block runs."""
    import jax

    seen: list[str] = []

    def listener(event, duration, **kwargs):
        if event == COMPILE_EVENT:
            seen.append(event)

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        yield seen
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)


class CountedStepper:
    """A stepper whose segments after the first (the setup step) count what compiles in them."""

    def __init__(self, stepper, count):
        self.stepper, self.count, self.segments, self.compiles = stepper, count, 0, 0

    def prepare(self, first, count):
        return self.stepper.prepare(first, count)

    def _counted(self, call, *args):
        before = self.count()
        out = call(*args)
        if self.segments > 0:
            self.compiles += self.count() - before
        return out

    def run(self, prepared):
        return self._counted(self.stepper.run, prepared)

    def read(self, value):
        out = self._counted(self.stepper.read, value)
        self.segments += 1
        return out

    def __getattr__(self, name):  # write_back, reload, evaluate
        return getattr(self.stepper, name)


def small_regression():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(120, 3)).astype(np.float32)
    y = (x @ np.array([1.0, -2.0, 0.5], np.float32) + 0.5).astype(np.float32)
    return {"x_train": x[:96], "y_train": y[:96], "x_val": x[96:], "y_val": y[96:]}


def native_jax_compiles(optimizer: str, hyperparameters: dict, steps: int = 7) -> tuple:
    """(compiles inside the timed segments, segments) of a native JAX model's run."""
    from study.train.loop import Target, epoch_batches, run_loop
    from study.train.native_load import load, workload
    from study.train.native_optimizers import make_submission
    from study.train.workload import LBFGS_NAME, WorkloadStepper

    arrays = small_regression()
    work = workload(load("eve-mlp-jax", (3,), 1), arrays, "mse", "mae")
    rows, _ = epoch_batches(96, 0 if optimizer == LBFGS_NAME else 16, 0)
    stepper = WorkloadStepper(work, make_submission(optimizer, hyperparameters, "jax"), rows)
    with jax_compiles() as seen:
        counted = CountedStepper(stepper, lambda: len(seen))
        record, _ = run_loop(counted, stepper.evaluate, target=Target("val_loss", None, "min"),
                             max_steps=steps, eval_every=3)
    assert record["steps"] == steps, record["message"]
    return counted.compiles, counted.segments


FAST_OPTAX = [("optax:lbfgs", {}), ("optax:adam", {"learning_rate": 0.01}), ("lbfgs", {})]
MORE_OPTAX = ["sgd", "adamw", "lion", "adagrad", "rmsprop", "adafactor", "adabelief", "radam",
              "amsgrad", "adamax", "nadam", "novograd", "lamb", "lars", "yogi", "adan",
              "noisy_sgd", "sign_sgd", "sm3", "rprop", "fromage", "adadelta", "polyak_sgd",
              "schedule_free_adamw"]


@pytest.mark.parametrize(("optimizer", "hyperparameters"), FAST_OPTAX,
                         ids=[o for o, _ in FAST_OPTAX])
def test_a_native_jax_step_compiles_in_setup_only(optimizer, hyperparameters):
    pytest.importorskip("optax")
    compiles, segments = native_jax_compiles(optimizer, hyperparameters)
    assert segments == 4 and compiles == 0  # segments end at steps 1, 3, 6, 7


@pytest.mark.slow
@pytest.mark.parametrize("alias", MORE_OPTAX)
def test_every_optax_alias_compiles_in_setup_only(alias):
    optax = pytest.importorskip("optax")
    import inspect

    if not hasattr(optax, alias):
        pytest.skip(f"optax {optax.__version__} has no {alias}")
    needed = [name for name, p in inspect.signature(getattr(optax, alias)).parameters.items()
              if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    hyperparameters = {name: 0.01 for name in {"learning_rate", *needed} if name in
                       inspect.signature(getattr(optax, alias)).parameters}
    compiles, _ = native_jax_compiles(f"optax:{alias}", hyperparameters)
    assert compiles == 0


def test_optax_lbfgs_state_keeps_its_types_across_an_update():
    """The class of the bug: the state handed to the first timed step has the very types the
    step hands back (weak types included), so the jit cache holds one entry."""
    pytest.importorskip("optax")
    import jax

    from study.train.native_jax import settled_state

    def step(state, x):
        count, w = state
        return (count + jax.numpy.ones((), jax.numpy.int32), w * x), None

    state = (jax.numpy.asarray(0), jax.numpy.ones(3))  # a weak-typed counter, as optax's
    assert jax.typeof(state[0]).weak_type
    settled = settled_state("toy", step, state, jax.numpy.ones(3))
    assert not jax.typeof(settled[0]).weak_type
    jitted = jax.jit(step)
    jitted(jitted(settled, 2.0)[0], 2.0)
    assert jitted._cache_size() == 1
