"""The regression study's conclusions (Q1 per iteration and to the target, the fastest
configuration per data set; logistic data: the fastest only), derived from its rows for the
report's answers, `compare` and the adaptive loop (study.conclusions states them)."""

from __future__ import annotations

import pandas as pd

from study.conclusions import BUSY, Conclusion, paired
from study.frameworks.registry import BACKENDS, FRAMEWORKS
from study.regression.labels import (
    algorithm_label,
    headline_data,
    is_logistic,
    label_runs,
    original_data,
)
from study.regression.report import (
    _labelled_summary,
    fastest_to_target,
    framework_title,
    own_question,
    paired_time,
    per_iteration_answers,
    target_text,
)
from study.sweep.tuning import measured_runs

Q1 = "Q1: was NumPy really faster than TensorFlow (and PyTorch, JAX)?"
LOGISTIC = "Logistic regression: which configuration reaches the target first?"


def study_conclusions(runs: pd.DataFrame, study: str) -> list[Conclusion]:
    """Logistic data: the fastest configuration per data set; the original data: Q1; the user's
    data: the user's question."""

    if is_logistic(runs):
        return fastest_conclusions(runs, study, LOGISTIC, answer=True)
    measured = _measured(runs)
    return regression_conclusions(runs, study, Q1 if original_data(measured) else
                                  own_question(measured))


def _measured(runs: pd.DataFrame) -> pd.DataFrame:
    runs = measured_runs(runs)
    return runs[runs["status"] != "skipped"]


def regression_conclusions(runs: pd.DataFrame, study: str,
                           question: str = Q1) -> list[Conclusion]:
    """Q1 per iteration (the original TF1 program and the compiled loop against NumPy), Q1 to
    the target (each backend's fastest, then each algorithm's), and the fastest configuration
    on each data set. On other data than the original, `question` is the study's own, and the
    answers open with what won on each data set."""

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
        out.append(paired(
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

    c = paired_time(runs, a, b, data)
    if c.ratio == 0:  # a reached it where b did not: say it from b's side (no "inf less")
        reverse = paired_time(runs, b, a, data)
        return Conclusion(id, question, f"{lead}, {reverse.phrase(names[1], names[0])}.", c,
                          BUSY if reverse.busy else "less time", reverse.distinguishable,
                          evidence, answer)
    if c.both_failed == c.instances and c.instances:
        return Conclusion(id, question, f"{lead}, neither {names[0]} nor {names[1]} reached "
                          "it.", c, "neither reached", False, evidence, answer)
    return paired(id, question, lead, c, *names, "time", evidence, answer)


def fastest_conclusions(runs: pd.DataFrame, study: str, question: str, *,
                        summary: pd.DataFrame | None = None,
                        answer: bool = False) -> list[Conclusion]:
    """Per data set, the fastest iterative configuration to the target: the claim is the
    winner, firm when it is distinguishable from the next (or no other reached the target)."""

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
