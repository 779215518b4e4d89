"""The timed loop of a train run: segments of steps with no host read inside, written against a
small stepper (prepare a segment's batches off the clock, `warm` for setup, `run` the steps, `read`
the last loss once; `evaluate` off the clock) so that its bookkeeping is tested without a
framework or a real clock.

Why segments: a host read is a synchronization, and reading the loss after every step (as
`train_on_batch` does) timed the harness instead of the framework on JAX (2.6x to 4.3x a warm
`fit`). A segment runs K steps, then synchronizes once and reads the clock; divergence
(optimizers.stopping.Divergence) is looked at segment ends. Segments end at every evaluation
step, so evaluations fall where a per-step loop's would. With a time budget, a segment runs no
more steps than the budget's rest fits at the time per step seen so far, and a segment ending
past the budget is evaluated no more (`timeout`: a target met past the budget is not met).

Setup (`warm`, timed apart as `setup_seconds`) runs one step for what a first call costs and
moves nothing, so no step compiles inside the clock and step 1 is a training step like the
others. `seconds_to_target` is training time up to the first evaluation at or past the target;
`seconds_to_target_with_setup` adds the setup, as AlgoPerf counts it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from convergence_study.errors import InputError
from optimizers.stopping import Divergence
from study import interrupts

# completed: ran its budget without a target
LOOP_STATUSES = ("reached", "timeout", "diverged", "completed")
# the most steps in one segment: its batches are put on the device before it runs, and the
# time budget is read at its end (one host read per this many steps at the least)
LONGEST_SEGMENT = 1000
DIVERGENCE = Divergence()  # the regression study's rule: a non-finite loss, or grown 1e5 times


@dataclass(frozen=True)
class Target:
    metric: str  # val_loss or val_<metric>
    value: float | None  # None: no target (a tuning or target-setting run)
    mode: str  # min or max

    def reached(self, value: float) -> bool:
        if self.value is None:
            return False
        return value <= self.value if self.mode == "min" else value >= self.value

    def better(self, a: float, b: float | None) -> bool:
        return b is None or (a < b if self.mode == "min" else a > b)

    def checked(self, metric: str) -> Target:
        """The target, if it names the loss or the run's metric."""
        if self.metric not in ("val_loss", f"val_{metric}"):
            raise InputError(f"target metric '{self.metric}': allowed val_loss, val_{metric}")
        return self

    def met_at_start(self, logs: dict, refuse: bool = True) -> str | None:
        """Initial weights that already meet the target: refused (no time to measure), or
        where not `refuse` (a round's target), the words saying so."""
        value = logs[self.metric]
        if not self.reached(value):
            return None
        met = (f"the initial weights already meet the target: {self.metric} {value:.6g} "
               f"before any training, target {self.value:.6g}")
        if refuse:
            raise InputError(f"{met} ({self.mode}); there is no time to measure: set a harder "
                             "target")
        return met


def next_end(done: int, max_steps: int, eval_every: int, longest: int | None = None) -> int:
    """The step after `done` at which the loop synchronizes: the next evaluation step, the last
    step, or `longest` steps on (a segment's batches are made before it runs)."""
    longest = LONGEST_SEGMENT if longest is None else longest
    following = (done // eval_every + 1) * eval_every  # the next evaluation step
    return min(following, done + longest, max_steps)


def segment_ends(max_steps: int, eval_every: int, longest: int | None = None):
    """The steps after which the loop synchronizes without a time budget (lazily)."""
    end = 0
    while end < max_steps:
        end = next_end(end, max_steps, eval_every, longest)
        yield end


def run_loop(stepper, evaluate, *, target: Target, max_steps: int, eval_every: int,
             time_budget: float | None = None, clock=time.perf_counter,
             check_initial=None) -> tuple[dict, list[dict]]:
    """(record, trace): the trace has one row per evaluation (step 0: the initial weights)."""
    trace: list[dict] = []
    record = {"steps": 0, "setup_seconds": None, "seconds": 0.0, "seconds_per_step": None,
              "eval_seconds": 0.0, "evaluations": 0, "segments": 0, "seconds_to_target": None,
              "seconds_to_target_with_setup": None, "steps_to_target": None,
              "best_value": None, "train_loss": None}

    def timed_evaluation(steps: int) -> dict:
        t0 = clock()
        logs = evaluate()
        record["eval_seconds"] += clock() - t0
        record["evaluations"] += 1
        value = logs[target.metric]
        if math.isfinite(value) and target.better(value, record["best_value"]):
            record["best_value"] = value
        trace.append({"step": steps, "seconds": record["seconds"],
                      "train_loss": record["train_loss"], **logs})
        return logs

    initial = timed_evaluation(0)
    if check_initial is not None:
        check_initial(initial)  # refuses before any training
    start = initial["val_loss"]  # the loss growth is measured from (optimizers.stopping)
    status = "timeout" if target.value is not None else "completed"
    message = f"ran its budget of {max_steps} steps"
    done = 0
    first = stepper.prepare(0, 1)
    t0 = clock()
    stepper.warm(first)
    record["setup_seconds"] = clock() - t0
    while done < max_steps:
        end = next_end(done, max_steps, eval_every)
        if time_budget is not None:  # no further than the steps the budget is seen to fit
            end = min(end, done + max(1, steps_within(record, time_budget)))
        prepared = stepper.prepare(done, end - done)
        t0 = clock()
        loss = stepper.read(stepper.run(prepared))
        record["seconds"] += clock() - t0
        done = end
        record["steps"], record["train_loss"] = end, loss
        record["seconds_per_step"] = record["seconds"] / end
        record["segments"] += 1
        interrupts.check()  # one that code calling Python from C++ caught and dropped
        if DIVERGENCE.past(loss, start):
            status, message = "diverged", f"training loss {loss:.6g} by step {end}" \
                f"{grown(loss, start)}"
            break
        past = time_budget is not None and record["seconds"] > time_budget
        if past:  # an evaluation now would not be within the budget: none is made
            message = (f"ran its time budget of {time_budget:g} s of training (step {end} "
                       f"ended at {record['seconds']:.3g} s)")
            break
        last = time_budget is not None and steps_within(record, time_budget) < 1
        if end % eval_every == 0 or end == max_steps or last:
            logs = timed_evaluation(end)
            value = logs[target.metric]
            if DIVERGENCE.past(logs["val_loss"], start) or not math.isfinite(value):
                shown = value if not math.isfinite(value) else logs["val_loss"]
                name = target.metric if not math.isfinite(value) else "val_loss"
                status = "diverged"
                message = f"{name} {shown:.6g} at step {end}{grown(logs['val_loss'], start)}"
                break
            if target.reached(value):
                status = "reached"
                message = f"{target.metric} {value:.6g} reached {target.value:.6g}"
                record["seconds_to_target"] = record["seconds"]
                record["seconds_to_target_with_setup"] = (record["seconds"]
                                                          + record["setup_seconds"])
                record["steps_to_target"] = end
                break
        if last:
            message = f"ran its time budget of {time_budget:g} s of training"
            break
    if status in ("timeout", "completed") and target.value is not None:
        message += f"; best {target.metric} {record['best_value']:.6g}, target " \
                   f"{target.value:.6g} not reached"
    record["status"], record["message"] = status, message
    return record, trace


def finished(record: dict, trace: list[dict], metric: str, per_epoch: int) -> dict:
    """The loop's record with what its trace and epochs say."""
    record.update(initial_val_loss=trace[0]["val_loss"], val_loss=trace[-1].get("val_loss"),
                  val_metric=trace[-1].get(f"val_{metric}"), epochs=record["steps"] / per_epoch,
                  total_seconds=(record["setup_seconds"] or 0.0) + record["seconds"])
    return record


def steps_within(record: dict, time_budget: float) -> int:
    """The steps the budget's rest fits at the time per step seen so far (one step first: a
    step's time is unknown before one ran)."""
    if not record["steps"]:
        return 1
    if not record["seconds_per_step"]:  # steps faster than the clock's resolution
        return LONGEST_SEGMENT
    return int((time_budget - record["seconds"]) // record["seconds_per_step"])


def grown(loss: float, start: float) -> str:
    """Why a finite loss is called diverged: optimizers.stopping.Divergence's growth."""
    if not math.isfinite(loss):
        return ""
    return f", {loss / start:.3g} times the initial val_loss {start:.6g} (past " \
           f"{DIVERGENCE.factor:g} times: diverged, as in every study)"


def epoch_batches(n: int, batch_size: int, seed: int):
    """batch(i) -> row indices: a fresh seeded permutation per epoch, the remainder dropped (a
    smaller last batch would be a new shape, which recompiles), full batch when batch_size is 0
    or n; one above n is refused. The order depends on the seed alone: the same on every
    framework."""
    if batch_size > n:
        raise InputError(f"batch_size {batch_size} is more than the {n} training rows; give at "
                         "most that, or 0 for full batch")
    size = n if batch_size <= 0 or batch_size >= n else batch_size
    per_epoch = n // size
    orders: dict[int, object] = {}

    def rows(i: int):
        import numpy as np

        epoch, position = divmod(i, per_epoch)
        if epoch not in orders:
            orders.clear()
            orders[epoch] = (np.arange(n) if size == n else
                             np.random.default_rng([seed, epoch]).permutation(n))
        return orders[epoch][position * size:(position + 1) * size]

    return rows, per_epoch
