"""Every row and word of the train study true (round 6): a time budget is a wall-clock limit
between steps, `diverged` means what it means in the regression study, nothing-to-train and
unreachable targets refused before any clock, randomness in training found by behaviour, config
mistakes refused before any run, the report true for every model kind, and native models as the
upstream tutorials write them."""

import contextlib
import io
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from study.__main__ import main as cli
from study.train.run.loop import Target, run_loop


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class Stepper:
    """Steps of `step_seconds` each (an L-BFGS iteration: seconds), training loss `losses(i)`."""

    def __init__(self, clock, step_seconds=3.0, losses=lambda i: 1.0):
        self.clock, self.step_seconds, self.losses, self.steps = clock, step_seconds, losses, 0

    def prepare(self, first, count):
        return count

    def warm(self, prepared):
        pass

    def run(self, count):
        for _ in range(count):
            self.steps += 1
            self.clock.now += self.step_seconds(self.steps) if callable(self.step_seconds) \
                else self.step_seconds
        return self.losses(self.steps)

    def read(self, value):
        return value


def test_a_budget_is_checked_between_steps_not_at_evaluations_only():
    """time_budget 20 s, 3 s per L-BFGS iteration, an evaluation every 50: the run used to train
    to step 50 (150 s) and be `reached` there. Now it stops when the next step would not fit
    and evaluates there, within the budget."""
    clock = Clock()
    stepper = Stepper(clock)
    record, trace = run_loop(stepper, lambda: {"val_loss": 1.0 - 0.01 * stepper.steps},
                             target=Target("val_loss", 0.6, "min"), max_steps=1000,
                             eval_every=50, time_budget=20.0, clock=clock)
    assert record["status"] == "timeout" and record["seconds"] <= 20.0
    assert trace[-1]["seconds"] <= 20.0 and record["steps"] < 50
    assert "time budget of 20 s" in record["message"]


def test_a_run_past_its_budget_before_its_target_is_a_timeout():
    """A step far slower than the ones before passes the budget within a segment: no
    evaluation is made past it, and the target met there is not `reached`."""
    clock = Clock()
    stepper = Stepper(clock, step_seconds=lambda i: 30.0 if i == 3 else 1.0)
    record, trace = run_loop(stepper, lambda: {"val_loss": 0.0 if stepper.steps >= 3 else 1.0},
                             target=Target("val_loss", 0.5, "min"), max_steps=10,
                             eval_every=10, time_budget=20.0, clock=clock)
    assert record["status"] == "timeout" and record["seconds_to_target"] is None
    assert all(t["seconds"] <= 20.0 for t in trace) and trace[-1]["val_loss"] == 1.0


def test_a_loss_grown_past_1e5_times_its_start_is_diverged_as_in_regression():
    from optimizers.stopping import Divergence

    clock = Clock()
    stepper = Stepper(clock, step_seconds=1.0, losses=lambda i: 1.7e5 * 2.0)
    record, _ = run_loop(stepper, lambda: {"val_loss": 2.0}, target=Target("val_loss", 0.1, "min"),
                         max_steps=20, eval_every=5, clock=clock)
    assert record["status"] == "diverged" and "1.7e+05 times" in record["message"]
    clock = Clock()
    stepper = Stepper(clock, step_seconds=1.0)
    record, _ = run_loop(stepper, lambda: {"val_loss": 2.0 * (1.7e5 if stepper.steps else 1)},
                         target=Target("val_loss", 0.1, "min"), max_steps=20, eval_every=5,
                         clock=clock)
    assert record["status"] == "diverged"
    assert Divergence().past(math.nan, 1.0) and not Divergence().past(-5.0, -1.0)


# ---- what is trained, and towards what -----------------------------------------------------

SPARSE = "sparse_categorical_crossentropy"


def refused(args, words: str, code: int = 2) -> str:
    """`study train ARGS` (or `study sweep ...`) in this process: one line naming `words`."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        got = cli(args)
    text = err.getvalue().strip()
    assert got == code and len(text.splitlines()) == 1 and words in text, text
    assert "Traceback" not in text
    return text


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("truth")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(120, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    np.savez(folder / "ok.npz", x_train=x[:96], y_train=y[:96], x_val=x[96:], y_val=y[96:])
    return folder


@pytest.mark.parametrize("metric, target", [
    ("mae", "val_mae=-0.5"),
    ("root_mean_squared_error", "val_root_mean_squared_error=-1"),
    ("mean_squared_logarithmic_error", "val_mean_squared_logarithmic_error=-0.1"),
    ("kl_divergence", "val_kl_divergence=-2"),
    ("cosine_similarity", "val_cosine_similarity=1.5"),
    ("r2_score", "val_r2_score=1.2"),
])
def test_a_target_outside_its_metrics_range_is_refused(data, metric, target):
    refused(["train", "--model", "digits-cnn", "--data", str(data / "ok.npz"), "--loss", SPARSE,
             "--metric", metric, "--target", target], "the run could only time out")


MODELS = '''
import keras
import torch



def lambda_only(shape, outputs):
    return keras.Sequential([keras.Input(shape=shape),
                             keras.layers.Lambda(lambda x: keras.ops.softmax(x[:, :outputs]))])


def frozen(shape, outputs):
    model = keras.Sequential([keras.Input(shape=shape),
                              keras.layers.Dense(outputs, activation="softmax")])
    model.trainable = False
    return model


class Noisy(keras.layers.Layer):
    def __init__(self):
        super().__init__()
        self.seed = keras.random.SeedGenerator(1)

    def call(self, x, training=False):
        if training:
            return x + keras.random.normal(keras.ops.shape(x), seed=self.seed)
        return x


def noisy(shape, outputs):
    return keras.Sequential([keras.Input(shape=shape), keras.layers.Dense(8), Noisy(),
                             keras.layers.Dense(outputs, activation="softmax")])


def torch_frozen(shape, outputs):
    module = torch.nn.Sequential(torch.nn.Linear(shape[0], outputs), torch.nn.Softmax(-1))
    for parameter in module.parameters():
        parameter.requires_grad_(False)
    return module


def channels_first(shape, outputs):
    import math

    channels, height, width = shape
    math.log(width - 1)  # a channels-first model's own arithmetic on a channels-last shape
    return keras.Sequential([keras.Input(shape=shape), keras.layers.Flatten(),
                             keras.layers.Dense(outputs, activation="softmax")])
'''


@pytest.fixture(scope="module")
def models(data) -> Path:
    (data / "models.py").write_text(MODELS)
    (data / "helper_beside.py").write_text("VALUE = 1\n")
    rng = np.random.default_rng(1)
    x = rng.random(size=(40, 8, 8, 1)).astype(np.float32)
    y = rng.integers(0, 3, size=40)
    np.savez(data / "images.npz", x_train=x[:32], y_train=y[:32], x_val=x[32:], y_val=y[32:])
    return data / "models.py"


def run_train(*args) -> subprocess.CompletedProcess:
    """`study train` in a fresh process (Keras picks its framework at import), from another
    folder than the model file's."""
    return subprocess.run([sys.executable, "-m", "study", "train", *args], capture_output=True,
                          text=True, timeout=600, cwd=Path(__file__).resolve().parents[1])


def refused_by_run(proc, words: str) -> None:
    lines = [line for line in proc.stderr.splitlines() if "convergence-study" in line]
    assert proc.returncode == 2 and len(lines) == 1 and words in lines[0], proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("model, backend, optimizer", [
    ("lambda_only", "jax", "keras:Adam"),
    ("lambda_only", "torch", "lbfgs"),
    ("frozen", "tensorflow", "keras:Adam"),
    ("torch_frozen", "torch", "torch:SGD"),
])
def test_nothing_to_train_is_refused_for_every_kind(data, models, model, backend, optimizer):
    """A Lambda-only Keras model ended in `IndexError: list index out of range` (and `need at
    least one array to concatenate` with lbfgs); all of them now one line, exit 2."""
    more = ["--opt-param", "lr=0.1"] if optimizer == "torch:SGD" else []
    refused_by_run(run_train("--model", f"{models}:{model}", "--data", str(data / "ok.npz"),
                             "--loss", SPARSE, "--target", "val_loss=0.1", "--backend", backend,
                             "--optimizer", optimizer, "--max-steps", "3", *more),
                   "has no trainable parameters (none, or all frozen): nothing to train")


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_noise_in_a_custom_layers_training_pass_is_refused_under_lbfgs(data, models, backend):
    """A custom layer drawing keras.random.normal in training has no type to find: two training
    passes that differ find it (torch trained 50 steps and exited 0; jax ended in `Array has
    been deleted`)."""
    refused_by_run(run_train("--model", f"{models}:noisy", "--data", str(data / "ok.npz"),
                             "--loss", SPARSE, "--target", "val_loss=0.1", "--backend", backend,
                             "--optimizer", "lbfgs", "--max-steps", "3"),
                   "a training pass that draws noise")


def test_a_build_failing_inside_names_the_input_shape(data, models):
    """`ValueError: math domain error` alone said nothing of the channels-last rows given."""
    text = refused(["train", "--model", f"{models}:channels_first", "--data",
                    str(data / "images.npz"), "--loss", SPARSE, "--target", "val_loss=0.1",
                    "--backend", "jax", "--batch-size", "16"],
                   "(given input_shape (8, 8, 1) and 3 outputs")
    assert "math domain error" in text and "channels_first" in text


# ---- your own model, as the upstream tutorials write it ----------------------------------------

EQX_CNN = '''
"""Equinox's MNIST tutorial's CNN (channels first), shrunk to 8x8 rows, and its loss."""
import equinox as eqx
import jax
import jax.numpy as jnp


class CNN(eqx.Module):
    layers: list

    def __init__(self, shape, outputs, key):
        key1, key2, key3 = jax.random.split(key, 3)
        channels, height, width = shape
        self.layers = [eqx.nn.Conv2d(channels, 3, kernel_size=4, key=key1),
                       eqx.nn.MaxPool2d(kernel_size=2), jax.nn.relu, jnp.ravel,
                       eqx.nn.Linear(3 * (height - 4) * (width - 4), 16, key=key2),
                       jax.nn.sigmoid, eqx.nn.Linear(16, outputs, key=key3),
                       jax.nn.log_softmax]

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def cross_entropy(y, pred_y):
    pred_y = jnp.take_along_axis(pred_y, jnp.expand_dims(y, 1), axis=1)
    return -jnp.mean(pred_y)
'''

EQX_MODELS = '''
import jax
from eqx_cnn import CNN, cross_entropy


def as_written(shape, outputs, seed=0):
    return CNN(shape, outputs, jax.random.key(seed)), cross_entropy


def in_order(shape, outputs, seed=0):
    return CNN(shape, outputs, jax.random.key(seed)), lambda out, y: cross_entropy(y, out)
'''

FLAX_CNN = '''
"""Flax NNX's MNIST tutorial's CNN, shrunk to 8x8 rows."""
from functools import partial

from flax import nnx


class CNN(nnx.Module):
    def __init__(self, shape, outputs, *, rngs: nnx.Rngs):
        height, width, channels = shape
        self.conv1 = nnx.Conv(channels, 4, kernel_size=(3, 3), rngs=rngs)
        self.conv2 = nnx.Conv(4, 8, kernel_size=(3, 3), rngs=rngs)
        self.avg_pool = partial(nnx.avg_pool, window_shape=(2, 2), strides=(2, 2))
        self.linear1 = nnx.Linear(8 * (height // 4) * (width // 4), 16, rngs=rngs)
        self.linear2 = nnx.Linear(16, outputs, rngs=rngs)

    def __call__(self, x):
        x = self.avg_pool(nnx.relu(self.conv1(x)))
        x = self.avg_pool(nnx.relu(self.conv2(x)))
        x = x.reshape(x.shape[0], -1)
        x = nnx.relu(self.linear1(x))
        return self.linear2(x)


def build(shape, outputs, seed=0):
    return CNN(shape, outputs, rngs=nnx.Rngs(seed))
'''


FLAX_NOISY = '''
import jax
from flax import nnx


class Noisy(nnx.Module):
    def __init__(self, shape, outputs, *, rngs):
        self.linear = nnx.Linear(shape[0], outputs, rngs=rngs)
        self.rngs = rngs

    def __call__(self, x):
        return self.linear(x + 0.5 * jax.random.normal(self.rngs.noise(), x.shape))


def build(shape, outputs, seed=0):
    return Noisy(shape, outputs, rngs=nnx.Rngs(params=seed, noise=seed + 1))
'''


@pytest.fixture(scope="module")
def tutorials(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tutorials")
    (folder / "flax_noisy.py").write_text(FLAX_NOISY)
    (folder / "eqx_cnn.py").write_text(EQX_CNN)
    (folder / "models_eqx.py").write_text(EQX_MODELS)
    (folder / "flax_cnn.py").write_text(FLAX_CNN)
    rng = np.random.default_rng(1)
    x = rng.random(size=(200, 8, 8, 1)).astype(np.float32)
    y = (x[:, :4].mean((1, 2, 3)) > x[:, 4:].mean((1, 2, 3))).astype(np.int64) \
        + (x.mean((1, 2, 3)) > 0.5)
    np.savez(folder / "images.npz", x_train=x[:160], y_train=y[:160], x_val=x[160:],
             y_val=y[160:])
    return folder


@pytest.mark.slow
def test_an_equinox_model_imports_its_module_beside_it_and_its_loss_order_is_said(tutorials):
    """The model file imports eqx_cnn beside it (`No module named 'eqx_cnn'` unless PYTHONPATH
    was set); the tutorial's cross_entropy(y, pred_y) is refused naming the order (it was
    `take_along_axis indices must be of integer type`), and in order it trains."""
    pytest.importorskip("equinox")
    common = ["--data", str(tutorials / "images.npz"), "--loss", "none", "--layout",
              "channels_first", "--target", "val_loss=0.5", "--optimizer", "optax:adam",
              "--opt-param", "learning_rate=0.01", "--batch-size", "32", "--max-steps", "20"]
    refused_by_run(run_train("--model", f"{tutorials}/models_eqx.py:as_written", *common),
                   "the loss takes (labels, outputs), but it is called as loss(outputs, labels)")
    proc = run_train("--model", f"{tutorials}/models_eqx.py:in_order", *common)
    assert proc.returncode == 0 and "20 steps" in proc.stdout, proc.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("optimizer", [["optax:adam", "--opt-param", "learning_rate=0.01",
                                        "--batch-size", "32"], ["lbfgs"]])
def test_a_flax_nnx_tutorial_cnn_trains_end_to_end(tutorials, tmp_path, optimizer):
    pytest.importorskip("flax")
    out = tmp_path / "row.parquet"
    proc = run_train("--model", f"{tutorials}/flax_cnn.py:build", "--data",
                     str(tutorials / "images.npz"), "--loss",
                     "sparse_categorical_crossentropy:from_logits", "--target", "val_loss=0.3",
                     "--optimizer", *optimizer, "--max-steps", "10", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    row = pd.read_parquet(out).iloc[0]
    assert row["model_kind"] == "flax-nnx" and row["steps"] == 10 and row["parameters"] > 0


def test_the_flax_extra_is_declared_and_installed_by_make():
    root = Path(__file__).resolve().parents[1]
    import tomllib

    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert any(r.startswith("flax") for r in extras["flax"])
    assert "equinox,flax]" in (root / "Makefile").read_text()


# ---- config mistakes refused before any run ------------------------------------------------------

CONFIG = '''
kind = "train"
name = "mistakes"
seeds = [0]
backends = ["jax"]

[[problems]]
name = "mine"
model = "digits-cnn"
data = {data}
loss = "{loss}"
metric = "{metric}"
batch_size = {batch}
target = {{ metric = "val_loss", value = 0.1 }}
stopping = {{ max_steps = 5 }}

[[optimizers]]
name = "keras:Adam"
'''


@pytest.mark.parametrize("change, words", [
    ({"loss": "sparse_categorical_crossentropyy"},
     "'mine': loss: unknown Keras loss 'sparse_categorical_crossentropyy'"),
    ({"metric": "accuracyy"}, "'mine': metric: unknown Keras metric 'accuracyy'"),
    ({"batch": 500}, "'mine': batch_size 500 is more than the 96 training rows"),
    ({"data": '{ path = "DATA", layout = "channels_first" }'},
     'layout = "channels_first" moves the channel axis of image rows'),
])
def test_config_mistakes_are_refused_before_any_run(data, tmp_path, change, words):
    """They used to be an `error` row per run, exit 1, after the sweep had started."""
    values = {"data": '{ path = "DATA" }', "loss": SPARSE, "metric": "accuracy", "batch": 32,
              **change}
    values["data"] = values["data"].replace("DATA", str(data / "ok.npz"))
    config = tmp_path / "mistakes.toml"
    config.write_text(CONFIG.format(**values))
    out = tmp_path / "results"
    refused(["run", str(config), "--out", str(out), "--quiet"], words)
    assert not out.exists()


# ---- what users read -----------------------------------------------------------------------

def native_runs(kind: str) -> pd.DataFrame:
    """A user's native model (`kind`) named 'houses' in its config: L-BFGS reaches the target
    on every seed, Adam on none."""
    rows = []
    for optimizer, seconds in (("optax:adam", None), ("lbfgs", 1.0)):
        for seed in range(4):
            rows.append({
                "run_id": f"{optimizer}-{seed}", "model": "/x/flax_cnn.py:build",
                "problem": "houses", "data": "/x/houses.npz", "data_params": "{}",
                "loss": "mse", "metric": "mae", "optimizer": optimizer, "hyperparameters": "{}",
                "backend": "jax", "batch_size": 0, "seed": seed, "loop": "steps",
                "target_metric": "val_loss", "target_mode": "min", "target_how": "given",
                "target_value": 0.1, "repeat": 0, "model_kind": kind,
                "reference_val_loss": None, "initial": None,
                "status": "reached" if seconds else "timeout",
                "seconds_to_target": None if seconds is None else seconds * (1 + 0.01 * seed),
                "steps_to_target": 40 if seconds else None, "seconds_per_step": 0.01,
                "setup_seconds": 0.5, "eval_seconds": 0.1})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("kind", ["flax-nnx", "equinox"])
def test_the_train_report_is_true_for_native_models_named_by_name_never_0x(tmp_path, kind):
    """It said the weights were made by Keras's NumPy backend and checked on every framework
    (not true of a Flax or Equinox model), named the problem by the file's stem, and compared
    L-BFGS with an Adam that never reached the target as 'time ratio 0x'."""
    from types import SimpleNamespace

    from study.train.sweep.report import section

    results = SimpleNamespace(runs=native_runs(kind), folder=tmp_path / "mine")
    text = "\n".join(str(block.content) for block in section(results, tmp_path / "figures"))
    assert "Keras's NumPy backend" not in text and f"({kind}), drawn by its own" in text
    assert "houses (flax_cnn on houses): lbfgs on jax" in text, text
    assert "0x" not in text and "did not finish where lbfgs on jax (batch full) did" in text


def test_a_keras_models_report_keeps_its_initial_weights_sentence(tmp_path):
    from types import SimpleNamespace

    from study.train.sweep.report import section

    runs = native_runs("keras").assign(optimizer=lambda r: r["optimizer"].replace(
        "optax:adam", "keras:Adam"))
    text = "\n".join(str(block.content) for block in section(
        SimpleNamespace(runs=runs, folder=tmp_path / "mine"), tmp_path / "figures"))
    assert "made once by Keras's NumPy backend and checked against its validation loss on " \
           "every framework" in text and "drawn by its own" not in text


def test_a_problems_name_reaches_its_rows_and_renaming_it_re_runs_nothing(data):
    import tomllib

    from study.train.sweep.config import expand_specs

    text = CONFIG.format(data=f'{{ path = "{data / "ok.npz"}" }}', loss=SPARSE,
                         metric="accuracy", batch=32)
    first = expand_specs(tomllib.loads(text), "t.toml", "t", 1)
    again = expand_specs(tomllib.loads(text.replace('name = "mine"', 'name = "yours"')),
                         "t.toml", "t", 1)
    assert [s.problem for s in first] == ["mine"] and [s.problem for s in again] == ["yours"]
    assert first[0].run_id == again[0].run_id and first[0].axes()["problem"] == "mine"


def test_steps_faster_than_the_clock_keep_a_budget_finite():
    clock = Clock()
    record, _ = run_loop(Stepper(clock, step_seconds=0.0), lambda: {"val_loss": 1.0},
                         target=Target("val_loss", 0.1, "min"), max_steps=5000, eval_every=100,
                         time_budget=1.0, clock=clock)
    assert record["status"] == "timeout" and record["steps"] == 5000


@pytest.mark.slow
def test_a_flax_module_drawing_noise_in_its_call_is_said_so(tutorials, data):
    """Found by calling it twice (no layer type says it); it ended in 'the data's rows (shape
    (4,)) do not fit' (a TraceContextError read as a shape mismatch)."""
    pytest.importorskip("flax")
    refused_by_run(run_train("--model", f"{tutorials}/flax_noisy.py:build", "--data",
                             str(data / "ok.npz"), "--loss",
                             "sparse_categorical_crossentropy:from_logits", "--target",
                             "val_loss=0.1", "--optimizer", "lbfgs", "--max-steps", "3"),
                   "has a training pass that draws noise (two passes over the same rows differ)")


def test_the_train_figures_are_titled_by_the_problems_name():
    from study.train.sweep import figures

    fig = figures.figure_headline(native_runs("flax-nnx"))
    assert [ax.get_title() for ax in fig.axes] == ["houses (flax_cnn on houses)"]


def test_the_report_title_names_a_train_problem_by_its_name(tmp_path):
    from types import SimpleNamespace

    from study.report.build import report_title
    from study.sweep.plugin import load_kind

    found = [SimpleNamespace(kind="train", plugin=load_kind("train"),
                             runs=native_runs("flax-nnx"))]
    assert report_title(found) == "Convergence study report: houses (flax_cnn on houses)"


TORCH_SWAPPED = '''
import torch
import torch.nn.functional as F


def build(shape, outputs, seed=0):
    torch.manual_seed(seed)
    return torch.nn.Linear(shape[0], outputs), lambda y, out: F.cross_entropy(out, y)
'''


def test_a_torch_loss_taking_labels_first_is_said_so(data):
    """The sibling of Equinox's cross_entropy(y, pred_y) on torch: the order expected, not
    torch's own complaint about the labels' dtype."""
    pytest.importorskip("torch")
    (data / "swapped.py").write_text(TORCH_SWAPPED)
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(60, 4)).astype(np.float32), rng.integers(0, 3, size=60)
    np.savez(data / "three.npz", x_train=x[:48], y_train=y[:48], x_val=x[48:], y_val=y[48:])
    refused(["train", "--model", f"{data}/swapped.py:build", "--data", str(data / "three.npz"),
             "--loss", "none", "--optimizer", "torch:SGD", "--opt-param", "lr=0.1",
             "--target", "val_loss=0.1", "--backend", "torch", "--batch-size", "16"],
            "the loss takes (labels, outputs), but it is called as loss(outputs, labels)")


def test_a_native_runs_budget_is_a_wall_clock_limit_too():
    """The same loop times native models: with evaluations far apart, no evaluation falls past
    the budget and the run is a timeout (whatever the machine's speed)."""
    torch = pytest.importorskip("torch")
    from study.train.models.native_load import NativeModel
    from study.train.run.native_run import train

    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 4)).astype(np.float32)
    arrays = {"x_train": x[:48], "y_train": x[:48, :1] * 2, "x_val": x[48:],
              "y_val": x[48:, :1] * 2}
    torch.manual_seed(0)
    native = NativeModel("torch", "torch.nn.Module", torch.nn.Linear(4, 1), None, "model 'm'", 1)
    record = train(native, arrays, loss="mse", metric="mae", optimizer="torch:SGD",
                   hyperparameters={"lr": 1e-6}, batch_size=16, target=("val_loss", 1e-9, "min"),
                   max_steps=10**9, eval_every=10**8, time_budget=0.3)
    assert record["status"] == "timeout" and "time budget of 0.3 s" in record["message"]
    assert all(t["seconds"] <= 0.3 for t in record["trace"])
