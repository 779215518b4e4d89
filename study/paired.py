"""Paired comparisons: two configurations compared only on the instances both ran.

An instance is what a comparison must hold fixed (the data set, its seed, the starting point);
repeats are measurements of one instance. The ratio A/B is taken per instance (median over each
side's repeats), then summarised by the median over instances, with a percentile bootstrap CI
that resamples instances and, within each, both sides' repeats. A failure counts as infinite
time, so a method that fails cannot look fast; where both sides failed the instance is a tie.
Where the CI contains 1 the two are "not distinguishable", and nothing is said to be faster.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

LEVEL = 0.95
RESAMPLES = 2000


@dataclass(frozen=True)
class Comparison:
    ratio: float  # median over common instances of A/B
    low: float
    high: float
    instances: int  # instances both sides ran
    only_a: int  # instances only A ran (left out of the comparison)
    only_b: int
    both_failed: int  # instances where neither reached the target (counted as ties)
    measurements: int = 0  # the smaller side's count of measurements on the common instances

    @property
    def distinguishable(self) -> bool:
        """The CI excludes 1; one measurement a side has no spread, so it never is."""
        return self.instances > 0 and self.measurements > 1 and (self.low > 1 or self.high < 1)

    def ci(self) -> str:
        return f"[{_times(self.low)}, {_times(self.high)}]"

    def phrase(self, a: str, b: str, quantity: str = "time") -> str:
        """'A took 2.3x the time of B [1.9x, 2.8x] (3 instances)', or 'not distinguishable'."""
        if self.instances == 0:
            return f"{a} and {b} share no instance: not compared"
        where = f"{self.instances} common instance{'s' * (self.instances != 1)}"
        if self.only_a or self.only_b:
            where += f"; {self.only_a + self.only_b} not shared, left out"
        if self.measurements == 1:
            return (f"{a} over {b}: {quantity} ratio {_times(self.ratio)} from a single "
                    "measurement each, no confidence interval (run repeats to compare)")
        if np.isinf(self.ratio):
            return (f"{a} did not finish where {b} did on most of the {where} "
                    f"(95% CI of the ratio {self.ci()})")
        if not self.distinguishable:
            return (f"{a} and {b}: not distinguishable ({quantity} ratio {_times(self.ratio)}, "
                    f"95% CI {self.ci()}, {where})")
        if self.ratio > 1:
            return f"{a} took {_times(self.ratio)} the {quantity} of {b} ({self.ci()}, {where})"
        return (f"{a} took {_times(self.ratio)} the {quantity} of {b}, i.e. "
                f"{_times(1 / self.ratio)} less ({self.ci()}, {where})")


def _times(x: float) -> str:
    if np.isinf(x):
        return "inf"
    if x == 0:
        return "0x"
    return f"{x:.3g}x"


def _ratio(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A/B elementwise, with failure/failure a tie (1), x/failure 0 and failure/x infinite."""
    with np.errstate(divide="ignore", invalid="ignore"):
        r = a / b
    return np.where(np.isinf(a) & np.isinf(b), 1.0, r)


def _bootstrap_medians(values: np.ndarray, rng, resamples: int) -> np.ndarray:
    picks = values[rng.integers(0, values.size, size=(resamples, values.size))]
    return np.median(picks, axis=1)


def compare(a: pd.DataFrame, b: pd.DataFrame, instance: list[str], value: str, *,
            level: float = LEVEL, resamples: int = RESAMPLES, seed: int = 0) -> Comparison:
    """Paired ratio of `value` (A over B) on the instances (rows' `instance` columns) both ran;
    instance columns a table lacks hold nothing apart."""
    instance = [c for c in instance if c in a.columns and c in b.columns]
    if not instance:
        a, b, instance = a.assign(_instance=0), b.assign(_instance=0), ["_instance"]
    a_groups = {k: g[value].to_numpy(float) for k, g in a.groupby(instance, dropna=False)}
    b_groups = {k: g[value].to_numpy(float) for k, g in b.groupby(instance, dropna=False)}
    common = [k for k in a_groups if k in b_groups]
    only_a, only_b = len(a_groups) - len(common), len(b_groups) - len(common)
    if not common:
        return Comparison(np.nan, np.nan, np.nan, 0, only_a, only_b, 0)
    a_med = np.array([np.median(a_groups[k]) for k in common])
    b_med = np.array([np.median(b_groups[k]) for k in common])
    per_instance = _ratio(a_med, b_med)
    rng = np.random.default_rng(seed)
    resampled = np.column_stack([
        _ratio(_bootstrap_medians(a_groups[k], rng, resamples),
               _bootstrap_medians(b_groups[k], rng, resamples)) for k in common])
    pick = rng.integers(0, len(common), size=(resamples, len(common)))
    medians = np.median(np.take_along_axis(resampled, pick, axis=1), axis=1)
    alpha = (1 - level) / 2
    low, high = np.quantile(medians, [alpha, 1 - alpha], method="inverted_cdf")
    measurements = min(sum(a_groups[k].size for k in common),
                       sum(b_groups[k].size for k in common))
    return Comparison(float(np.median(per_instance)), float(low), float(high), len(common),
                      only_a, only_b, int((np.isinf(a_med) & np.isinf(b_med)).sum()),
                      measurements)


def common_instances(runs: pd.DataFrame, config: list[str], instance: list[str]) -> pd.DataFrame:
    """The rows on instances every configuration in `runs` ran: the set a table or figure of
    medians may compare side by side."""
    if runs.empty:
        return runs
    keys = runs[instance].map(str).agg("|".join, axis=1)
    configs = runs[config].map(str).agg("|".join, axis=1)
    per_config = keys.groupby(configs).agg(set)
    shared = set.intersection(*per_config)
    return runs[keys.isin(shared)]
