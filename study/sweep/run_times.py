"""How long runs not made yet will take: from the wall time of this machine's runs made so far.

One estimator for the dry run and the sweep's progress line: a run's own past time where it has
one, else the median of its configuration's runs, else the median of every run. It is said to be
an estimate: a configuration not measured yet may cost ten times the median.
"""

from __future__ import annotations

import math
import socket
import statistics

import pandas as pd

from study.sweep.grid import configuration


class RunTimes:
    """Seconds per run, by run id and by configuration; `add` as runs finish."""

    def __init__(self):
        self.own: dict[str, float] = {}
        self.by_config: dict[str, list[float]] = {}
        self.every: list[float] = []
        self.keys: dict[str, str] = {}  # run id -> configuration (made once per spec)

    def __len__(self) -> int:
        return len(self.every)

    def key(self, spec) -> str:
        if spec.run_id not in self.keys:
            self.keys[spec.run_id] = configuration(spec)
        return self.keys[spec.run_id]

    def add(self, spec, seconds: float, run_id: str | None = None) -> None:
        """A run's time; `spec` None: one whose spec the code here no longer reads."""
        self.every.append(float(seconds))
        self.own[run_id or spec.run_id] = float(seconds)
        if spec is not None:
            self.by_config.setdefault(self.key(spec), []).append(float(seconds))

    @classmethod
    def from_rows(cls, rows: pd.DataFrame, plugin) -> RunTimes:
        """The rows this host measured."""
        times = cls()
        if "wall_seconds" not in rows or "worker_host" not in rows or "spec" not in rows:
            return times
        mine = rows[rows["worker_host"].eq(socket.gethostname()) & rows["wall_seconds"].notna()]
        for run_id, text, seconds in zip(mine["run_id"], mine["spec"], mine["wall_seconds"],
                                         strict=True):
            try:
                spec = plugin.spec_from_json(text)
            except Exception:  # noqa: BLE001 -- a spec of older code: not matched by config
                spec = None
            times.add(spec, seconds, run_id)  # by the row's run id, as the plan names it
        return times

    def total(self, specs) -> tuple[float, int]:
        """(seconds for `specs`, how many matched by run or configuration)."""
        if not len(self):
            return math.nan, 0
        overall = self.median()
        seconds, matched = 0.0, 0
        for spec in specs:
            found = self.own.get(spec.run_id)
            if found is None and self.key(spec) in self.by_config:
                found = statistics.median(self.by_config[self.key(spec)])
            matched += found is not None
            seconds += overall if found is None else found
        return seconds, matched

    def median(self) -> float:
        return statistics.median(self.every)


def time_budgets(specs) -> float:
    """The seconds the specs' time budgets add up to: a lower bound on their time."""
    budgets = (float(spec.axes().get("stop_time_budget") or 0) for spec in specs)
    return sum(b for b in budgets if math.isfinite(b))


def duration(seconds: float) -> str:
    """Seconds as a person reads a wait: '40 s', '12 min', '1.6 h'."""
    if seconds < 1:
        return "under 1 s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def left(times: RunTimes, pending, run_timeout: float) -> str:
    """The progress line's words for the time the pending runs will take."""
    if not pending:
        return "no planned run left"
    if len(times):
        seconds, _ = times.total(pending)
        return f"est. {duration(seconds)} left"
    trained = time_budgets(pending)
    if trained:
        return f"at least {duration(trained)} left (time budgets)"
    return f"time left unknown until a run ends (each at most {duration(run_timeout)})"
