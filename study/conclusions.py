"""The conclusions a report states, as data, derived from the results tables in one place.

Each conclusion has an id that names the same question in any results folder of the study, a
sentence, the paired comparison behind it (study.paired), what it claims and whether an interval
backs the claim, and the report anchor of its evidence. The report opens with the ones marked
`answer`; `study compare` derives them in two folders and says which held.
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
    """The study plugin's conclusions of one results folder, each answer with its sequential
    verdict."""
    state = stop_reasons(results.folder)
    return [with_verdict(c, state.get("margin", MARGIN), state.get("stopped", {}))
            for c in results.plugin.conclusions(results.runs, results.folder.name)]


def stop_reasons(folder) -> dict:
    """The folder's adaptive.json (study.sweep.adaptive): why each undecided answer stopped."""
    try:
        found = json.loads((Path(folder) / ADAPTIVE_STATE).read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def with_verdict(c: Conclusion, margin: float = MARGIN, stopped: dict | None = None
                 ) -> Conclusion:
    """An answer with the confidence sequence's verdict said at the end of its sentence, with
    why it stopped there (`stopped`: the instance cap, the time budget, ...)."""
    if not c.answer or c.comparison is None:
        return c
    verdict = sequential_verdict(c.comparison, margin)
    why = (stopped or {}).get(c.id)
    if not verdict.decided and not c.comparison.busy:
        verdict = replace(verdict, reason=why or verdict.reason or "the planned design")
    return replace(c, sentence=f"{c.sentence} Verdict: {verdict.text()}.", verdict=verdict)


def direction(c: Comparison) -> tuple[str, bool]:
    """(claim, firm) of a paired ratio A/B: less or more time, not distinguishable, or busy."""
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
