"""Sequential verdicts (study.sequential): error rates that hold over repeated looks, on
synthetic samples (no timing, no sweep), and the verdicts the answers say."""

import math

import numpy as np
import pandas as pd
import pytest

from study.paired import compare
from study.sequential import EQUIVALENT, LESS, MORE, NONE, critical, decide, simulate


def test_the_error_rates_hold_over_repeated_looks():
    """Looked at after 3, 5, 7, 9, 11 and 12 instances: no true difference gives a false
    faster/slower verdict in at most 5% of the runs; a true 1.3x (log ratios spread by 0.2) is
    found in most (77% in 20,000 runs: docs/measurement.md); a true 1.1x is not called
    equivalent within 10% more than 5% of the time. A fixed 95% t interval looked at as often
    gives false verdicts far more often: the reason for the sequence."""
    none = simulate(1.0, 0.2, runs=2000, seed=1)
    assert none[MORE] + none[LESS] <= 0.05
    found = simulate(1.3, 0.2, runs=2000, seed=2)
    assert found[MORE] >= 0.7 and found[LESS] == 0
    assert simulate(1 / 1.3, 0.2, runs=2000, seed=3)[LESS] >= 0.7
    assert simulate(1.1, 0.05, runs=2000, seed=4)[EQUIVALENT] <= 0.05
    assert simulate(1.0, 0.03, runs=2000, seed=5)[EQUIVALENT] >= 0.9  # and it is found

    rng = np.random.default_rng(6)
    values = rng.normal(0, 0.2, (2000, 12))
    from scipy import stats

    naive = np.zeros(2000, bool)
    for n in (3, 5, 7, 9, 11, 12):
        t = values[:, :n].mean(1) / (values[:, :n].std(1, ddof=1) / math.sqrt(n))
        naive |= np.abs(t) > stats.t.ppf(0.975, n - 1)
    assert naive.mean() > 0.1


def test_a_verdict_out_of_reach_is_projected_generously_and_costs_few_verdicts():
    """The loop stops a comparison whose verdict, projected from the instances so far (the mean
    one standard error to the verdict's side), would take more than the cap: it makes no false
    verdict, keeps nearly every verdict the loop would reach (1.3x at spread 0.2: 76.0% against
    77.4% in 20,000 runs, docs/measurement.md) and spends about half the instances where no
    verdict comes (a spread of 0.2 around no difference)."""
    from study.sequential import needed, projected

    assert needed(np.log([0.7, 0.72, 0.71])) is None  # too early to tell
    assert needed(np.log([0.6, 0.7, 0.55, 0.75, 0.62])) <= 12  # within reach
    assert needed([0.1, math.inf, 0.2, 0.1]) is None  # a failure: no projection
    assert 12 < needed(np.log([0.5, 1.6, 0.4, 1.5, 0.6])) < np.inf
    assert projected(0.0, 0.01, 5) < 12  # equivalence in reach
    assert 12 < projected(0.0, 1.0, 5) < np.inf  # a difference, generously, at 63
    for ratio, spread in ((1.0, 0.1), (1.0, 0.2), (1.3, 0.2), (1.1, 0.1)):
        seen = simulate(ratio, spread, runs=2000, seed=7)
        unseen = simulate(ratio, spread, runs=2000, seed=7, futility=False)
        assert seen[MORE] + seen[LESS] <= unseen[MORE] + unseen[LESS] + 0.005
        assert seen[MORE] >= unseen[MORE] - 0.03
    assert simulate(1.0, 0.2, runs=2000, seed=7)["instances"] < 0.6 * simulate(
        1.0, 0.2, runs=2000, seed=7, futility=False)["instances"]


def test_verdicts_name_the_instances_and_why_none():
    faster = decide(np.log([0.7, 0.72, 0.69, 0.71, 0.7]))
    assert faster.kind == LESS and faster.high < 1
    assert faster.text().startswith("faster, decided after 5 instances (anytime-valid 95%")
    same = decide(np.log([1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 1.01]))
    assert same.kind == EQUIVALENT
    assert same.text().startswith("equivalent within ±10% after 7 instances")
    assert decide(np.log([1.3, 1.31, 1.29])).kind == NONE  # three never decide (t* infinite)
    assert np.isinf(critical(3)) and np.isfinite(critical(4))
    failed = decide([0.1, math.inf, 0.2, 0.1])
    assert failed.kind == NONE and "failure" in failed.reason
    capped = decide([0.1, -0.2, 0.3, 0.0, -0.1])
    assert capped.kind == NONE
    assert "no verdict after 5 instances: " in capped.text()


def test_a_comparison_carries_its_units_in_replicate_order():
    """Per seed both sides ran, A's mean log minus B's, ordered by seed as a number (10 after
    2), so that the instances the adaptive loop adds are the last; a failure is infinite."""
    a = pd.DataFrame({"run_id": ["a0", "a1", "a2", "a3"], "data": "x",
                      "seed": [10, 0, 2, 5], "t": [4.0, 2.0, 2.0, np.inf]})
    b = pd.DataFrame({"run_id": ["b0", "b1", "b2"], "data": "x", "seed": [0, 2, 10],
                      "t": [1.0, 1.0, 1.0]})
    c = compare(a, b, ["data"], "t")
    assert c.units == pytest.approx((math.log(2), math.log(2), math.log(4)))
    assert set(c.run_ids) == {"a0", "a1", "a2", "a3", "b0", "b1", "b2"}
    both = compare(a, b.assign(seed=[0, 2, 5]), ["data"], "t")
    assert math.isinf(both.units[-1])


def test_an_answer_ends_with_its_verdict_and_why_it_stopped():
    from study.conclusions import Conclusion, with_verdict

    rng = np.random.default_rng(0)
    a = pd.DataFrame({"run_id": [f"a{i}" for i in range(9)], "seed": range(9),
                      "t": 1.3 * np.exp(rng.normal(0, 0.02, 9))})
    b = a.assign(run_id=[f"b{i}" for i in range(9)], t=1.0)
    decided = Conclusion("q", "Q?", "A took 1.3x the time of B.",
                         compare(a, b, ["seed"], "t"), "more time", True, "e", answer=True)
    said = with_verdict(decided)
    assert said.verdict.kind == MORE
    assert said.sentence.endswith("Verdict: slower, decided after 9 instances (anytime-valid "
                                  f"95% interval {said.verdict.bounds()}).")
    few = replace_comparison(decided, compare(a[:3], b[:3], ["seed"], "t"))
    stopped = with_verdict(few, stopped={"q": "the time budget of the extra runs (30 s)"})
    assert "Verdict: no verdict after 3 instances: the time budget of the extra runs (30 s)." \
        in stopped.sentence
    assert with_verdict(few).verdict.reason == "the planned design"
    assert with_verdict(replace_comparison(decided, None)).verdict is None


def replace_comparison(conclusion, comparison):
    from dataclasses import replace

    return replace(conclusion, comparison=comparison)


def test_neither_reaching_the_target_is_no_verdict_not_equivalence():
    """Both sides failed on every instance: ties for the fixed design, but no time to compare
    for the sequence (it once read as 'equivalent within 10%')."""
    a = pd.DataFrame({"run_id": [f"a{i}" for i in range(5)], "seed": range(5), "t": np.inf})
    c = compare(a, a.assign(run_id=[f"b{i}" for i in range(5)]), [], "t")
    verdict = decide(c.units)
    assert verdict.kind == NONE and "failure" in verdict.reason
