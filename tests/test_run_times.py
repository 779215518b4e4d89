"""The sweep's time left: an estimate from the runs measured so far (a run's own time, else its
configuration's median, else every run's), the budgets before any run, and said as an estimate
in the progress lines. No wall-clock time is asserted: the times are given."""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass

import pandas as pd

from study.__main__ import main
from study.sweep.run_times import RunTimes, duration, left


@dataclass(frozen=True)
class Spec:
    run_id: str
    size: int
    seed: int = 0
    budget: float | None = None

    def axes(self):
        return {"size": self.size, "seed": self.seed, "stop_time_budget": self.budget}


def test_a_run_counts_at_its_own_time_else_its_configurations_else_the_median():
    times = RunTimes()
    for run_id, size, seconds in (("a", 1, 10.0), ("b", 1, 30.0), ("c", 2, 100.0)):
        times.add(Spec(run_id, size), seconds)
    assert times.median() == 30.0
    # "a" again at its own 10 s; a new seed of size 1 at its median 20 s; size 3 at 30 s
    total, matched = times.total([Spec("a", 1), Spec("d", 1, seed=5), Spec("e", 3)])
    assert (total, matched) == (60.0, 2)
    assert left(times, [Spec("e", 3)] * 4, 600) == "est. 2 min left"


def test_before_any_run_the_budgets_bound_it_and_nothing_is_invented():
    times = RunTimes()
    assert RunTimes().total([Spec("a", 1)])[1] == 0
    assert left(times, [Spec("a", 1, budget=300.0)] * 2, 600) == \
        "at least 10 min left (time budgets)"
    assert left(times, [Spec("a", 1)], 600) == \
        "time left unknown until a run ends (each at most 10 min)"
    assert left(times, [], 600) == "no planned run left"
    assert [duration(s) for s in (0.2, 40, 720, 5760)] == ["under 1 s", "40 s", "12 min",
                                                          "1.6 h"]


def test_past_rows_of_this_machine_only_seed_it():
    class Plugin:
        @staticmethod
        def spec_from_json(text):
            if text == "old":
                raise ValueError("a spec of older code")
            return Spec(*text.split(":")[:1], int(text.split(":")[1]))

    rows = pd.DataFrame({"run_id": ["a", "b", "c"], "spec": ["a:1", "old", "c:1"],
                         "wall_seconds": [10.0, 50.0, 9999.0],
                         "worker_host": [socket.gethostname()] * 2 + ["another-machine"]})
    times = RunTimes.from_rows(rows, Plugin)
    assert len(times) == 2 and times.median() == 30.0
    assert times.total([Spec("b", 7), Spec("x", 1)]) == (60.0, 2)  # b by its own row


def test_a_sweep_without_a_terminal_says_the_time_left_on_each_line(tmp_path, capsys):
    config = tmp_path / "c.toml"
    config.write_text('name = "c"\n[stopping]\nmax_iter = 50\n[[datasets]]\nname = "synthetic"'
                      '\nn = 200\n[[optimizers]]\nname = "gd"\nstep = ["1/L", "diag"]\n'
                      '[[backends]]\nname = "numpy"\n')
    assert main(["run", str(config), "--out", str(tmp_path / "out"), "--no-adaptive"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[")]
    assert len(lines) == 2, lines
    estimate = r"est\. (under 1 s|\d+ s|\d+ min|[\d.]+ h) left"
    assert re.fullmatch(rf"\[1/2\] .*: \w+ \({estimate}\)", lines[0]), lines
    assert lines[1].startswith("[2/2] ") and lines[1].endswith(" (no planned run left)"), lines
