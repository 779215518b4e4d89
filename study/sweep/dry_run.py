"""`study run CONFIG --dry-run`: what the sweep would do, written nowhere.

One line per configuration (its seeds and repeats counted, not listed), the axes every run
shares said once, how many runs are done and why the others would run (the runner's own plan,
recording nothing), and a time estimate for the runs that would run.
"""

from __future__ import annotations

import json
import os
import re
import textwrap

import pandas as pd

from study.sweep import environment
from study.sweep.adaptive import with_held
from study.sweep.folder import ResultsFolder
from study.sweep.grid import Study, configuration
from study.sweep.plugin import load_kind
from study.sweep.run_times import RunTimes, time_budgets

WIDTH = 120  # a line is cut here: a label longer than that is a data path, said in full above
SEED_REPEAT = re.compile(r" seed=\S+ rep=\S+$")


def dry_run(specs, study: Study, out, plan_runs, *, held=False, retry_failed=False,
            keep_stale=False, remeasure_noisy=False) -> None:
    """`plan_runs` is the runner's own planner (handed in: the runner imports this module);
    `held`: with the instances an earlier adaptive loop added, as the run plans them."""
    existing = past_rows(out)
    if held:
        specs = with_held(study, specs, existing)
    if len(specs) > 1000:  # grouping this many takes a moment: say what comes first
        print(f"{len(specs)} runs in {study.name} ({study.source}); listing them:", flush=True)
    plan = plan_runs(study, specs, ResultsFolder(out, load_kind(study.kind).SCHEMA),
                     existing, {environment.fingerprint()}, retry_failed=retry_failed,
                     keep_stale=keep_stale, remeasure_noisy=remeasure_noisy, order_seed=0,
                     record=False)
    to_run = {job.spec.run_id for job in plan.jobs}
    print(configurations(specs, to_run))
    for reason, count in sorted(plan.reasons.items(), key=lambda kv: -kv[1]):
        print(f"  {count} would run: {reason}")
    pending = [spec for spec in specs if spec.run_id in to_run]
    print(wrap(estimate(pending, study, out, existing)) if pending else
          f"nothing to run: all {len(specs)} runs are done in {out}")
    print(f"{len(specs)} runs in {study.name} ({study.source}): {plan.done} done, "
          f"{len(pending)} to run")


def past_rows(out) -> pd.DataFrame:
    """The assembled rows of the results folder, read only (nothing is moved aside)."""
    try:
        rows = pd.read_parquet(os.path.join(out, "runs.parquet"))
    except Exception:  # noqa: BLE001 -- no folder, no table, an unreadable one: nothing done
        rows = pd.DataFrame()
    needed = ["run_id", "status", "code_fingerprint", "env_fingerprint"]  # what the plan reads
    return rows.reindex(columns=[*rows.columns, *(c for c in needed if c not in rows)])


def configurations(specs, to_run: set) -> str:
    groups: dict[str, list] = {}
    for spec in specs:
        groups.setdefault(configuration(spec), []).append(spec)
    shared = shared_axes(specs)
    labels = told_apart([runs[0] for runs in groups.values()],
                        lambda spec: SEED_REPEAT.sub("", spec.label()))
    lines = [wrap(f"every run: {', '.join(f'{k}={v}' for k, v in shared.items())}")] \
        if shared else []
    lines.append(f"{'runs':>5} {'to run':>6}  configuration ({len(groups)})")
    for runs in groups.values():
        waiting = sum(spec.run_id in to_run for spec in runs)
        lines.append(cut(f"{len(runs):>5} {waiting:>6}  {labels[runs[0].run_id]}"))
    return "\n".join(lines)


def shared_axes(specs) -> dict:
    """The axes with one value in every run (seed and repeat aside), short ones only."""
    axes = [spec.axes() for spec in specs]
    keys = [k for k in axes[0] if k not in ("study", "seed", "repeat")] if axes else []
    same = {k: axes[0][k] for k in keys if all(a.get(k) == axes[0][k] for a in axes)}
    return {k: v for k, v in same.items() if v not in (None, "") and len(str(v)) <= 24}


def told_apart(specs, label=lambda spec: spec.label()) -> dict[str, str]:
    """Each spec's run id -> its `label`, and where specs share one, the axes in which they
    differ (short ones first): every axis that tells runs apart, not just the label's."""
    groups: dict[str, list] = {}
    for spec in specs:
        groups.setdefault(label(spec), []).append(spec)
    labels = {}
    for text, group in groups.items():
        axes = [spec.axes() for spec in group] if len(group) > 1 else [{}]
        keys = [k for k in dict.fromkeys(k for a in axes for k in a) if k not in ("seed", "repeat")
                and len({json.dumps(a.get(k), sort_keys=True, default=str) for a in axes}) > 1]
        for spec, mine in zip(group, axes, strict=True):
            short = [k for k in keys if len(str(mine.get(k))) <= 24]
            labels[spec.run_id] = text + (" (" + ", ".join(f"{k}={mine.get(k)}"
                                                            for k in short or keys) + ")"
                                          if keys else "")
    return labels


def wrap(text: str) -> str:
    return textwrap.fill(text, WIDTH, subsequent_indent="  ", break_on_hyphens=False)


def cut(line: str) -> str:
    return line if len(line) <= WIDTH else line[:WIDTH - 1] + "…"


def estimate(specs, study: Study, out, past: pd.DataFrame) -> str:
    """The time of the runs that would run, from this machine's past runs in the folder (or,
    with none, the budgets the config sets)."""
    times = RunTimes.from_rows(past, load_kind(study.kind))
    if not len(times):
        return budgets(specs, study, out)
    total, matched = times.total(specs)
    return (f"time estimate: about {total / 60:.3g} min for {len(specs)} runs, one at a time "
            f"({matched} matched by run or configuration, the rest at the median "
            f"{times.median():.3g} s of this machine's {len(times)} past runs in {out})")


def budgets(specs, study: Study, out) -> str:
    trained = time_budgets(specs)
    bound = len(specs) * study.run_timeout / 60
    lead = (f"at least {trained / 60:.3g} min of time budgets for {len(specs)} runs, plus each "
            "run's start-up; " if trained else f"{len(specs)} runs; ")
    return (f"time estimate: none measured yet (no past runs of this machine in {out}): {lead}"
            f"no run takes more than run_timeout = {study.run_timeout:g} s (at most "
            f"{bound:.3g} min in all)")
