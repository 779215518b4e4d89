"""The conclusions a report states, as data, derived from the results tables in one place.

Each conclusion has an id that names the same question in any results folder of the study, a
sentence in the paired wording ("not distinguishable" where the interval holds 1), the paired
comparison behind it (ratio and interval, from study.paired), what it claims (a direction or a
winner) and whether an interval backs the claim, and the report anchor of its evidence. The
report opens with the ones marked `answer`; `study compare` derives them in two folders and says
which held.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from study.paired import Comparison
from study.sequential import MARGIN, Verdict, sequential_verdict
from study.sweep.adaptive import ADAPTIVE_STATE

NOT_DISTINGUISHABLE = "not distinguishable"
BUSY = "measured on a busy machine"


@dataclass(frozen=True)
class Conclusion:
    id: str
    question: str  # what it answers (the answers block's heading for it)
    sentence: str
    comparison: Comparison | None
    claim: str  # what it asserts: A took "less time" or "more time" than B, or a winner
    firm: bool  # an interval excluding 1 (or every rival failing) backs the claim
    evidence: str  # anchor of the report section that holds the evidence
    answer: bool = False  # one of the answers the report opens with
    # an answer's sequential verdict (study.sequential): valid however many instances the
    # adaptive loop added; its sentence ends with it. claim and firm stay the fixed design's
    verdict: Verdict | None = None


def conclusions(results) -> list[Conclusion]:
    """The conclusions of one results folder (study.results.Results), each answer with its
    sequential verdict. The study's plugin derives them (its `conclusions` hook)."""
    state = stop_reasons(results.folder)
    return [with_verdict(c, state.get("margin", MARGIN), state.get("stopped", {}))
            for c in _conclusions(results)]


def stop_reasons(folder) -> dict:
    """The folder's adaptive.json (study.sweep.adaptive writes it): margin, max_instances and
    why each undecided answer stopped; {} where there is none (a sweep from before it)."""
    try:
        found = json.loads((Path(folder) / ADAPTIVE_STATE).read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def with_verdict(c: Conclusion, margin: float = MARGIN, stopped: dict | None = None
                 ) -> Conclusion:
    """An answer with a comparison, with the confidence sequence's verdict on it, said at the
    end of its sentence with the instances it took and why it stopped there (`stopped`, from
    the runner's adaptive.json: the instance cap, the time budget, ...; else the planned
    design)."""
    if not c.answer or c.comparison is None:
        return c
    verdict = sequential_verdict(c.comparison, margin)
    why = (stopped or {}).get(c.id)
    if not verdict.decided and not c.comparison.busy:
        verdict = replace(verdict, reason=why or verdict.reason or "the planned design")
    return replace(c, sentence=f"{c.sentence} Verdict: {verdict.text()}.", verdict=verdict)


def _conclusions(results) -> list[Conclusion]:
    """The study's own (its plugin's `conclusions`)."""
    return results.plugin.conclusions(results.runs, results.folder.name)


def direction(c: Comparison) -> tuple[str, bool]:
    """(claim, firm) of a paired ratio A/B: A took less or more, or not distinguishable; no
    verdict where most of its runs were measured on a busy machine (study.paired)."""
    if c.busy:
        return BUSY, False
    if not c.distinguishable:
        return NOT_DISTINGUISHABLE, False
    return ("more time" if c.ratio > 1 else "less time"), True


def paired(id: str, question: str, lead: str, c: Comparison, a: str, b: str, quantity: str,
            evidence: str, answer: bool = False) -> Conclusion:
    claim, firm = direction(c)
    return Conclusion(id, question, f"{lead}, {c.phrase(a, b, quantity)}.", c, claim, firm,
                      evidence, answer)
