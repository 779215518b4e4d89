"""Typical values and paired comparisons, with intervals valid at the sizes the studies have.

An instance is what a comparison must hold fixed (the data set, its seed, the starting point);
repeats are measurements of one instance. Timings are compared on the log scale, where noise
is multiplicative and roughly symmetric: per instance, the mean of the log times of its
repeats (A's minus B's for a ratio A/B); then, over instances:

- every instance finite, at least MIN_INSTANCES of them: the mean over instances with a
  Student t interval (K - 1 degrees of freedom), back on the ratio scale (a geometric mean).
  The spread of the per-instance values holds both the instances' differences and every
  measurement's noise, so the interval says what another draw of instances and measurements
  would give, not just how these happened to fall;
- fewer instances, but repeats: the same mean with a Welch t interval from the repeats'
  spread (an interval for these instances only, and it says so);
- a failure (infinite time) on some instance: the median over instances, with the
  distribution-free interval of a median (order statistics), from MIN_ORDER instances on;
- otherwise: no interval, and no verdict.

(A percentile bootstrap over three instances has ten distinct resamples: its "95%" interval is
the range of three values.) A failure counts as infinite time, so a method that fails cannot
look fast; where both sides failed the instance is a tie. Where the interval contains 1 the two
are "not distinguishable". A time that is zero, negative or missing is no measurement (not a
failure): it is left out, and an instance left with none is not shared.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import special

LEVEL = 0.95
MIN_INSTANCES = 3  # a t interval over instances: at least 2 degrees of freedom
MIN_ORDER = 6  # the smallest count whose order statistics cover a median with >= 95%


@dataclass(frozen=True)
class Interval:
    """A typical value (geometric mean, or median where some instance failed) and its interval
    (NaN bounds: none could be made), with how it was made."""

    value: float
    low: float
    high: float
    method: str


@dataclass(frozen=True)
class Comparison:
    ratio: float  # typical A/B over the common instances (see the module docstring)
    low: float
    high: float
    instances: int  # instances both sides ran
    only_a: int  # instances only A ran (left out of the comparison)
    only_b: int
    both_failed: int  # instances where neither reached the target (counted as ties)
    measurements: int = 0  # the smaller side's count of measurements on the common instances
    method: str = ""  # how the interval was made, or why there is none
    noisy: int = 0  # measurements on the common instances (both sides) flagged noisy
    measured: int = 0  # measurements on the common instances, both sides
    # the sequential verdict's values (study.sequential): per replicate of each common instance
    # (a seed or repeat both sides ran), A's mean log value minus B's, in replicate order
    units: tuple = ()
    run_ids: tuple = ()  # the rows of both sides: the configurations the comparison names

    @property
    def busy(self) -> bool:
        """Most of its measurements were flagged noisy: the ratio says more about the other load
        than about A and B, so it gives no verdict."""
        return self.measured > 0 and 2 * self.noisy > self.measured

    @property
    def has_interval(self) -> bool:
        return not (math.isnan(self.low) or math.isnan(self.high))

    @property
    def distinguishable(self) -> bool:
        """The interval excludes 1; without an interval, or measured on a busy machine, never."""
        return self.instances > 0 and self.has_interval and not self.busy and (
            self.low > 1 or self.high < 1)

    def ci(self) -> str:
        return f"[{times(self.low)}, {times(self.high)}]"

    def cell(self) -> str:
        """The comparison in a table cell, with the verdict the report's sentence gives."""
        if np.isinf(self.ratio):
            return "did not reach the target"
        if self.ratio == 0:
            return "reached the target where the other did not"
        if not self.instances:
            return "no common instance"
        if not self.has_interval:
            return f"{self.ratio:.3g}x (too few for an interval)"
        if self.busy:
            return f"{self.ratio:.3g}x, busy machine (no verdict)"
        return f"{self.ratio:.3g}x {self.ci()}" if self.distinguishable else \
            f"{self.ratio:.3g}x, not distinguishable"

    def phrase(self, a: str, b: str, quantity: str = "time") -> str:
        """'A took 2.3x the time of B [1.9x, 2.8x] (3 instances)', or 'not distinguishable'."""
        if self.instances == 0:
            return f"{a} and {b} share no instance: not compared"
        where = f"{self.instances} common instance{'s' * (self.instances != 1)}"
        if self.only_a or self.only_b:
            where += f"; {self.only_a + self.only_b} not shared, left out"
        if self.ratio == 0:  # B did not finish where A did: "0x" would say nothing true
            return f"{b} did not finish where {a} did on most of the {where}"
        if self.busy:
            return (f"{a} over {b}: {quantity} ratio {times(self.ratio)} ({where}), but "
                    f"measured on a busy machine ({self.noisy} of {self.measured} runs flagged "
                    "noisy), so no verdict; `--remeasure-noisy` measures them again")
        if np.isinf(self.ratio):
            how = f"95% interval of the ratio {self.ci()}" if self.has_interval else self.method
            return f"{a} did not finish where {b} did on most of the {where} ({how})"
        if not self.has_interval:
            return (f"{a} over {b}: {quantity} ratio {times(self.ratio)} ({where}): "
                    f"{self.method}, so no verdict")
        if not self.distinguishable:
            return (f"{a} and {b}: not distinguishable ({quantity} ratio {times(self.ratio)}, "
                    f"95% interval {self.ci()}, {where})")
        if self.ratio > 1:
            return f"{a} took {times(self.ratio)} the {quantity} of {b} ({self.ci()}, {where})"
        return (f"{a} took {times(self.ratio)} the {quantity} of {b}, i.e. "
                f"{times(1 / self.ratio)} less ({self.ci()}, {where})")


def times(x: float | None, missing: str = "-") -> str:
    """A ratio as '2.3x', 'inf' or `missing` (None, NaN)."""
    if x is None or np.isnan(x):
        return missing
    return "inf" if np.isinf(x) else f"{x:.3g}x"


def _log(values: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(values, dtype=float))


def _per_instance(samples: list[np.ndarray]) -> tuple[float, float, int]:
    """One instance's log value (for a ratio, A's mean log repeat minus B's), its variance from
    the repeats' spread (NaN where a side has one measurement or a failure) and degrees of
    freedom. A side with a failure takes its median."""
    value, variance, df = 0.0, 0.0, 0
    for sign, sample in zip((1.0, -1.0), samples, strict=False):
        logs = _log(sample)
        if not np.isfinite(logs).all() or logs.size < 2:
            value += sign * float(np.median(logs))
            variance = math.nan
            continue
        value += sign * float(np.mean(logs))
        variance += float(np.var(logs, ddof=1)) / logs.size
        df += logs.size - 1
    return value, variance, df


def interval(samples_per_instance: list[list[np.ndarray]], level: float = LEVEL) -> Interval:
    """The typical value over instances with its interval (see the module docstring). Each
    instance gives one sample (a configuration's times) or two (A's and B's, for A/B), on the
    original scale, infinity for a failure (both infinite: a tie)."""
    per = [_per_instance(samples) for samples in samples_per_instance]
    values = np.array([p[0] for p in per])
    values = np.where(np.isnan(values), 0.0, values)  # inf - inf: both failed, a tie
    k = values.size
    if k == 0:
        return Interval(math.nan, math.nan, math.nan, "no instance")
    if not np.isfinite(values).all():
        center = float(np.exp(np.median(values)))
        if k < MIN_ORDER:
            return Interval(center, math.nan, math.nan,
                            f"a failure on {int((~np.isfinite(values)).sum())} of {k} "
                            f"instances, and an interval of a median needs {MIN_ORDER}")
        low, high = _median_bounds(np.sort(values), level)
        return Interval(center, float(np.exp(low)), float(np.exp(high)),
                        f"median over {k} instances, order statistics")
    mean = float(values.mean())
    if k >= MIN_INSTANCES:
        spread, df = float(values.std(ddof=1)) / math.sqrt(k), k - 1
        method = f"t over {k} instances"
    else:
        variances = np.array([p[1] for p in per])
        if np.isnan(variances).any() or (np.array([p[2] for p in per]) < 1).any():
            return Interval(math.exp(mean), math.nan, math.nan,
                            f"{k} instance{'s' * (k != 1)} without repeats on both sides: too "
                            f"few for an interval (it takes {MIN_INSTANCES} instances, or repeats)")
        spread, df = math.sqrt(float(variances.sum()) / k**2), _welch_df(per, k)
        method = "Welch t from repeats, " + ("this instance only" if k == 1 else
                                             f"these {k} instances only")
    half = t_quantile(0.5 + level / 2, df) * spread
    return Interval(math.exp(mean), math.exp(mean - half), math.exp(mean + half), method)


def t_quantile(p: float, df: float) -> float:
    """scipy.stats.t.ppf's own function, without importing scipy.stats (0.4-0.7 s)."""
    return special.stdtrit(df, p)


def _welch_df(per, k: int) -> float:
    """Welch-Satterthwaite degrees of freedom of the sum of the instances' variances."""
    variances = np.array([p[1] for p in per]) / k**2
    dfs = np.array([p[2] for p in per], dtype=float)
    if variances.sum() == 0:  # repeats that agree exactly: a zero-width interval, any df
        return math.inf
    return float(variances.sum() ** 2 / np.sum(variances**2 / dfs))


def _median_bounds(sorted_values: np.ndarray, level: float) -> tuple[float, float]:
    """The order statistics [x_(j), x_(k+1-j)] with the largest j that still cover the median
    with at least `level`: P(Binomial(k, 1/2) <= j - 1) <= (1 - level) / 2. The binomial CDF
    is scipy.special's `bdtr`: scipy.stats's `binom.cdf` gives the same j (k to 3,000, levels
    0.8 to 0.999; 1e-11 apart) and cost importing scipy.stats, 0.5-1 s of a command."""
    k = sorted_values.size
    j = 1
    while special.bdtr(j, k, 0.5) <= (1 - level) / 2:
        j += 1
    return float(sorted_values[j - 1]), float(sorted_values[k - j])


def _measured(values) -> np.ndarray:
    """The values that are measurements: positive times, or infinity for a failure."""
    values = np.asarray(values, dtype=float)
    return values[values > 0]  # NaN compares false


def _positions(runs: pd.DataFrame, columns: list[str]) -> dict:
    """key (a tuple of the rows' `columns`, missing as None) -> the rows' positions. A plain
    loop, not a groupby: on a report's thousands of tiny tables the set-up is most of its cost."""
    if not columns:
        return {(): list(range(len(runs)))}
    found: dict = {}
    for position, key in enumerate(zip(*(runs[c].to_numpy(object) for c in columns),
                                       strict=True)):
        key = tuple(None if _missing(v) else v for v in key)
        found.setdefault(key, []).append(position)
    try:
        return {key: found[key] for key in sorted(found)}
    except TypeError:  # None beside values: their first-seen order
        return found


def _missing(value) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and value != value)


def _groups(runs: pd.DataFrame, instance: list[str], value: str) -> dict:
    """instance -> its measured values, instances without any left out."""
    if runs.empty:
        return {}
    values = runs[value].to_numpy(float)
    found = {k: _measured(values[at]) for k, at in _positions(runs, list(instance)).items()}
    return {k: v for k, v in found.items() if v.size}


def compare(a: pd.DataFrame, b: pd.DataFrame, instance: list[str], value: str) -> Comparison:
    """Paired ratio of `value` (A over B) on the instances (rows' `instance` columns) both ran;
    instance columns a table lacks hold nothing apart."""
    instance = [c for c in instance if c in a.columns and c in b.columns]
    # as text: a missing value (None, NaN) must match itself across the two tables
    a, b = (t.assign(**{c: t[c].astype(str) for c in instance}) for t in (a, b))
    a_groups, b_groups = _groups(a, instance, value), _groups(b, instance, value)
    common = [k for k in a_groups if k in b_groups]
    noise_a, noise_b = _noise(a, instance, common), _noise(b, instance, common)
    only_a, only_b = len(a_groups) - len(common), len(b_groups) - len(common)
    if not common:
        return Comparison(np.nan, np.nan, np.nan, 0, only_a, only_b, 0, 0, "no instance")
    both_failed = sum(bool(np.median(a_groups[k]) == np.inf == np.median(b_groups[k]))
                      for k in common)
    found = interval([[a_groups[k], b_groups[k]] for k in common])
    measurements = min(sum(a_groups[k].size for k in common),
                       sum(b_groups[k].size for k in common))
    return Comparison(found.value, found.low, found.high, len(common), only_a, only_b,
                      both_failed, measurements, found.method, noise_a[0] + noise_b[0],
                      noise_a[1] + noise_b[1], _units(a, b, instance, value),
                      tuple(sorted({*_ids(a), *_ids(b)})))


def _replicate(a: pd.DataFrame, b: pd.DataFrame, instance: list[str]) -> list[str]:
    """What tells apart the runs a sequential verdict pairs within an instance: the seed where
    it varies and is not the instance's, else the repeat."""
    for column in ("seed", "repeat"):
        if column in a and column in b and column not in instance and \
                pd.concat([a[column], b[column]]).nunique() > 1:
            return [column]
    return []


def _ids(runs: pd.DataFrame) -> list:
    return list(runs["run_id"].dropna().astype(str)) if "run_id" in runs else []


def _units(a: pd.DataFrame, b: pd.DataFrame, instance: list[str], value: str) -> tuple:
    """Per instance and replicate both sides measured, A's mean log value minus B's, ordered by
    replicate so that the ones the adaptive loop added come last."""
    keys = instance + _replicate(a, b, instance)
    a_groups, b_groups = _groups(a, keys, value), _groups(b, keys, value)
    common = [k for k in a_groups if k in b_groups]

    def order(key):
        replicate = key[len(instance):] if isinstance(key, tuple) else ()
        return tuple(pd.to_numeric(pd.Series(replicate, dtype=object), errors="coerce")
                     .fillna(-1).tolist()), str(key)

    out = []
    for key in sorted(common, key=order):
        out.append(float(np.mean(_log(a_groups[key]))) - float(np.mean(_log(b_groups[key]))))
    return tuple(out)  # inf - inf (both failed) is NaN: no finite time, no sequential verdict


def _noise(runs: pd.DataFrame, instance: list[str], common: list) -> tuple[int, int]:
    """(rows flagged noisy, rows) of `runs` on the common instances."""
    if "noisy" not in runs or not common:
        return 0, 0
    wanted = set(common)
    rows = [i for k, at in _positions(runs, instance).items() if k in wanted for i in at]
    noisy = runs["noisy"].astype(object).fillna(False).astype(bool).to_numpy()
    return int(noisy[rows].sum()), len(rows)


def typical(runs: pd.DataFrame, instance: list[str], value: str) -> Interval:
    """One configuration's typical `value` over its instances (none named: one), with its
    interval."""
    instance = [c for c in instance if c in runs.columns]
    return interval([[g] for g in _groups(runs, instance, value).values()])


def common_instances(runs: pd.DataFrame, config: list[str], instance: list[str]) -> pd.DataFrame:
    """The rows on instances every configuration in `runs` ran."""
    if runs.empty:
        return runs
    keys = runs[instance].map(str).agg("|".join, axis=1)
    configs = runs[config].map(str).agg("|".join, axis=1)
    per_config = keys.groupby(configs).agg(set)
    shared = set.intersection(*per_config)
    return runs[keys.isin(shared)]
