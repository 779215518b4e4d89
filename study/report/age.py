"""How old a report's numbers are: when and at which commit each study's rows were measured, and
which studies' code has changed since (what a re-run would measure again, as the runner judges
it), stated against the code that writes the report.
"""

from __future__ import annotations

from collections import Counter
from functools import cache

import pandas as pd

from study.report.blocks import Block
from study.sweep import environment, fingerprint


def short_commit(commit: str) -> str:
    return commit[:12] + ("+dirty" if commit.endswith("+dirty") else "")


def measured_when(runs: pd.DataFrame) -> str:
    """'on 2026-12-03 at commit ac57e376ee21' from the measured (not skipped) rows."""
    rows = runs[runs["status"] != "skipped"] if "status" in runs else runs
    days = sorted({str(t)[:10] for t in rows.get("started_at", pd.Series()).dropna()})
    commits = sorted({short_commit(str(c)) for c in rows.get("env_git_commit",
                                                               pd.Series()).dropna()})
    when = ("on a date not recorded" if not days else f"on {days[0]}" if len(days) == 1
            else f"from {days[0]} to {days[-1]}")
    at = ("at a commit not recorded" if not commits else
          f"at commit{'s' if len(commits) > 1 else ''} {', '.join(commits)}")
    return f"measured {when} {at}"


def stale_rows(results) -> Counter:
    """Why a re-run would measure rows again -> how many (empty where every row stands)."""
    folder = results.folder / "fingerprints"
    manifest = cache(fingerprint.manifest)  # hashed once per distinct list of files
    reasons: Counter = Counter()
    for text, old in zip(results.runs.get("spec", pd.Series([None] * len(results.runs))),
                         results.runs["code_fingerprint"], strict=True):
        if not isinstance(old, str) or not isinstance(text, str):
            reasons["no code fingerprint or spec recorded"] += 1
            continue
        try:
            now = manifest(tuple(results.plugin.code_files(results.plugin.spec_from_json(text))))
        except Exception as exc:  # noqa: BLE001 -- older code's spec, a file gone: said
            reasons[f"cannot be compared here ({type(exc).__name__})"] += 1
            continue
        if fingerprint.fingerprint_of(now) != old:
            reasons[fingerprint.explain(folder, old, now)] += 1
    return reasons


def changed_line(results) -> str | None:
    """'regression-full: 120 of 587 runs (changed optimizers/gd.py)'; None where none."""
    reasons = stale_rows(results)
    if not reasons:
        return None
    why = "; ".join(f"{reason} ({count})" if len(reasons) > 1 else reason
                    for reason, count in reasons.most_common())
    return (f"{results.folder.name}: {sum(reasons.values())} of {len(results.runs)} runs "
            f"({why})")


def age_blocks(found) -> list[Block]:
    now = short_commit(environment.collect()["env_git_commit"])
    changed = [line for results in found if (line := changed_line(results))]
    return [Block("h2", "How old these results are", anchor="age"),
            Block("list", [f"{r.folder.name}: {len(r.runs)} runs, {measured_when(r.runs)}."
                           for r in found]),
            Block("p", f"Code changed since, against the code that wrote this report (commit "
                       f"{now}): " + (f"in {len(changed)} of {len(found)} studies; a re-run "
                                      "measures these runs again:" if changed else "none.")),
            *([Block("list", changed)] if changed else [])]
