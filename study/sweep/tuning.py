"""Learning rates chosen fairly: the tuning protocol for methods with a free learning rate, shared
by the studies (a spec is any frozen dataclass with the fields `hyperparameters`, `seed`,
`repeat`, `stopping` and `tuning`).

A method block asks for it with `learning_rate = "tuned"` and a `[tuning]` table (`grid`,
`seed`, `stopping`, `criterion`; docs/studies.md). For each configuration every grid rate runs
once on the held-apart seed with the short budget, as ordinary runs of the sweep (`tuning =
"tuning"`: isolated, fingerprinted, resumed). The rate chosen reached the target fastest by the
criterion, else has the lowest final suboptimality; ties go to the smaller rate; a rate that
diverged or failed is never chosen. The measured seeds then run at that rate (`tuning =
"tuned"`); with no usable rate they are recorded skipped.

Iterations are the default criterion because, for one method on one engine, each iteration
costs the same whatever the rate: the fewest iterations is the fastest time without the timer's
noise in a choice made from single short runs.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace

from study.sweep.schema import Column

PARAMETER = "learning_rate"
TUNED = "tuned"  # the value that asks for tuning
KEYS = ("grid", "seed", "stopping", "criterion")
CRITERIA = ("iterations", "seconds")
# ended by a rule, not by failing
USABLE = ("converged", "grad_tol", "stalled", "max_iter", "timeout")
NO_RATE = ("no rate of the tuning grid is usable: every tuning run on the held-apart seed "
           "diverged, failed or was skipped (see the rows with tuning = 'tuning')")


def is_tuned(spec) -> bool:
    return spec.tuning.get("role") == TUNED


def tuning_runs(spec) -> list:
    """The grid's runs a tuned spec waits for (the grid is not part of them, so a grown grid
    reuses them)."""
    if not is_tuned(spec):
        return []
    tuning = spec.tuning
    stopping = {**spec.stopping, **tuning["stopping"]}
    return [replace(spec, hyperparameters={**spec.hyperparameters, PARAMETER: rate},
                    seed=tuning["seed"], repeat=0, stopping=stopping,
                    tuning={"role": "tuning"})
            for rate in tuning["grid"]]


def resolve(spec, rows: dict, runs=tuning_runs, pick=None):
    """The tuned spec at its chosen rate, once every tuning run has a row (else None). Another
    study passes its own grid runs (`runs(spec)`) and choice (`pick(grid, rows)`)."""
    found = [rows.get(run.run_id) for run in runs(spec)]
    if any(row is None for row in found):
        return None
    value = (pick(spec.tuning["grid"], found) if pick is not None else
             choose(spec.tuning["grid"], found, spec.tuning["criterion"]))
    return replace(spec, hyperparameters={**spec.hyperparameters, PARAMETER: value},
                   tuning={**spec.tuning, "value": value})


def choose(rates, rows, criterion: str = "iterations", *, usable_statuses=USABLE,
           reached_status: str = "converged", quality: str = "suboptimality"):
    """The protocol's pick among the grid's rows (one per rate), or None; another study names
    its own statuses and quality (lower is better)."""
    usable = [(rate, row) for rate, row in zip(rates, rows, strict=True)
              if row.get("status") in usable_statuses and finite(row.get(quality))]
    reached = [(rate, row) for rate, row in usable
               if row["status"] == reached_status and not _false(row.get("target_reached"))
               and finite(row.get(criterion))]
    if reached:
        return min(reached, key=lambda p: (p[1][criterion], p[1][quality], p[0]))[0]
    if usable:
        return min(usable, key=lambda p: (p[1][quality], p[0]))[0]
    return None


def tuning_axes(tuning: dict, holdout=None) -> dict:
    """A spec's tuning columns: none for an ordinary run, `tuning` alone for a grid run, the
    protocol's settings and chosen value for a measured tuned run (`holdout()`: what the
    held-apart seed holds apart)."""
    if not tuning:
        return {}
    if tuning["role"] != TUNED:
        return {"tuning": tuning["role"]}
    return {"tuning": TUNED, "tuned_value": tuning.get("value"),
            "tuning_grid": json.dumps(tuning["grid"]), "tuning_seed": tuning["seed"],
            **({"tuning_holdout": holdout()} if holdout is not None else {}),
            "tuning_stopping": json.dumps(tuning["stopping"], sort_keys=True),
            **({"tuning_criterion": tuning["criterion"]} if "criterion" in tuning else {})}


def tuning_columns(criterion: str, holdout: bool = False) -> tuple[Column, ...]:
    """The columns `tuning_axes` writes, declared once for every study's schema."""
    return (
        Column("tuning", "str", "'tuning': a grid run on the held-apart seed (left out of every "
                                "comparison); 'tuned': a measured run at the rate the grid chose"),
        Column("tuned_value", "float", "tuned: the learning rate chosen (also in "
                                       "hyperparameters)"),
        Column("tuning_grid", "str", "tuned: the rates tried, as JSON"),
        Column("tuning_seed", "int", "tuned: the held-apart seed the grid ran on"),
        *([Column("tuning_holdout", "str", "tuned: what the held-apart seed holds apart: "
                  "'instance' (other data) or 'start point only' (the data set ignores the "
                  "seed)")] if holdout else []),
        Column("tuning_stopping", "str", "tuned: the grid runs' short budget over the run's own "
                                         "rules, as JSON"),
        Column("tuning_criterion", "str", f"tuned: {criterion}"),
    )


def measured_runs(runs):
    """The rows a comparison reads: tuning runs (another seed, a short budget) left out."""
    if "tuning" not in runs:
        return runs
    return runs[runs["tuning"].astype(object).ne("tuning")]


def _false(value) -> bool:
    """False, but not missing (a run without a tol rule has no target check)."""
    try:
        return value is not None and not bool(value)
    except TypeError:  # pandas' NA
        return False


def finite(value) -> bool:
    try:
        return value is not None and math.isfinite(float(value))
    except (TypeError, ValueError):
        return False
