"""Every row and word of the train study true (round 6): a time budget is a wall-clock limit
between steps, `diverged` means what it means in the regression study, nothing-to-train and
unreachable targets refused before any clock, randomness in training found by behaviour, config
mistakes refused before any run, the report true for every model kind, and native models as the
upstream tutorials write them."""

import math

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
