"""No step compiles after setup: every compile of a timed step happens in setup (train: the
stepper's `warm`; regression: before the setup clock stops), never inside the clock. Counted, not
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
    """A stepper whose timed segments count what compiles in them (setup, `warm`, apart)."""

    def __init__(self, stepper, count):
        self.stepper, self.count, self.segments, self.compiles = stepper, count, 0, 0

    def prepare(self, first, count):
        return self.stepper.prepare(first, count)

    def _counted(self, call, *args):
        before = self.count()
        out = call(*args)
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
    from study.train.models.native_load import load, workload
    from study.train.models.workload import LBFGS_NAME, WorkloadStepper
    from study.train.run.loop import Target, epoch_batches, run_loop
    from study.train.run.native_optimizers import make_submission

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
MORE_OPTAX = ["adabelief", "adadelta", "adafactor", "adagrad", "adamax", "adamaxw", "adamw",
              "adan", "amsgrad", "fromage", "lamb", "lars", "lion", "noisy_sgd", "novograd",
              "optimistic_adam", "optimistic_adam_v2", "optimistic_gradient_descent",
              "polyak_sgd", "radam", "rmsprop", "rprop", "sgd", "sign_sgd", "signum", "sm3",
              "yogi"]


@pytest.mark.parametrize(("optimizer", "hyperparameters"), FAST_OPTAX,
                         ids=[o for o, _ in FAST_OPTAX])
def test_a_native_jax_step_compiles_in_setup_only(optimizer, hyperparameters):
    pytest.importorskip("optax")
    compiles, segments = native_jax_compiles(optimizer, hyperparameters)
    assert segments == 3 and compiles == 0  # segments end at steps 3, 6, 7


@pytest.mark.slow
@pytest.mark.parametrize("alias", MORE_OPTAX)
def test_every_optax_alias_compiles_in_setup_only(alias):
    optax = pytest.importorskip("optax")
    import inspect

    from study.frameworks.jax.train import optax_aliases

    if alias not in optax_aliases():
        pytest.skip(f"optax {optax.__version__} has no optimizer {alias}")
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

    from study.frameworks.jax.train import settled_state

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


@pytest.mark.parametrize(("model", "optimizer", "hyperparameters"), [
    ("eve-mlp-torch", "torch:Adam", {"lr": 0.01}), ("eve-mlp-torch", "torch:LBFGS", {}),
    ("eve-mlp-jax", "optax:adam", {"learning_rate": 0.01}), ("eve-mlp-torch", "lbfgs", {})],
    ids=["torch-Adam", "torch-LBFGS", "optax-adam", "lbfgs"])
def test_setup_moves_nothing(model, optimizer, hyperparameters):
    """`warm` (setup) leaves parameters and optimizer state where they were: the run from
    there takes the very steps a run without it takes (torch runs one step and puts back the
    parameters, the optimizer's state and the random generators)."""
    pytest.importorskip("torch")
    pytest.importorskip("optax")
    from study.train.models.native_load import load, workload
    from study.train.models.workload import WorkloadStepper
    from study.train.run.loop import epoch_batches
    from study.train.run.native_optimizers import make_submission

    arrays = small_regression()
    framework = model.rsplit("-", 1)[1]
    rows, _ = epoch_batches(96, 0 if optimizer == "lbfgs" else 16, 0)
    ends = []
    for warmed in (False, True):
        work = workload(load(model, (3,), 1), arrays, "mse", "mae")
        stepper = WorkloadStepper(work, make_submission(optimizer, hyperparameters, framework),
                                  rows)
        if warmed:
            stepper.warm(stepper.prepare(0, 1))
        stepper.read(stepper.run(stepper.prepare(0, 4)))
        ends.append(work.to_flat(stepper.submission.parameters(work, stepper.state)))
    np.testing.assert_array_equal(ends[0], ends[1])


# ---- Keras models on each framework: the segmented loop's steps and lbfgs's flat objective ----

KERAS_PROBE = textwrap.dedent('''
    import json, sys
    import numpy as np
    import keras
    from study.train.run.loop import Target, epoch_batches, run_loop
    from study.frameworks.keras.train import loss_object, make_stepper, value_and_grad
    from test_compiles_after_setup import CountedStepper

    backend = keras.backend.backend()
    if backend == "jax":
        import jax
        seen = []
        jax.monitoring.register_event_duration_secs_listener(
            lambda event, duration, **kw: seen.append(event)
            if event == "/jax/core/compile/backend_compile_duration" else None)
        count = lambda: len(seen)
    elif backend == "tensorflow":
        import tensorflow as tf
        functions, original = [], tf.function

        def recording(*args, **kwargs):  # every tf.function made from here on
            function = original(*args, **kwargs)
            functions.append(function)
            return function

        tf.function = recording
        count = lambda: sum(f.experimental_get_tracing_count() for f in functions
                            if hasattr(f, "experimental_get_tracing_count"))
    else:
        from torch._dynamo.utils import counters
        count = lambda: sum(counters["stats"].values()) + sum(counters["frames"].values())

    rng = np.random.default_rng(0)
    x = rng.normal(size=(48, 3)).astype(np.float32)
    y = (x @ np.array([1.0, -2.0, 0.5])).astype(np.float32)[:, None]
    rows, _ = epoch_batches(len(x), 8, seed=3)
    out = {}
    for name, config in json.loads(sys.argv[1]):
        keras.utils.set_random_seed(1)
        model = keras.Sequential([keras.Input(shape=(3,)), keras.layers.Dense(5),
                                  keras.layers.BatchNormalization(),
                                  keras.layers.Activation("relu"), keras.layers.Dense(1)])
        model.compile(optimizer=getattr(keras.optimizers, name)(**config), loss="mse")
        stepper = make_stepper(model, loss_object("mse"), x, y, rows)
        counted = CountedStepper(stepper, count)

        def evaluate():  # off the clock, as study.train.run.measure does it
            stepper.write_back()
            logs = {"val_loss": float(model.test_on_batch(x, y))}
            stepper.reload()
            return logs

        record, _ = run_loop(counted, evaluate, target=Target("val_loss", None, "min"),
                             max_steps=8, eval_every=3)
        out[name] = [counted.compiles, counted.segments]
    # loop = "fit": the timed model.fit comes after a train_on_batch and a one-step warm-up fit
    from study.train.run.measure import fit_record

    keras.utils.set_random_seed(1)
    fitted = keras.Sequential([keras.Input(shape=(3,)), keras.layers.Dense(5),
                               keras.layers.Dense(1)])
    fitted.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    fits, original_fit = [], fitted.fit

    def counted_fit(*args, **kwargs):
        before = count()
        history = original_fit(*args, **kwargs)
        fits.append(count() - before)
        return history

    fitted.fit = counted_fit
    trainer = type("Trainer", (), {"step": lambda self, a, b: fitted.train_on_batch(a, b)})()
    fit_record(trainer, fitted, rows, x, y, 8)
    out["fit"] = fits  # compiles in the warm-up fit, in the timed fit
    flat_model = keras.Sequential([keras.Input(shape=(3,)), keras.layers.Dense(4),
                                   keras.layers.Dense(1)])
    f = value_and_grad(flat_model, loss_object("mse"), x, y)
    w = np.concatenate([np.asarray(v).ravel() for v in flat_model.get_weights()])
    f(w)  # the first call compiles: lbfgs's first step, timed as setup
    before = count()
    for k in range(3):
        f(w * (0.5 + k))
    out["lbfgs"] = [count() - before, 3]
    out["total"] = count()  # the counter sees setup's compiles
    print(json.dumps(out))
''')

KERAS_OPTIMIZERS = [("Adam", {"learning_rate": 0.01}), ("SGD", {"momentum": 0.9}),
                    ("AdamW", {}), ("Lion", {}), ("Adafactor", {}), ("Nadam", {}),
                    ("Muon", {})]


@pytest.mark.slow  # the fast tier counts JAX's in tests/test_train_loop.py's probe
@pytest.mark.parametrize("backend", ["jax", "tensorflow", "torch"])
def test_a_keras_step_compiles_in_setup_only(backend):
    """torch: Keras's steps are eager (nothing may compile: TorchDynamo's counters stay 0)."""
    pytest.importorskip(backend)
    optimizers = KERAS_OPTIMIZERS
    done = subprocess.run([sys.executable, "-c", KERAS_PROBE, json.dumps(optimizers)],
                          capture_output=True, text=True, cwd=ROOT, timeout=600,
                          env={**__import__("os").environ, "KERAS_BACKEND": backend,
                               "PYTHONPATH": f"{ROOT}:{ROOT / 'tests'}"})
    assert done.returncode == 0, done.stderr[-3000:]
    counts = json.loads(done.stdout.strip().splitlines()[-1])
    assert counts["lbfgs"] == [0, 3]
    assert len(counts["fit"]) == 2 and counts["fit"][1] == 0, counts["fit"]
    assert (counts["total"] > 0) == (backend != "torch")
    for name, _ in optimizers:
        assert counts[name] == [0, 3], (name, counts[name])  # segments end at 3, 6, 8


# ---- regression: every backend's compiled modes --------------------------------------------

@pytest.fixture
def timed_compiles(monkeypatch):
    """count -> a function giving, after a run, what `count` grew by inside the timed region:
    from the loop's clock starting (every Stopwatch after the setup clock, the first made) to
    its last reading (the clock stops once the result is on the host)."""
    from optimizers.result import Stopwatch

    clocks = []

    def watch(count):
        made, elapsed = Stopwatch.__init__, Stopwatch.elapsed

        def init(self):
            made(self)
            self.counted = [count(), None]
            clocks.append(self)

        def read(self):
            value = elapsed(self)
            self.counted[1] = count()
            return value

        monkeypatch.setattr(Stopwatch, "__init__", init)
        monkeypatch.setattr(Stopwatch, "elapsed", read)

        def timed() -> int:
            loops = clocks[1:]
            assert loops and clocks[0].counted[1] is not None  # a setup clock, then the loop's
            return sum(c.counted[1] - c.counted[0] for c in loops if c.counted[1] is not None)

        return timed

    return watch


@pytest.fixture(scope="module")
def problems():
    from datasets import make_problem

    return {"least-squares": make_problem("synthetic", n=200, d=4, kappa=10.0, seed=3),
            "logistic": make_problem("synthetic-logistic", n=200, d=4, seed=3)}


def regression_run(problems, name, backend, kind="least-squares", **options):
    from optimizers import build_rules, make_optimizer, run
    from study.frameworks.registry import make_backend

    result = run(problems[kind], make_optimizer(name), build_rules(max_iter=12, tol=1e-12),
                 backend=make_backend(backend, **options))
    assert result.status not in ("failed", "skipped"), result.message
    assert result.iterations >= 2, result.message
    return result


JAX_RUNS = [("gd", "least-squares"), ("lbfgs", "logistic"), ("adam", "logistic"),
            ("optax-lbfgs", "logistic"), ("cgls", "least-squares")]
FAST_JAX = {("gd", "fused"), ("lbfgs", "resident"), ("adam", "feed")}


@pytest.mark.parametrize(("name", "kind", "feed"), [
    pytest.param(name, kind, feed, id=f"{name}-{feed}",
                 marks=() if (name, feed) in FAST_JAX else pytest.mark.slow)
    for name, kind in JAX_RUNS for feed in ("feed", "resident", "fused")])
def test_a_jax_regression_compiles_in_setup_only(problems, timed_compiles, name, kind, feed):
    pytest.importorskip("jax")
    if name == "optax-lbfgs":
        pytest.importorskip("optax")
    with jax_compiles() as seen:
        timed = timed_compiles(lambda: len(seen))
        regression_run(problems, name, "jax", kind, feed=feed)
    assert len(seen) > 0 and timed() == 0


TF_RUNS = [("gd", "least-squares"), ("lbfgs", "logistic"), ("adam", "logistic"),
           ("keras:Adam", "logistic")]


@pytest.mark.slow
@pytest.mark.parametrize(("feed", "xla"), [("feed", False), ("resident", False),
                                           ("fused", False), ("resident", True),
                                           ("fused", True)])
@pytest.mark.parametrize(("name", "kind"), TF_RUNS, ids=[n for n, _ in TF_RUNS])
def test_a_tensorflow_regression_traces_in_setup_only(problems, timed_compiles, monkeypatch,
                                                      feed, xla, name, kind):
    tf = pytest.importorskip("tensorflow")
    functions, original = [], tf.function

    def recording(*args, **kwargs):  # every tf.function made during the run
        function = original(*args, **kwargs)
        functions.append(function)
        return function

    monkeypatch.setattr(tf, "function", recording)
    timed = timed_compiles(lambda: sum(f.experimental_get_tracing_count() for f in functions
                                       if hasattr(f, "experimental_get_tracing_count")))
    options = {"feed": feed, **({"xla": True} if xla else {})}
    try:
        regression_run(problems, name, "tensorflow", kind, **options)
    except Exception as exc:  # a combination the backend refuses is not this test's subject
        if type(exc).__name__ == "InputError":
            pytest.skip(str(exc))
        raise
    assert functions and timed() == 0


TORCH_RUNS = [("gd", "least-squares"), ("lbfgs", "logistic"), ("adam", "logistic"),
              ("torch:Adam", "logistic")]


@pytest.mark.slow
@pytest.mark.parametrize("feed", ["feed", "resident", "compiled"])
@pytest.mark.parametrize(("name", "kind"), TORCH_RUNS, ids=[n for n, _ in TORCH_RUNS])
def test_a_torch_regression_compiles_in_setup_only(problems, timed_compiles, feed, name, kind):
    pytest.importorskip("torch")
    from torch._dynamo.utils import counters

    timed = timed_compiles(lambda: counters["stats"]["unique_graphs"])
    before = counters["stats"]["unique_graphs"]
    try:
        regression_run(problems, name, "torch", kind, feed=feed)
    except Exception as exc:
        if type(exc).__name__ == "InputError":
            pytest.skip(str(exc))
        raise
    assert timed() == 0
    if feed == "compiled":  # it counts (torch._dynamo.reset in setup may clear it first)
        assert counters["stats"]["unique_graphs"] > 0
    else:
        assert counters["stats"]["unique_graphs"] == before
