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
])
def test_a_target_below_an_errors_range_is_refused(data, metric, target):
    refused(["train", "--model", "digits-cnn", "--data", str(data / "ok.npz"), "--loss", SPARSE,
             "--metric", metric, "--target", target], "is below 0, which")
