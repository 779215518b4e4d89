"""The train study: the clock's bookkeeping (a fake clock, no framework), the target-setting
round and the tuning protocol on its rows, bad inputs (one line, exit 2, nothing written), and
one small sweep on TensorFlow, JAX and PyTorch: the same initial weights give the same
validation loss everywhere, a tiny model reaches an explicit target on each framework, and
every seed is paired across optimizers and frameworks."""

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from convergence_study.errors import InputError
from study.__main__ import main as cli
from study.train.models.data import load_data
from study.train.run.loop import LONGEST_SEGMENT, Target, epoch_batches, run_loop, segment_ends
from study.train.sweep import rounds
from study.train.sweep.spec import Spec

ROOT = Path(__file__).resolve().parents[1]


# ---- the loop and its clock ---------------------------------------------------------------------

class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class FakeStepper:
    """Steps that take 1 s each on `clock` and return `loss`; its setup (`warm`) takes
    `compile_cost` and moves nothing."""

    def __init__(self, clock, compile_cost: float = 50.0, loss: float = 1.0):
        self.clock, self.compile_cost, self.loss = clock, compile_cost, loss
        self.steps, self.segments, self.warmed = 0, [], 0

    def prepare(self, first, count):
        assert first == self.steps
        return count

    def warm(self, prepared):
        assert prepared == 1 and self.steps == 0
        self.clock.now += self.compile_cost
        self.warmed += 1

    def run(self, count):
        self.segments.append(count)
        for _ in range(count):
            self.clock.now += 1.0
            self.steps += 1
        return self.loss

    def read(self, value):
        return value


def fake_run(eval_cost: float, compile_cost: float = 50.0):
    """A loop whose steps take 1 s each (the first `compile_cost`), whose evaluations take
    `eval_cost`, and whose validation loss falls by 0.1 per step from 2.0."""
    clock = FakeClock()
    stepper = FakeStepper(clock, compile_cost)

    def evaluate():
        clock.now += eval_cost
        return {"val_loss": 2.0 - 0.1 * stepper.steps}

    return run_loop(stepper, evaluate, target=Target("val_loss", 1.05, "min"), max_steps=100,
                    eval_every=2, clock=clock)


def test_slow_evaluation_leaves_time_to_target_unchanged():
    fast, fast_trace = fake_run(eval_cost=0.0)
    slow, slow_trace = fake_run(eval_cost=1000.0)
    assert fast["status"] == slow["status"] == "reached"
    assert fast["steps_to_target"] == slow["steps_to_target"] == 10  # first evaluation at 0.95
    # training time: steps 1..10 at 1 s each; the setup (compiling) and evaluations apart
    assert fast["seconds_to_target"] == slow["seconds_to_target"] == 10.0
    assert fast["setup_seconds"] == slow["setup_seconds"] == 50.0
    assert fast["seconds_to_target_with_setup"] == 60.0  # AlgoPerf's count: compilation in
    assert fast["seconds_per_step"] == 1.0
    assert slow["eval_seconds"] == 1000.0 * slow["evaluations"] and fast["eval_seconds"] == 0.0
    assert [t["seconds"] for t in fast_trace] == [t["seconds"] for t in slow_trace]


def test_a_target_met_after_one_step_has_that_steps_time():
    """Step 1 is a training step (setup is `warm`, apart): a run that meets its target at the
    first evaluation, after step 1, took that step's time to it, never 0 s, and has a time
    per step (it used to be the setup step: 0 s to target, no ms/step, "not reached" in the
    paired comparison)."""
    clock = FakeClock()
    stepper = FakeStepper(clock, compile_cost=50.0)
    record, _ = run_loop(stepper, lambda: {"val_loss": 2.0 - 0.1 * stepper.steps},
                         target=Target("val_loss", 1.95, "min"), max_steps=100, eval_every=1,
                         clock=clock)
    assert record["status"] == "reached" and record["steps_to_target"] == 1
    assert record["seconds_to_target"] == 1.0 and record["seconds_per_step"] == 1.0
    assert record["setup_seconds"] == 50.0 and record["seconds_to_target_with_setup"] == 51.0


def test_a_target_never_reached_is_a_timeout_and_a_nan_loss_diverges():
    clock = FakeClock()
    record, _ = run_loop(FakeStepper(clock), lambda: {"val_loss": 3.0},
                         target=Target("val_loss", 0.1, "min"), max_steps=5, eval_every=1,
                         clock=clock)
    assert record["status"] == "timeout" and record["seconds_to_target"] is None
    assert record["best_value"] == 3.0
    record, _ = run_loop(FakeStepper(clock, loss=float("nan")), lambda: {"val_loss": 3.0},
                         target=Target("val_loss", 0.1, "min"), max_steps=5, eval_every=1,
                         clock=clock)
    assert record["status"] == "diverged"


def test_segments_end_at_the_evaluation_steps_and_the_budget_is_read_there():
    """Setup apart (it moves nothing), then one segment per evaluation interval (the last one
    cut at max_steps): evaluations fall on the steps a per-step loop evaluated at."""
    clock = FakeClock()
    stepper = FakeStepper(clock, compile_cost=5.0)
    record, trace = run_loop(stepper, lambda: {"val_loss": 3.0},
                             target=Target("val_loss", 0.1, "min"), max_steps=23,
                             eval_every=10, clock=clock)
    assert stepper.segments == [10, 10, 3] and record["segments"] == 3
    assert [t["step"] for t in trace] == [0, 10, 20, 23]
    assert record["seconds"] == 23.0 and record["setup_seconds"] == 5.0
    assert stepper.warmed == 1
    clock = FakeClock()
    stepper = FakeStepper(clock, compile_cost=5.0)
    record, trace = run_loop(stepper, lambda: {"val_loss": 3.0},
                             target=Target("val_loss", 0.1, "min"), max_steps=100,
                             eval_every=10, time_budget=15.0, clock=clock)
    # the budget stops the run where it is spent (step 15), not at the next evaluation
    assert record["steps"] == 15 and [t["step"] for t in trace] == [0, 10, 15]
    assert "time budget of 15 s" in record["message"]


def test_a_huge_max_steps_makes_its_segments_as_it_goes():
    """max_steps up to 2**63 - 1 ("no step limit") is accepted: the segment ends are made one
    at a time (a list of them was a MemoryError or gigabytes before the first step), and no
    segment is longer than LONGEST_SEGMENT steps (its batches are made up front)."""
    from itertools import islice

    ends = segment_ends(2**63 - 1, 10)
    assert not isinstance(ends, list | tuple | range)
    assert list(islice(ends, 4)) == [10, 20, 30, 40]
    assert list(segment_ends(25, 10, longest=4)) == [4, 8, 10, 14, 18, 20, 24, 25]
    assert list(segment_ends(3, 2**62)) == [3]  # a huge eval_every: segments stay short
    assert list(islice(segment_ends(2**63 - 1, 2**62), 2)) == [LONGEST_SEGMENT,
                                                                2 * LONGEST_SEGMENT]
    clock = FakeClock()
    stepper = FakeStepper(clock, compile_cost=5.0)
    record, trace = run_loop(stepper, lambda: {"val_loss": 3.0},
                             target=Target("val_loss", 0.1, "min"), max_steps=2**63 - 1,
                             eval_every=10, time_budget=15.0, clock=clock)
    # the budget stops the run where it is spent (step 15), not at the next evaluation
    assert record["steps"] == 15 and [t["step"] for t in trace] == [0, 10, 15]
    assert "time budget of 15 s" in record["message"]


def test_batches_are_seeded_per_epoch_and_full_batch_is_one_value():
    rows, per_epoch = epoch_batches(10, 3, seed=4)
    again, _ = epoch_batches(10, 3, seed=4)
    assert per_epoch == 3  # the remainder dropped: no new shape, no recompilation
    assert all(np.array_equal(rows(i), again(i)) for i in range(7))
    assert len(set(np.concatenate([rows(i) for i in range(3)]))) == 9
    full, per_epoch = epoch_batches(10, 0, seed=4)
    assert per_epoch == 1 and np.array_equal(full(5), np.arange(10))


# ---- the target-setting round and tuning on its rows --------------------------------------------

def spec(**changes) -> Spec:
    base = Spec("t", "digits-cnn", {"name": "digits"}, "sparse_categorical_crossentropy",
                "accuracy", "keras:Adam", {"learning_rate": 0.01}, "jax", 64, 10,
                {"metric": "val_loss", "value": 0.5, "mode": "min", "how": "given"}, 0, 0,
                {"max_steps": 100})
    return replace(base, **changes)


def test_fit_is_timed_warm_over_the_loops_batches():
    """The fit baseline: the loop's compiling step and a one-step fit run untimed, then fit is
    timed over the remaining batches, in the loop's order (so the compared steps match)."""
    from study.train.run.measure import fit_record

    calls = []

    class Model:
        def fit(self, x, y, batch_size, epochs, shuffle, verbose):
            calls.append((x.copy(), batch_size, shuffle))
            return type("History", (), {"history": {"loss": [0.5]}})()

    class Trainer:
        def step(self, x, y):
            calls.append(("step", x.copy()))
            return 1.0

    rows, _ = epoch_batches(40, 4, seed=3)
    x = np.arange(40.0)
    record = fit_record(Trainer(), Model(), rows, x, x, steps=6)
    assert calls[0][0] == "step" and np.array_equal(calls[0][1], x[rows(0)])
    assert np.array_equal(calls[1][0], x[rows(1)])  # the untimed warm-up fit
    assert np.array_equal(calls[2][0], np.concatenate([x[rows(i)] for i in range(2, 6)]))
    assert calls[2][1] == 4 and calls[2][2] is False and len(calls) == 3
    assert record["seconds_per_step"] == pytest.approx(record["seconds"] / 4)


def test_fit_refuses_a_max_steps_it_cannot_gather():
    """loop 'fit' gathers its batches up front and has no time budget: "no step limit" is one
    line (InputError), not a MemoryError."""
    from study.train.run.measure import check_fit_size

    rows, _ = epoch_batches(40, 4, seed=3)
    x = np.arange(40.0)
    check_fit_size(rows, x, x, 1000)
    with pytest.raises(InputError, match="loop 'fit' gathers its 9223372036854775807 steps"):
        check_fit_size(rows, x, x, 2**63 - 1)


def test_the_target_setting_round_records_its_target():
    target = {"metric": "val_loss", "mode": "min", "how": "round", "value": None,
              "margin": 0.1, "seed": 9, "stopping": {"max_steps": 500}, "backend": "jax",
              "batch_size": 64,
              "configurations": [["keras:Adam", {"learning_rate": 0.01}], ["lbfgs", {}]]}
    measured = spec(target=target, seed=1)
    runs = rounds.prerequisites(measured)
    assert [r.optimizer for r in runs] == ["keras:Adam", "lbfgs"]
    assert all(r.seed == 9 and r.target["how"] == "setting" and r.target["value"] is None
               and r.stopping == {"max_steps": 500} for r in runs)
    assert runs[0].batch_size == 64 and runs[1].batch_size == 0  # L-BFGS: full batch
    assert rounds.prerequisites(replace(measured, optimizer="lbfgs", batch_size=0)) == runs
    assert rounds.resolve(measured, {}) is None  # waits for the round's rows
    rows = {runs[0].run_id: {"status": "completed", "best_value": 0.40, "target_mode": "min"},
            runs[1].run_id: {"status": "completed", "best_value": 0.30, "target_mode": "min"}}
    ready = rounds.resolve(measured, rows)
    assert ready.target["value"] == pytest.approx(0.33) and ready.target["best"] == 0.30
    assert ready.axes()["target_how"] == "round" and ready.run_id != measured.run_id


def test_tuning_picks_the_rate_with_the_best_validation_value():
    tuned = spec(hyperparameters={"learning_rate": "tuned"},
                 tuning={"role": "tuned", "grid": [0.001, 0.01, 0.1], "seed": 7,
                         "stopping": {"max_steps": 50}, "criterion": "best validation value"})
    runs = rounds.prerequisites(tuned)
    assert [r.hyperparameters["learning_rate"] for r in runs] == [0.001, 0.01, 0.1]
    assert all(r.seed == 7 and r.target["value"] is None for r in runs)  # no target to chase
    rows = {runs[0].run_id: {"status": "completed", "best_value": 0.9},
            runs[1].run_id: {"status": "completed", "best_value": 0.4},
            runs[2].run_id: {"status": "diverged", "best_value": 0.1}}
    ready = rounds.resolve(tuned, rows)
    assert ready.hyperparameters["learning_rate"] == 0.01 and ready.tuning["value"] == 0.01
    assert ready.target == tuned.target
    # the tuned run's row is one the study's table takes (make full's tuned runs all failed
    # on an undeclared tuning_criterion column)
    from study.train.sweep.schema import SCHEMA
    for made in (ready, runs[0]):
        assert SCHEMA.frame([made.axes()])["tuning"].tolist() == [made.tuning["role"]]


# ---- bad input ----------------------------------------------------------------------------------

def train_cli(tmp_path, *args):
    """`python -m study train ...` in a fresh process (its own KERAS_BACKEND): (code, stderr)."""
    out = tmp_path / "out.parquet"
    done = subprocess.run([sys.executable, "-m", "study", "train", *args, "--out", str(out)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert not out.exists()  # nothing written
    return done.returncode, done.stderr.strip()


@pytest.mark.parametrize("args, words", [
    (["--model", "missing.keras"], "missing.keras' does not exist"),
    (["--model", "digits-cnn", "--optimizer", "adam"], "--optimizer: unknown 'adam'"),
    (["--model", "digits-cnn", "--backend", "mxnet"], "--backend: unknown 'mxnet'"),
    (["--model", "digits-cnn", "--data", "nothing.npz"], "nothing.npz' does not exist"),
])
def test_bad_arguments_give_one_line_and_exit_2(tmp_path, capsys, args, words):
    data = [] if "--data" in args else ["--data", "digits"]
    out = tmp_path / "out.parquet"
    code = cli(["train", *data, "--target", "val_loss=0.3", *args, "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and words in err, err
    assert not out.exists()


@pytest.mark.slow
def test_labels_outside_the_losss_range_end_in_one_line(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "bad.npz"
    np.savez(path, x_train=rng.normal(size=(20, 3)), y_train=np.full(20, 3.0),
             x_val=rng.normal(size=(5, 3)), y_val=np.ones(5))
    code, err = train_cli(tmp_path, "--model", "eve-mlp", "--data", str(path), "--loss",
                          "binary_crossentropy", "--target", "val_loss=0.3", "--backend", "jax")
    assert code == 2 and len(err.splitlines()) == 1 and "must lie in [0, 1]" in err, err


def test_a_framework_not_installed_is_one_line(monkeypatch):
    from study.frameworks import registry
    from study.train.sweep.config import check_installed

    fake = replace(registry.FRAMEWORKS["jax"], packages=("no-such-distribution",))
    monkeypatch.setitem(registry.FRAMEWORKS, "jax", fake)
    assert "pip install 'convergence-study[jax]'" in check_installed([spec()])


def npz(tmp_path, **arrays):
    rng = np.random.default_rng(0)
    base = {"x_train": rng.normal(size=(20, 3)), "y_train": np.zeros(20),
            "x_val": rng.normal(size=(5, 3)), "y_val": np.zeros(5)}
    path = tmp_path / "data.npz"
    np.savez(path, **{**base, **arrays})
    return str(path)


def test_bad_data_names_the_array(tmp_path):
    x = np.ones((20, 3))
    x[4, 1] = np.nan
    with pytest.raises(InputError, match="x_train has 1 non-finite values"):
        load_data({"path": npz(tmp_path, x_train=x)})
    with pytest.raises(InputError, match="x_train has 20 rows but y_train 7"):
        load_data({"path": npz(tmp_path, y_train=np.zeros(7))})
    with pytest.raises(InputError, match="unknown key 'colour'"):
        load_data({"name": "digits", "colour": 1})


def test_bad_models_losses_metrics_and_optimizers(tmp_path):
    from study.frameworks.keras.train import build, keras_optimizer, loss_object, metric_object
    from study.train.models.model import outputs_for

    (tmp_path / "not_a_model.keras").write_text("hello")
    with pytest.raises(InputError, match="is not a Keras model"):
        build(str(tmp_path / "not_a_model.keras"), (3,), 1)
    (tmp_path / "m.py").write_text(
        "import keras\n"
        "def fails(shape, outputs):\n    raise ValueError('no such layer')\n"
        "def dense(shape, outputs):\n"
        "    return keras.Sequential([keras.Input(shape=(7,)), keras.layers.Dense(outputs)])\n"
        "def other(shape, outputs):\n    return 3\n")
    with pytest.raises(InputError, match="failed to build: ValueError: no such layer"):
        build(f"{tmp_path}/m.py:fails", (3,), 1)
    with pytest.raises(InputError, match=r"do not fit"):
        build(f"{tmp_path}/m.py:dense", (3,), 1)
    with pytest.raises(InputError, match="did not give a Keras model"):
        build(f"{tmp_path}/m.py:other", (3,), 1)
    with pytest.raises(InputError, match="defines no function 'nope'"):
        build(f"{tmp_path}/m.py:nope", (3,), 1)
    with pytest.raises(InputError, match="unknown Keras loss 'hinge_of_doom'"):
        loss_object("hinge_of_doom")
    with pytest.raises(InputError, match="unknown Keras metric 'luck'"):
        metric_object("luck")
    with pytest.raises(InputError, match="unknown Keras optimizer 'Adamm'"):
        keras_optimizer("keras:Adamm", {})
    with pytest.raises(InputError, match="learning_rate must be in"):
        keras_optimizer("keras:Adam", {"learning_rate": -1.0})
    with pytest.raises(InputError, match="class indices"):
        outputs_for("sparse_categorical_crossentropy", np.array([0, 1.5]), np.array([1]), "d")


# ---- one small sweep on the three frameworks ---------------------------------------------------

SWEEP = """
kind = "train"
name = "tiny"
seeds = [0, 1]
backends = ["tensorflow", "jax", "torch"]
run_timeout = 120

[[problems]]
name = "digits"
model = "digits-cnn"
data = { name = "digits" }
loss = "sparse_categorical_crossentropy"
metric = "accuracy"
batch_size = 128
eval_every = 5
target = { metric = "val_loss", value = 1.6 }
stopping = { max_steps = 200 }

[[problems]]
name = "digits-round"          # the same model and data (and so weights), its target set
model = "digits-cnn"
data = { name = "digits" }
loss = "sparse_categorical_crossentropy"
metric = "accuracy"
batch_size = 128
eval_every = 2
target = { metric = "val_loss", set = "round", margin = 0.5, seed = 9, stopping = {max_steps = 6} }
stopping = { max_steps = 100 }

[[optimizers]]
name = "keras:Adam"
learning_rate = 0.01

[[optimizers]]
name = "lbfgs"

[[exclude]]
target_how = "round"
backend = "tensorflow"

[[exclude]]
target_how = "round"
backend = "torch"
"""


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    folder = tmp_path_factory.mktemp("train")
    (folder / "tiny.toml").write_text(SWEEP)
    out = folder / "results"
    assert cli(["run", str(folder / "tiny.toml"), "--out", str(out), "--quiet",
                "--no-adaptive"]) == 0  # its instances fixed: the adaptive loop adds none
    return pd.read_parquet(out / "runs.parquet"), pd.read_parquet(out / "traces.parquet")


@pytest.mark.slow  # not numerical: the frameworks' own kernels, not NumPy's BLAS, compute it
def test_loaded_weights_give_the_same_validation_loss_on_every_framework(sweep):
    runs, _ = sweep
    digits = runs[runs["target_how"] != "setting"]
    assert set(digits["backend"]) == {"tensorflow", "jax", "torch"}
    for _, group in digits.groupby("seed"):
        reference = group["reference_val_loss"].iloc[0]
        assert group["reference_val_loss"].eq(reference).all()  # made once per seed
        assert np.allclose(group["initial_val_loss"], reference, rtol=1e-4, atol=0)
    assert digits.groupby("seed")["reference_val_loss"].first().nunique() == 2  # seeds differ


@pytest.mark.slow
def test_a_tiny_model_reaches_an_explicit_target_on_each_framework(sweep):
    runs, traces = sweep
    digits = runs[runs["target_how"] == "given"]
    assert len(digits) == 12
    assert digits["status"].eq("reached").all(), digits[["backend", "optimizer", "message"]]
    assert digits["target_value"].eq(1.6).all() and digits["target_how"].eq("given").all()
    assert (digits["seconds_to_target"] <= digits["seconds"]).all()
    assert digits["setup_seconds"].gt(0).all() and digits["eval_seconds"].gt(0).all()
    for row in digits.to_dict("records"):
        trace = traces[traces["run_id"] == row["run_id"]].sort_values("step")
        assert trace["step"].iloc[0] == 0 and trace["seconds"].iloc[0] == 0.0
        assert trace["val_loss"].iloc[-1] <= 1.6 < trace["val_loss"].iloc[:-1].min()
        assert trace["seconds"].iloc[-1] == row["seconds_to_target"]


@pytest.mark.slow
def test_seeds_are_paired_across_optimizers_and_frameworks(sweep):
    runs, _ = sweep
    measured = runs[runs["target_how"] != "setting"]
    for how, part in measured.groupby("target_how"):
        configs = part.groupby(["optimizer", "backend"])["seed"].apply(sorted)
        assert len(configs) == (6 if how == "given" else 2)
        assert all(seeds == [0, 1] for seeds in configs), (how, configs)
    lbfgs = measured[measured["optimizer"] == "lbfgs"]
    assert lbfgs["batch_size"].eq(0).all() and lbfgs["loss_evaluations"].gt(0).all()


@pytest.mark.slow
def test_the_round_sets_the_target_on_every_row(sweep):
    runs, _ = sweep
    setting = runs[runs["target_how"] == "setting"]
    measured = runs[runs["target_how"] == "round"]
    assert len(setting) == 2 and setting["seed"].eq(9).all()  # Adam and L-BFGS, held apart
    assert setting["target_value"].isna().all() and setting["status"].eq("completed").all()
    best = setting["best_value"].min()
    assert len(measured) == 4
    assert np.allclose(measured["target_value"], best * 1.5)
    assert measured["target_margin"].eq(0.5).all() and measured["target_seed"].eq(9).all()
    assert measured["status"].isin(["reached", "timeout"]).all()
    # a margin of 0.5 over a 6-step round lies above the initial loss: said on every row
    assert measured["message"].str.contains("the initial weights already meet the target").all()
    assert json.loads(measured["spec"].iloc[0])["target"]["best"] == best


# ---- your own model and data, and the warm process's Keras -------------------------------------

@pytest.mark.slow
def test_your_own_model_file_on_your_npz_reaches_its_target(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(300, 3))
    y = x @ np.array([1.0, -2.0, 0.5]) + 0.1 * rng.normal(size=300)
    path = tmp_path / "mine.npz"
    np.savez(path, x_train=x[:240], y_train=y[:240], x_val=x[240:], y_val=y[240:])
    (tmp_path / "mine.py").write_text(
        "import keras\n"
        "def linear(input_shape, outputs):\n"
        "    return keras.Sequential([keras.Input(shape=input_shape),\n"
        "                             keras.layers.Dense(outputs)])\n")
    out = tmp_path / "row.parquet"
    done = subprocess.run([sys.executable, "-m", "study", "train", "--model",
                           f"{tmp_path}/mine.py:linear", "--data", str(path), "--loss", "mse",
                           "--metric", "mae", "--optimizer", "lbfgs", "--backend", "jax",
                           "--eval-every", "2", "--target", "val_loss=0.05", "--max-steps", "100",
                           "--out", str(out)], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    row = pd.read_parquet(out).iloc[0]
    assert row["status"] == "reached" and row["batch_size"] == 0 and row["n_train"] == 240
    assert row["val_loss"] <= 0.05 and row["target_mode"] == "min"


@pytest.mark.slow
def test_a_warm_process_imports_keras_on_its_framework_and_no_tensorflow():
    code = ("import os, sys; os.environ.pop('KERAS_BACKEND', None); "
            "import study.frameworks.jax.train as adapter; adapter.warm(); import keras; "
            "print(keras.backend.backend(), 'tensorflow' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert done.stdout.split() == ["jax", "False"], done.stderr
