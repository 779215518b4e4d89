"""The timed loop of a train run, written against three callables so that its bookkeeping can
be tested without a framework or a real clock:

  batch(i)          -> the i-th step's (x, y), made outside the clock
  step(x, y)        -> the training loss of that step, a host value (so the device is done)
  evaluate()        -> {"val_loss": ..., "val_<metric>": ...}, host values

The first step compiles (tracing, XLA or torch's first call): its seconds are `setup_seconds`,
never training time. Evaluation runs every `eval_every` steps, on its own clock
(`eval_seconds`), never counted. `seconds` is training time up to where the run stopped and
`seconds_to_target` training time up to the first evaluation at or past the target.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

STATUSES = ("reached", "timeout", "diverged", "completed")  # completed: ran its budget, no target


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


def run_loop(batch, step, evaluate, *, target: Target, max_steps: int, eval_every: int,
             time_budget: float | None = None, clock=time.perf_counter,
             check_initial=None) -> tuple[dict, list[dict]]:
    """(record, trace): the trace has one row per evaluation (step 0: the initial weights)."""
    trace: list[dict] = []
    record = {"steps": 0, "setup_seconds": None, "seconds": 0.0, "eval_seconds": 0.0,
              "evaluations": 0, "seconds_to_target": None, "steps_to_target": None,
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
    status = "timeout" if target.value is not None else "completed"
    message = f"ran its budget of {max_steps} steps"
    for i in range(max_steps):
        x, y = batch(i)
        t0 = clock()
        loss = step(x, y)
        elapsed = clock() - t0
        if i == 0:
            record["setup_seconds"] = elapsed
        else:
            record["seconds"] += elapsed
        record["steps"], record["train_loss"] = i + 1, loss
        if not math.isfinite(loss):
            status, message = "diverged", f"training loss {loss} at step {i + 1}"
            break
        over_time = time_budget is not None and record["seconds"] >= time_budget
        if (i + 1) % eval_every == 0 or i + 1 == max_steps or over_time:
            logs = timed_evaluation(i + 1)
            value = logs[target.metric]
            if not math.isfinite(value):
                status, message = "diverged", f"{target.metric} {value} at step {i + 1}"
                break
            if target.reached(value):
                status = "reached"
                message = f"{target.metric} {value:.6g} reached {target.value:.6g}"
                record["seconds_to_target"] = record["seconds"]
                record["steps_to_target"] = i + 1
                break
        if over_time:
            message = f"ran its time budget of {time_budget:g} s of training"
            break
    if status in ("timeout", "completed") and target.value is not None:
        message += f"; best {target.metric} {record['best_value']:.6g}, target " \
                   f"{target.value:.6g} not reached"
    record["status"], record["message"] = status, message
    return record, trace


def epoch_batches(n: int, batch_size: int, seed: int):
    """batch(i) -> row indices: a fresh seeded permutation per epoch, the remainder dropped (a
    smaller last batch would be a new shape, which recompiles), full batch when batch_size is 0
    or at least n. The order depends on the seed alone: the same on every framework."""
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
