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

import pandas as pd

from optimizers.backends.registry import BACKENDS, FRAMEWORKS
from study.paired import Comparison
from study.sequential import MARGIN, NONE, Verdict, decide

Q1 = "Q1: was NumPy really faster than TensorFlow (and PyTorch, JAX)?"
Q2 = "Q2: was tf.placeholder really faster than tf.constant?"
LOGISTIC = "Logistic regression: which configuration reaches the target first?"

ADAPTIVE_STATE = "adaptive.json"  # in a results folder: why each undecided answer stopped
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
    sequential verdict."""
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


def sequential_verdict(c: Comparison, margin: float = MARGIN) -> Verdict:
    """The confidence sequence's verdict on a comparison: the one the report states and the
    adaptive loop acts on (one source, so adaptive.json and the report never disagree), counted
    as the comparison counts its instances; none where most of its runs were measured on a busy
    machine, whatever the values say."""
    verdict = replace(decide(c.units, margin), shared=c.instances)
    if c.busy:
        verdict = replace(verdict, kind=NONE,
                          reason="measured on a busy machine (`--remeasure-noisy`)")
    return verdict


def _conclusions(results) -> list[Conclusion]:
    study = results.folder.name
    if results.kind == "feedmode":
        return feedmode_conclusions(results.runs, study)
    if results.kind == "train":
        return train_conclusions(results.runs, study)
    from study.regression.logistic import is_logistic

    if is_logistic(results.runs):
        return fastest_conclusions(results.runs, study, LOGISTIC, answer=True)
    from study.regression.labels import original_data

    if not original_data(_measured(results.runs)):  # the user's data: the user's question
        from study.regression.report import own_question

        return regression_conclusions(results.runs, study, own_question(_measured(results.runs)))
    return regression_conclusions(results.runs, study)


def direction(c: Comparison) -> tuple[str, bool]:
    """(claim, firm) of a paired ratio A/B: A took less or more, or not distinguishable; no
    verdict where most of its runs were measured on a busy machine (study.paired)."""
    if c.busy:
        return BUSY, False
    if not c.distinguishable:
        return NOT_DISTINGUISHABLE, False
    return ("more time" if c.ratio > 1 else "less time"), True


def _paired(id: str, question: str, lead: str, c: Comparison, a: str, b: str, quantity: str,
            evidence: str, answer: bool = False) -> Conclusion:
    claim, firm = direction(c)
    return Conclusion(id, question, f"{lead}, {c.phrase(a, b, quantity)}.", c, claim, firm,
                      evidence, answer)


# ---- the regression studies -------------------------------------------------------------------

def _measured(runs: pd.DataFrame) -> pd.DataFrame:
    from study.sweep.tuning import measured_runs

    runs = measured_runs(runs)
    return runs[runs["status"] != "skipped"]


def regression_conclusions(runs: pd.DataFrame, study: str,
                           question: str = Q1) -> list[Conclusion]:
    """Q1 per iteration (the original TF1 program and the compiled loop against NumPy), Q1 to
    the target (each backend's fastest, then each algorithm's), and the fastest configuration
    on each data set. On other data than the original, `question` is the study's own, and the
    answers open with what won on each data set."""
    from study.regression.labels import label_runs
    from study.regression.report import _labelled_summary, framework_title, per_iteration_answers

    runs = _measured(runs)
    if runs.empty:
        return []
    summary = _labelled_summary(runs)
    out = []
    data, pairs = per_iteration_answers(runs)
    for engine, _, _, c in pairs:
        if not c.instances:  # no algorithm ran on both engines
            continue
        original = engine == "tf1/cpu"
        tensorflow = engine.startswith("tf-")
        name = ("the original TF1 program (float32, the frame fed every step)" if original
                else f"TensorFlow's compiled loop ({engine}, float64)" if tensorflow
                else f"{framework_title(engine)}'s fastest engine ({engine}, float64)")
        which = "tf1" if original else "compiled" if tensorflow else engine.split("-")[0]
        out.append(_paired(
            f"q1.per-iteration.{which}", question,
            f"Per iteration on {data}, paired on data, seed and algorithm", c, name,
            "NumPy float64", "time per iteration", f"{study}-per-iteration", answer=True))
    runs = label_runs(runs)  # once, for the many paired comparisons below
    out += to_target_conclusions(runs, summary, study, question)
    if question == Q1:
        return out + fastest_conclusions(runs, study, Q1, summary=summary)
    return fastest_conclusions(runs, study, question, summary=summary, answer=True) + out


def _implementations(part: pd.DataFrame, backend: str) -> pd.DataFrame:
    """A backend's own iterative configurations, fastest first (SciPy's solvers and the closed
    form are references, not NumPy code)."""
    own = part[(part["backend"] == backend) & (part["optimizer"] != "closed-form")
               & ~part["optimizer"].str.startswith("scipy")]
    return own.sort_values(["typical_seconds", "ci_high"], kind="stable")


def to_target_conclusions(runs: pd.DataFrame, summary: pd.DataFrame, study: str,
                          question: str = Q1) -> list[Conclusion]:
    """On the headline's data set: each framework's fastest configuration (TensorFlow, JAX,
    PyTorch) against NumPy's (each named, so what differs is said), then each algorithm
    (optimizer and hyperparameters) that ran on both, against itself: the pairs the headline
    figure shows. An algorithm only NumPy ran (GD's `diag` step) is never set against another."""
    from study.regression.headline import headline_data
    from study.regression.labels import algorithm_label
    from study.regression.report import target_text

    data = headline_data(runs)
    part = summary[summary["data"] == data]
    part = part.assign(algorithm=part.apply(algorithm_label, axis=1) if len(part) else "")
    target = target_text(runs)
    out = []
    groups = {"": part, **{algorithm: part[part["algorithm"] == algorithm]
                           for algorithm in sorted(part["algorithm"].unique())}}
    for algorithm, rows in groups.items():
        numpy = _implementations(rows, "numpy")
        for backend in [b for b in BACKENDS if b != "numpy"]:
            other = _implementations(rows, backend)
            if other.empty or numpy.empty:
                continue
            title = FRAMEWORKS[BACKENDS[backend].framework].title
            suffix = "" if backend == "tensorflow" else f".{backend}"  # ids as before for TF
            id = f"q1.to-target{suffix}{'.' + algorithm if algorithm else ''}"
            lead = f"To {target} on {data}" + (f", {algorithm} on each" if algorithm else "")
            a, b = other.iloc[0]["config"], numpy.iloc[0]["config"]
            names = (f"{title}'s fastest ({a})", f"NumPy's fastest ({b})") if not algorithm \
                else (a, b)
            out.append(_to_target(id, lead, runs, data, a, b, names, f"{study}-q1",
                                  answer=not algorithm, question=question))
    return out


def _to_target(id, lead, runs, data, a, b, names, evidence, answer,
               question: str = Q1) -> Conclusion:
    """Configuration a's time to the target against b's on `data`, paired on instances."""
    from study.regression.report import paired_time

    c = paired_time(runs, a, b, data)
    if c.ratio == 0:  # a reached it where b did not: say it from b's side (no "inf less")
        reverse = paired_time(runs, b, a, data)
        return Conclusion(id, question, f"{lead}, {reverse.phrase(names[1], names[0])}.", c,
                          BUSY if reverse.busy else "less time", reverse.distinguishable,
                          evidence, answer)
    if c.both_failed == c.instances and c.instances:
        return Conclusion(id, question, f"{lead}, neither {names[0]} nor {names[1]} reached "
                          "it.", c, "neither reached", False, evidence, answer)
    return _paired(id, question, lead, c, *names, "time", evidence, answer)


def fastest_conclusions(runs: pd.DataFrame, study: str, question: str, *,
                        summary: pd.DataFrame | None = None,
                        answer: bool = False) -> list[Conclusion]:
    """Per data set, the fastest iterative configuration to the target: the claim is the
    winner, firm when it is distinguishable from the next (or no other reached the target)."""
    from study.regression.report import _labelled_summary, fastest_to_target, target_text

    runs = _measured(runs)
    if runs.empty:
        return []
    summary = _labelled_summary(runs) if summary is None else summary
    target = target_text(runs)
    out = []
    for data, part in summary.groupby("data", sort=True):
        sentence, best, c = fastest_to_target(runs, part, target)
        if not sentence.endswith("."):
            sentence += "."
        firm = best is not None and (c is None or (c.distinguishable and c.ratio < 1))
        claim = BUSY if c is not None and c.busy else best or "none reached the target"
        out.append(Conclusion(f"fastest.{data}", question, sentence, c, claim, firm,
                              f"{study}-time-to-target", answer))
    return out


# ---- the feed-mode study ----------------------------------------------------------------------

def feedmode_conclusions(runs: pd.DataFrame, study: str) -> list[Conclusion]:
    """Q2 at the mode table's N, per dtype: the constant against the placeholder, first call and
    later calls; the answers are float64's (the original question's), else the first dtype's."""
    from study.feedmode.figures import main_size
    from study.feedmode.report import mode_comparison

    n = main_size(runs)
    dtypes = sorted(runs["dtype"].dropna().unique())
    main = "float64" if "float64" in dtypes else (dtypes[0] if dtypes else None)
    out = []
    for dtype in dtypes:
        for value, key, quantity in (("first_call_seconds", "first-call", "first-call time"),
                                     ("steady_median_seconds", "later-calls",
                                      "time per later call")):
            c = mode_comparison(runs, "constant", "placeholder", dtype, n, value)
            if not c.instances:
                continue
            out.append(_paired(f"q2.{key}.{dtype}.n{n}", Q2, f"At N = {n} in {dtype}", c,
                               "tf.constant", "tf.placeholder", quantity, f"{study}-q2",
                               answer=dtype == main))
    return out


# ---- the train study ----------------------------------------------------------------------------

def train_conclusions(runs: pd.DataFrame, study: str) -> list[Conclusion]:
    """Per model and data set, the configuration (optimizer and framework) that reached the
    validation target first, firm when it is distinguishable from the runner-up."""
    from study.train.sweep.report import QUESTION, problem_sentences

    return [Conclusion(f"train.fastest.{problem}", QUESTION, sentence, c,
                       sentence.split(": ", 1)[-1].split(" had the")[0], firm,
                       f"{study}-train", answer=True)
            for problem, sentence, c, firm in problem_sentences(runs)]
