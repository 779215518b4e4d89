"""One run's result record and its convergence trace, the same for every optimizer and backend."""

from __future__ import annotations

import json
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

TRACE_COLUMNS = ("iteration", "seconds", "loss", "suboptimality", "grad_norm")


def on_trace_schedule(iteration: int) -> bool:
    """Which iterations the trace keeps: all of the first 100, then about 90 per decade."""
    if iteration < 100:
        return True
    stride = 10 ** (len(str(iteration)) - 2)
    return iteration % stride == 0


def next_on_schedule(iteration: int) -> int:
    """The first iteration after `iteration` that the trace keeps (on_trace_schedule)."""
    following = iteration + 1
    if following < 100:
        return following
    stride = 10 ** (len(str(following)) - 2)
    return -(-following // stride) * stride  # a decade's first is a multiple of the next stride


def interpolated_seconds(iterations: list[int], chunks) -> list[float]:
    """Seconds of each traced iteration of a loop that ran in chunks read once each (JAX's
    fused loop, PyTorch's CUDA graph replays): iteration 0 at the clock's start, the others
    linearly between the start and end of the chunk (first, last, began, ended) that computed
    them."""
    seconds = []
    for it in iterations:
        for first, last, began, ended in chunks:
            if it <= last:
                share = (it - first) / max(last - first, 1)
                seconds.append(began + share * (ended - began) if it > 0 else 0.0)
                break
        else:
            seconds.append(chunks[-1][3] if chunks else 0.0)
    return seconds


class Stopwatch:
    """Wall clock of the timed region, with bookkeeping (trace recording) paused out of it."""

    def __init__(self):
        self._start = time.perf_counter()
        self._paused = 0.0

    def elapsed(self) -> float:
        return time.perf_counter() - self._start - self._paused

    @contextmanager
    def paused(self):
        t = time.perf_counter()
        try:
            yield
        finally:
            self.exclude_since(t)

    def exclude_since(self, t: float) -> None:
        """Take the time since `t` (a perf_counter reading) out of the elapsed time."""
        self._paused += time.perf_counter() - t


@dataclass
class Outcome:
    """What a backend's loop returns: the final iterate on the host and how the loop ended."""

    w: np.ndarray
    iterations: int
    seconds: float
    setup_seconds: float
    status: str
    message: str
    trace: dict = field(default_factory=lambda: {c: [] for c in TRACE_COLUMNS})
    nfev: int | None = None
    ngev: int | None = None
    nhvp: int | None = None
    device: str = "cpu"
    extra: dict = field(default_factory=dict)
    rule: object = None  # the stopping rule that ended the run; None if it ended otherwise


@dataclass
class RunResult:
    optimizer: str
    hyperparameters: dict
    backend: str
    device: str
    dtype: str
    dataset: str
    dataset_params: dict
    n: int
    d: int
    init: str
    seed: int
    stopping: dict
    iterations: int
    nfev: int
    ngev: int
    nhvp: int
    setup_seconds: float
    seconds: float
    final_loss: float
    suboptimality: float
    target_reached: bool | None  # float64 suboptimality <= tol (None without a tol rule)
    grad_norm: float
    status: str
    message: str
    f_star: float
    f_star_accuracy: float  # estimated relative accuracy of f* (datasets.reference)
    suboptimality_floor: float  # suboptimality = (f - f*) / max(f*, this)
    kappa: float  # Hessian condition number, columns equilibrated
    kappa_raw: float  # ... of X as given
    trace: pd.DataFrame = field(repr=False, default=None)
    w: np.ndarray = field(repr=False, default=None)
    extra: dict = field(default_factory=dict)
    conditioning: dict = field(default_factory=dict)  # Reference.conditioning(): mu, L, kappas
    prediction: dict = field(default_factory=dict)  # the bound's iterations and verdict

    @property
    def seconds_per_iteration(self) -> float:
        return self.seconds / self.iterations if self.iterations else float("nan")

    def record(self) -> dict:
        """The flat row of a results table: scalars only, parameters also as JSON strings."""
        row = {k: v for k, v in asdict(self).items()
               if k not in ("trace", "w", "hyperparameters", "dataset_params", "stopping", "extra",
                            "conditioning", "prediction")}
        row.update(self.conditioning)
        row.update(self.prediction)
        row["coefficients"] = None if self.w is None else json.dumps(np.asarray(self.w).tolist())
        row["seconds_per_iteration"] = self.seconds_per_iteration
        row["total_seconds"] = self.setup_seconds + self.seconds
        row["hyperparameters"] = json.dumps(self.hyperparameters, sort_keys=True)
        row["dataset_params"] = json.dumps(self.dataset_params, sort_keys=True, default=str)
        row.update({f"hp_{k}": v for k, v in self.hyperparameters.items()})
        row.update({f"stop_{k}": v for k, v in self.stopping.items()})
        row.update(self.extra)
        return row

    def summary(self) -> str:
        """The one line the CLI prints."""
        per = (f"{self.seconds_per_iteration * 1e3:.4g} ms/iter" if self.iterations else
               "no iteration to divide by")  # not 'nan ms/iter' after 0 iterations
        return (f"{self.optimizer} on {self.backend}/{self.device} {self.dtype}: {self.status} "
                f"after {self.iterations} iteration{'' if self.iterations == 1 else 's'} in "
                f"{self.seconds:.4g} s (setup {self.setup_seconds:.3g} s, {per}), "
                f"suboptimality {self.suboptimality:.3g}")

    def reference_line(self) -> str:
        """What the run was judged against: f*, its accuracy and the conditioning (the kappas
        named as `regress`'s line before the run names them: KAPPA_NAMES says what each is)."""
        return (f"reference f* = {self.f_star:.17g} (relative accuracy {self.f_star_accuracy:.2g}"
                f", floor {self.suboptimality_floor:.3g}); kappa {self.kappa_raw:.3g} as run, "
                f"{self.kappa:.3g} scaled")


def apply_state_record(outcome: Outcome, optimizer, state) -> Outcome:
    """Evaluation counts only the optimizer knows (a line search's evaluations, TFP's), read
    from its final state by `optimizer.state_record(state)` (with any columns of
    its own, e.g. the library class of keras:<Class>); None keeps the fixed
    per-iteration counts (`optimizers.driver.counts`)."""
    report = optimizer.state_record(state)
    if report:
        outcome.nfev, outcome.ngev, outcome.nhvp = (report.pop(k) for k in
                                                     ("nfev", "ngev", "nhvp"))
        outcome.extra.update(report)
    return outcome
