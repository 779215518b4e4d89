"""The runs a measured train run waits for, and how their rows set it: the learning-rate tuning
protocol (study.sweep.tuning, unchanged) and the target-setting round, as AlgoPerf sets targets.

Target-setting round (`target = {metric, set = "round", margin, seed, stopping}`): every
optimizer configuration of the study runs once on the held-apart seed with the long budget and
no target, at the problem's batch size, on the problem's own first framework (what a model can
reach does not depend on the framework that trains it); the target is the best validation value
any of them reached, relaxed by the margin (best * (1 + margin) for a metric that falls,
best * (1 - margin) for one that rises).

Tuning runs have no target (rates are compared on what they reach in the short budget), so
neither round waits for the other and the engine's two rounds suffice.
"""

from __future__ import annotations

import math
from dataclasses import replace

from study.sweep import tuning as protocol
from study.train.sweep.spec import Spec

USABLE = ("completed", "timeout", "reached")


def no_target(target: dict, how: str) -> dict:
    return {"metric": target["metric"], "mode": target["mode"], "value": None, "how": how}


def tuning_runs(spec: Spec) -> list[Spec]:
    return [replace(run, target=no_target(spec.target, "tuning"))
            for run in protocol.tuning_runs(spec)]


def target_runs(spec: Spec) -> list[Spec]:
    """The round's runs (none for a given target, and none for the round's own runs)."""
    target = spec.target
    if target.get("how") != "round":
        return []
    return [replace(spec, optimizer=optimizer, hyperparameters=dict(hyperparameters),
                    backend=target["backend"], device=target.get("device", "cpu"),
                    seed=target["seed"], repeat=0,
                    stopping=dict(target["stopping"]), tuning={},
                    target=no_target(target, "setting"),
                    batch_size=0 if optimizer == "lbfgs" else target["batch_size"])
            for optimizer, hyperparameters in target["configurations"]]


def prerequisites(spec: Spec) -> list[Spec]:
    return [*tuning_runs(spec), *target_runs(spec)]


def score(row: dict) -> float:
    """The best validation value of a run, lower is better (a rising metric negated)."""
    value = row.get("best_value")
    if value is None or not math.isfinite(float(value)):
        return math.nan
    return float(value) if row.get("target_mode") != "max" else -float(value)


def pick_rate(grid, rows):
    scored = [{**row, "score": score(row)} for row in rows]
    return protocol.choose(grid, scored, "steps", usable_statuses=USABLE,
                           reached_status="reached", quality="score")


def set_target(spec: Spec, rows: dict) -> Spec | None:
    runs = target_runs(spec)
    if not runs:
        return spec
    found = [rows.get(run.run_id) for run in runs]
    if any(row is None for row in found):
        return None
    best = [row["best_value"] for row in found
            if row.get("status") in USABLE and math.isfinite(score(row))]
    if not best:
        return replace(spec, target={**spec.target, "value": None})
    margin = spec.target["margin"]
    if spec.target["mode"] == "min":
        value = min(best) * (1 + margin)
    else:
        value = max(best) * (1 - margin)
    return replace(spec, target={**spec.target, "value": value, "best": min(best) if
                                 spec.target["mode"] == "min" else max(best)})


def resolve(spec: Spec, rows: dict) -> Spec | None:
    """The spec with its target set and its rate chosen, or None while a row is missing."""
    targeted = set_target(spec, rows)
    if targeted is None:
        return None
    if not protocol.is_tuned(spec):
        return targeted
    tuned = protocol.resolve(spec, rows, runs=tuning_runs, pick=pick_rate)
    return None if tuned is None else replace(tuned, target=targeted.target)
