"""Adaptive replication: after the planned runs, measure the comparisons the report answers
with until each is decided, or a stated budget is spent.

One loop (`refine`): assemble the rows, derive the answers' comparisons (the plugin's
`refined`), and for each one the confidence sequence leaves undecided (study.sequential) add
`batch` more instances of every configuration it names, cheapest to decide first (the most
verdicts the budget can buy), as ordinary runs; look again. A comparison stops when decided, at
`max_instances`, or when the next batch would end past `time_budget` seconds. An instance is a
new seed where the study varies seeds, else a new repeat. Three kinds of undecided comparison
get no more runs, and say so:
- one measured on a busy machine: more runs would dilute the noisy flag, not remove the load;
- one with a failure (infinite time) by the faster side: more instances cannot remove it;
- one whose verdict is out of reach within `max_instances`, generously projected
  (study.sequential.needed): its runs would spend the budget that decides others.
Why each stopped is written to the folder's adaptive.json, which the report reads.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import replace

from study.output import write_text_atomic
from study.sequential import leans_to_misses, needed, sequential_verdict
from study.sweep.grid import Adaptive, configuration, resolved
from study.sweep.plugin import load_kind

ADAPTIVE_STATE = "adaptive.json"  # in a results folder: why each undecided answer stopped


def settings(study) -> Adaptive:
    return study.adaptive or Adaptive()


def replicate_axis(specs) -> str:
    """'seed' where the grid varies seeds (or its specs have no repeat), else 'repeat'."""
    seeds = {getattr(s, "seed", None) for s in specs}
    return "seed" if len(seeds) > 1 or not all(hasattr(s, "repeat") for s in specs) else \
        "repeat"


def extra_values(specs, count: int) -> list[int]:
    """The smallest replicate values no spec of the grid uses: an added run is never planned."""
    axis = replicate_axis(specs)
    used = {getattr(s, axis) for s in specs}
    out, value = [], 0
    while len(out) < count:
        if value not in used:
            out.append(value)
        value += 1
    return out


def with_candidates(study, runs=None, more: int = 0):
    """The study with the instances the loop may have added as specs of its grid: each spec at
    each extra value some row of `runs` holds, and at the next `more`. Never the whole cap: a
    cap of 2**63 would build candidates for minutes, deaf to Ctrl-C."""
    axis = replicate_axis(study.specs)
    held = set(runs[axis].dropna()) if runs is not None and axis in runs else set()
    values, fresh = [], 0
    for value in extra_values(study.specs, settings(study).max_instances):
        if value in held:
            values.append(value)
        elif fresh < more:
            values.append(value)
            fresh += 1
    listed = {s.run_id for s in study.specs}
    extra = {}  # each configuration's planned replicates give the same added spec: once each
    for spec in study.specs:
        for value in values:
            added = replace(spec, **{axis: value})
            if added.run_id not in listed:
                extra.setdefault(added.run_id, added)
    return replace(study, specs=tuple(study.specs) + tuple(extra.values()))


def with_held(study, specs, runs) -> list:
    """`specs` and the instances an earlier loop added to them that `runs` hold (one that waits
    for others, as it ran: a tuned one under its chosen rate): rows of the tables too, so
    measured again with the rest when they are stale."""
    held = set(runs["run_id"]) if "run_id" in runs else set()
    if not held:
        return list(specs)
    plugin, rows = load_kind(study.kind), {r["run_id"]: r for r in runs.to_dict("records")}

    def ran(spec) -> bool:
        made, _ = resolved(plugin, [spec], rows)
        return spec.run_id in held or bool(made) and made[0].run_id in held

    candidates = with_candidates(replace(study, specs=tuple(specs)), runs).specs
    return [*specs, *(s for s in candidates[len(specs):] if ran(s))]


def answer_comparisons(study, folder, runs) -> list[tuple[str, object]]:
    return [] if runs.empty else load_kind(study.kind).refined(runs, folder.root.name)


def refine(study, folder, plugin, table, measure, *, enabled: bool = True, say=print,
           questions=None) -> dict[str, str]:
    """The loop. `table()` gives the grid's rows; `measure(specs, why)` runs specs as a round of
    the sweep; `questions(study, folder, runs)` the comparisons to decide (default: the
    answers'). Returns (and writes to adaptive.json) why each undecided comparison stopped."""
    questions = questions or answer_comparisons
    cfg = settings(study)
    axis = replicate_axis(study.specs)
    start = time.monotonic()
    stopped: dict[str, str] = {}
    before = -1  # rows before the last batch
    while True:
        looked = time.monotonic()
        runs = table()
        rows = {r["run_id"]: r for r in runs.to_dict("records")}
        grid = with_candidates(study, runs, cfg.batch)  # what ran, and the next batch
        by_config: dict[str, list] = {}
        for spec in grid.specs:
            by_config.setdefault(configuration(spec), []).append(spec)
        base = _base_specs(plugin, grid.specs, rows)

        def have(config, rows=rows, by_config=by_config):  # its replicates that have a row
            ready, _ = resolved(plugin, by_config[config], rows)
            return {getattr(s, axis) for s in ready if s.run_id in rows}

        pending = []
        try:
            found = questions(study, folder, runs)
        except Exception as exc:  # rows the report cannot read yet: the planned design stands
            say(f"{study.name}: no instances added: the answers cannot be derived from these "
                f"rows ({type(exc).__name__}: {exc})")
            found = []
        for id, c in found:
            verdict = sequential_verdict(c, cfg.margin)
            if verdict.decided:
                stopped.pop(id, None)
                continue
            configs = {configuration(base[r]) for r in c.run_ids if r in base}
            counts = [len(have(k)) for k in configs]
            if c.busy:
                stopped[id] = ("measured on a busy machine (more instances would not remove "
                               "the load; `--remeasure-noisy` measures its runs again)")
            elif not all(math.isfinite(u) for u in c.units) and not leans_to_misses(c.units):
                stopped[id] = ("a failure on some instance by the side not found slower (more "
                               "instances cannot remove it)")
            elif not enabled:
                stopped[id] = "the fixed design (--no-adaptive)"
            elif not configs or min(counts) >= cfg.max_instances:
                stopped[id] = f"the cap of {cfg.max_instances} instances per configuration"
            elif (instances := needed(c.units, cfg.margin)) is not None \
                    and instances > cfg.max_instances:
                stopped[id] = (f"out of reach within the cap of {cfg.max_instances} instances "
                               f"(at the ratio and spread seen, even generously projected, a "
                               f"verdict would take {_about(instances)})")
            else:  # the instances still to add: projected, or one batch where too early to tell
                still = cfg.batch if instances is None else max(instances - len(c.units), 1)
                pending.append((id, verdict, configs, still))
        if not pending:
            break
        if len(rows) == before:  # the last batch left no row (not run on this machine)
            for id, *_ in pending:
                stopped[id] = "its added runs could not run here (see above)"
            break
        before = len(rows)
        # the cheapest comparisons first (one costly comparison does not hold back cheap ones),
        # as many as fit the time left (runs' typical wall time, and a look's); the others wait
        walls = _walls(runs, base)
        now = time.monotonic()
        left = cfg.time_budget - (now - start) - (now - looked)

        def next_instances(configs, taken=frozenset(), have=have, by_config=by_config):
            added = []
            for config in sorted(configs - taken):
                done = have(config)
                room = max(min(cfg.batch, cfg.max_instances - len(done)), 0)
                added += [(config, s) for s in sorted(
                    (s for s in by_config[config] if getattr(s, axis) not in done),
                    key=lambda s: getattr(s, axis))[:room]]
            return added

        def cost_of(added, walls=walls):
            return sum(walls.get(c, walls.get(None, 0.0)) for c, _ in added)

        def cost_to_decide(comparison):
            """Its next batch's cost per instance times the instances it still needs."""
            _, _, configs, still = comparison
            added = next_instances(configs)
            return cost_of(added) * len(configs) / max(len(added), 1) * still

        pending.sort(key=cost_to_decide)
        specs, cost, taken, refined, room_left = [], 0.0, set(), [], False
        for id, verdict, configs, still in pending:
            added = next_instances(configs, taken)
            room_left |= bool(added)
            extra = cost_of(added)
            if added and cost + extra > left:
                continue  # does not fit the time left: the next look may fit it
            specs += [s for _, s in added]
            cost += extra
            taken |= configs
            refined.append((id, verdict, configs, still))
        if not specs:
            why = (f"the time budget of the extra runs ({cfg.time_budget:g} s)" if room_left
                   else f"the cap of {cfg.max_instances} instances per configuration")
            for id, *_ in pending:
                stopped[id] = why
            break
        pending = refined
        for id, verdict, configs, _still in pending:
            say(f"{study.name}: refining {id}: {verdict.why_open()}; up to {cfg.batch} more "
                f"instances of its {len(configs)} configuration{'s' * (len(configs) != 1)}")
        measure(specs, f"runs added to decide {len(pending)} comparison"
                       f"{'s' * (len(pending) != 1)}")
    write_text_atomic(json.dumps({"margin": cfg.margin, "max_instances": cfg.max_instances,
                                  "stopped": stopped}, indent=1) + "\n",
                      folder.root / ADAPTIVE_STATE)
    return stopped


def _about(instances: float) -> str:
    return "more than 1000" if math.isinf(instances) else f"about {instances:.0f}"


def _walls(runs, base) -> dict:
    """configuration -> the median wall seconds of its runs so far (None: of every run)."""
    if "wall_seconds" not in runs or runs.empty:
        return {}
    wall = runs[["run_id", "wall_seconds"]].dropna()
    if wall.empty:
        return {}
    config = wall["run_id"].map(lambda r: configuration(base[r]) if r in base else None)
    out = wall.groupby(config.fillna(""))["wall_seconds"].median().to_dict()
    out[None] = float(wall["wall_seconds"].median())
    return out


def _base_specs(plugin, specs, rows) -> dict:
    """run_id of a spec as it runs (a tuned run's: resolved) -> the spec as the grid lists it."""
    out = {}
    for spec in specs:
        ready, _ = resolved(plugin, [spec], rows)
        if ready:
            out[ready[0].run_id] = spec
    return out
