"""Paired comparisons: ratios on common instances, intervals valid at small sizes, and wording
that never calls a difference inside the noise 'faster'."""

import numpy as np
import pandas as pd
import pytest

from study.paired import common_instances, compare, interval, t_quantile
from study.regression.summary import summarize

INSTANCE = ["seed"]


def runs(values: dict[int, list[float]]) -> pd.DataFrame:
    return pd.DataFrame([{"seed": seed, "t": v} for seed, vs in values.items() for v in vs])


def test_only_common_instances_are_compared():
    # Pooled medians would say A is 5x slower (10 over 2); on the one shared draw A is 2x faster.
    a = runs({0: [1.0, 1.0], 1: [10.0, 10.0], 2: [10.0, 10.0]})
    b = runs({0: [2.0, 2.0]})
    c = compare(a, b, INSTANCE, "t")
    assert c.ratio == 0.5 and c.instances == 1 and c.only_a == 2 and c.only_b == 0
    assert "2 not shared, left out" in c.phrase("A", "B")


def test_a_clear_difference_has_a_ci_excluding_one():
    rng = np.random.default_rng(1)
    b = runs({s: list(1 + 0.02 * rng.standard_normal(3)) for s in range(5)})
    a = runs({s: list(2 + 0.04 * rng.standard_normal(3)) for s in range(5)})
    c = compare(a, b, INSTANCE, "t")
    assert c.distinguishable and 1.9 < c.low <= c.ratio <= c.high < 2.1
    assert c.phrase("A", "B").startswith(f"A took {c.ratio:.3g}x the time of B")
    faster = compare(b, a, INSTANCE, "t")
    assert faster.high < 1 and "less" in faster.phrase("B", "A")


def test_overlapping_noise_is_not_distinguishable():
    a = runs({0: [1.0, 1.3, 0.8], 1: [1.1, 0.9, 1.2]})
    b = runs({0: [1.2, 0.9, 1.0], 1: [1.0, 1.25, 0.85]})
    c = compare(a, b, INSTANCE, "t")
    assert c.low < 1 < c.high and not c.distinguishable
    text = c.phrase("A", "B")
    assert "not distinguishable" in text and "less" not in text and "took" not in text


def test_failures_count_as_infinite_time_and_both_failing_is_a_tie():
    a = runs({0: [np.inf, np.inf], 1: [np.inf, np.inf], 2: [np.inf, np.inf]})
    b = runs({0: [1.0, 1.1], 1: [1.0, 0.9], 2: [np.inf, np.inf]})
    c = compare(a, b, INSTANCE, "t")
    assert np.isinf(c.ratio) and c.both_failed == 1 and "did not finish" in c.phrase("A", "B")
    both = compare(a, a, INSTANCE, "t")
    assert both.ratio == 1 and both.both_failed == 3 and not both.distinguishable


def test_a_zero_or_missing_time_is_no_measurement_not_a_failure():
    """A run timed 0 s to a target it met (the old setup rule) or without a time is left out:
    it was read as a failure (log 0), so the other side was "not reached" (issue 43)."""
    from study.paired import typical

    zero = runs({0: [0.0], 1: [0.0], 2: [np.nan]})
    b = runs({0: [1.0], 1: [1.1], 2: [0.9]})
    for c in (compare(b, zero, INSTANCE, "t"), compare(zero, b, INSTANCE, "t")):
        assert c.instances == 0 and np.isnan(c.ratio)
        assert "did not finish" not in c.phrase("A", "B") and "fail" not in c.method
    mixed = compare(runs({0: [2.0, 0.0], 1: [2.2], 2: [1.8]}), b, INSTANCE, "t")
    assert mixed.instances == 3 and np.isfinite(mixed.ratio) and mixed.ratio == pytest.approx(2)
    assert "failure" not in mixed.method
    assert np.isnan(typical(zero, INSTANCE, "t").value)
    assert np.isinf(typical(runs({0: [np.inf]}), INSTANCE, "t").value)  # a failure stays one


def test_one_measurement_a_side_is_never_a_verdict():
    c = compare(runs({0: [1.0]}), runs({0: [3.0]}), INSTANCE, "t")
    assert c.measurements == 1 and not c.distinguishable and not c.has_interval
    assert "too few for an interval" in c.phrase("A", "B")
    two = compare(runs({0: [1.0], 1: [1.1]}), runs({0: [3.0], 1: [3.2]}), INSTANCE, "t")
    assert not two.has_interval  # two instances without repeats: no spread to judge by


def test_a_failure_needs_six_instances_for_an_interval_of_the_median():
    b = runs({s: [1.0 + 0.01 * s] for s in range(6)})
    five = compare(runs({0: [np.inf], **{s: [2.0] for s in range(1, 5)}}), b.iloc[:5],
                   INSTANCE, "t")
    assert not five.has_interval and "needs 6" in five.method
    six = compare(runs({0: [np.inf], **{s: [2.0 + 0.01 * s] for s in range(1, 6)}}), b,
                  INSTANCE, "t")
    assert six.has_interval and "order statistics" in six.method
    assert six.low > 1 and np.isinf(six.high) and six.distinguishable


@pytest.mark.slow
@pytest.mark.parametrize("instances, repeats", [(3, 1), (5, 1), (3, 3), (2, 3), (1, 4)])
def test_the_interval_covers_the_true_ratio_95_percent_of_the_time(instances, repeats):
    """Simulated timings: each instance has its own log-normal cost (shared by A and B up to an
    instance-specific ratio), and every run has its own log-normal noise. The 95% interval must
    cover the true typical ratio about 95% of the time at the sizes the studies have (the
    percentile bootstrap of a median over three instances covered far less). With 2000 trials
    the binomial standard error is 0.5%: 93% to 97% is about four of them either way."""
    rng = np.random.default_rng(42)
    true_ratio, covered, trials = 1.7, 0, 2000
    for _ in range(trials):
        cost = rng.lognormal(0.0, 1.0, instances)
        ratio = true_ratio * rng.lognormal(0.0, 0.15, instances)
        if instances < 3:  # with fewer instances the interval is about these instances only
            ratio = np.full(instances, true_ratio)
        c = interval([[cost[k] * ratio[k] * rng.lognormal(0, 0.2, repeats),
                       cost[k] * rng.lognormal(0, 0.2, repeats)] for k in range(instances)])
        covered += c.low <= true_ratio <= c.high
    assert 0.93 <= covered / trials <= 0.97, covered / trials


@pytest.mark.parametrize("df", [1, 2, 2.5, 7, 30, 1e6, np.inf])
def test_the_t_quantile_is_scipy_stats_own(df):
    from scipy import stats  # the reference the interval used to call

    for level in (0.8, 0.9, 0.95, 0.99):
        assert t_quantile(0.5 + level / 2, df) == stats.t.ppf(0.5 + level / 2, df)


def test_no_common_instance():
    c = compare(runs({0: [1.0]}), runs({1: [1.0]}), INSTANCE, "t")
    assert c.instances == 0 and "not compared" in c.phrase("A", "B")


def test_common_instances_keeps_the_draws_every_configuration_ran():
    table = pd.concat([runs({0: [1.0], 1: [1.0]}).assign(cfg="a"),
                       runs({0: [2.0], 1: [2.0], 2: [2.0]}).assign(cfg="b")])
    assert set(common_instances(table, ["cfg"], INSTANCE)["seed"]) == {0, 1}


def test_the_summary_compares_each_configuration_with_the_fastest_on_shared_draws():
    def rows(optimizer, times):
        return [{"dataset": "eve", "dataset_params": "{}", "optimizer": optimizer,
                 "hyperparameters": "{}", "backend": "numpy", "device": "cpu", "dtype": "float64",
                 "init": "zeros", "seed": seed, "status": "converged", "seconds": t,
                 "setup_seconds": 0.0, "iterations": 10, "seconds_per_iteration": t / 10}
                for seed, t in times]
    # gd ran seeds 0-2 (slow on the extra draws); lbfgs only seed 0, where it is 3x slower.
    table = summarize(pd.DataFrame(rows("gd", [(0, 1.0), (1, 9.0), (2, 9.0)])
                                   + rows("lbfgs", [(0, 3.0)])))
    by = table.set_index("optimizer")
    assert by.loc["lbfgs", "vs_best_text"] == "fastest"  # lowest median, 3 s against 9 s
    assert by.loc["gd", "vs_best"] == 1 / 3 and by.loc["gd", "vs_best_instances"] == 1
    assert by.loc["gd", "instances"] == 3


@pytest.mark.slow
def test_the_default_study_runs_every_configuration_of_a_data_set_on_the_same_draws():
    from pathlib import Path

    from study.sweep.grid import load_study

    root = Path(__file__).resolve().parent.parent
    for name in ("regression.toml", "regression-full.toml", "regression-cluster.toml"):
        specs = load_study(root / "configs" / name).specs
        draws: dict = {}
        for spec in specs:
            if spec.tuning.get("role") == "tuning":  # a learning rate's grid: held apart
                continue
            data, config = spec.instance()[:2], (spec.optimizer, str(spec.hyperparameters),
                                                 spec.backend, str(spec.backend_options),
                                                 spec.dtype)
            draws.setdefault(data, {}).setdefault(config, set()).add(spec.instance()[2:])
        for data, per_config in draws.items():
            assert len({frozenset(d) for d in per_config.values()}) == 1, (name, data)


def test_a_missing_instance_value_is_one_instance_however_it_is_missing():
    """None, NaN and pd.NA in an instance column are one instance, as a groupby with
    dropna=False made them (the grouping is a plain loop now: study.paired._positions), and
    values that do not sort beside them keep their order."""
    from study.paired import typical

    a = pd.DataFrame({"seed": [None, np.nan, pd.NA, 1], "t": [1.0, 1.0, 1.0, 2.0]},
                     dtype=object).astype({"t": float})
    b = pd.DataFrame({"seed": [np.nan, 1], "t": [2.0, 4.0]}, dtype=object).astype({"t": float})
    c = compare(a, b, INSTANCE, "t")
    assert c.instances == 2 and c.only_a == 0 and c.ratio == pytest.approx(0.5)
    assert typical(a, INSTANCE, "t").value == pytest.approx(2**0.5)


@pytest.mark.parametrize("level", [0.8, 0.95, 0.999])
def test_a_median_interval_takes_the_order_statistics_scipy_stats_gives(level):
    from scipy import stats

    from study.paired import _median_bounds

    for k in range(1, 1000):
        # the CDF grows with j: the first j it exceeds the tail at is one past those it does not
        j = 1 + int((stats.binom.cdf(np.arange(1, k + 1), k, 0.5) <= (1 - level) / 2).sum())
        values = np.arange(k, dtype=float)
        assert _median_bounds(values, level) == (values[j - 1], values[k - j]), k
