"""Verdicts that stay valid however often the results are looked at: a confidence sequence on
the log time ratio of paired instances.

A fixed 95% interval is valid at one planned count: adding instances and looking again until it
excludes 1 makes a false "faster" far likelier than 5%. A confidence sequence holds the true
value at every count at once with probability 95%, so one may look after every instance, stop,
resume or add instances by hand: the error rates hold.

The one used here is Lai's (1976) for a normal mean with unknown variance, in the closed form
of Wang and Ramdas (2023): the scale-invariant Bayes factor of the one-sample t test with a
N(0, g) prior on the standardized effect,

    BF_n(mu) = (1 + n g)^(-1/2) [(1 + t^2 / nu) / (1 + t^2 / (nu (1 + n g)))]^((nu + 1) / 2),

t the t statistic of mu after n values, nu = n - 1, is a nonnegative martingale under mu, so by
Ville's inequality {mu : BF_n(mu) < 1 / alpha} misses mu at some n with probability at most
alpha: the set is mean +- t*_n s / sqrt(n) (`critical`). With G = 4 it cannot decide below 4
instances and costs about 1.7x a fixed t interval's width at 12 (docs/measurement.md gives the
simulated rates).

Verdicts on A over B (per-instance log ratios in measured order): "more time" or "less time"
where the sequence excludes 1; "equivalent" where it lies within [1 / (1 + margin), 1 + margin];
otherwise none yet. A failure (infinite time) gives no verdict (the t statistic needs finite
values) unless every miss is by the side found slower.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from study.paired import times

ALPHA = 0.05
G = 4.0  # prior variance of the standardized effect: the mixture's tuning (see the docstring)
MARGIN = 0.1
MAX_INSTANCES = 12
MORE, LESS, EQUIVALENT, NONE = "more time", "less time", "equivalent", "no verdict"
WORDS = {MORE: "slower", LESS: "faster"}  # A over B, as the answer's sentence orders them


def critical(n, alpha: float = ALPHA, g: float = G):
    """t*_n: the half-width of the confidence sequence after n values, in standard errors
    (inf where no finite t reaches 1 / alpha). Works on arrays of n."""
    n = np.asarray(n, dtype=float)
    nu, r = n - 1, n * g
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        c = ((1 / alpha) * np.sqrt(1 + r)) ** (2 / np.maximum(nu + 1, 1))
        u = (c - 1) / (1 - c / (1 + r))
        out = np.sqrt(nu * u)
    return np.where((n >= 2) & (c < 1 + r), out, np.inf)


@dataclass(frozen=True)
class Verdict:
    """A over B after `instances` paired instances: the ratio, the confidence sequence's bounds
    there, what it decides, and why it stopped where it did (set by the caller when undecided:
    the instance cap, the time budget, a busy machine)."""

    kind: str
    ratio: float
    low: float
    high: float
    instances: int
    margin: float = MARGIN
    reason: str = ""
    missed: int = 0  # values where one side missed the target: all by the side found slower
    shared: int | None = None  # the comparison's instances, where its values are repeats

    @property
    def decided(self) -> bool:
        return self.kind != NONE

    def bounds(self) -> str:
        return f"[{times(self.low)}, {times(self.high)}]"

    def text(self) -> str:
        n = self.count()
        where = f"anytime-valid 95% interval {self.bounds()}"
        if self.kind == EQUIVALENT:
            return f"equivalent within ±{self.margin:.0%} after {n} ({where})"
        if self.decided:
            side = "it also" if self.kind == MORE else "the other"
            return f"{WORDS[self.kind]}, decided after {n} ({where})" + (
                f"; {side} missed the target on {self.missed} of {self.instances}"
                if self.missed else "")
        return f"no verdict after {n}: {self.reason or 'undecided'}" + (
            f" ({where})" if math.isfinite(self.high) and self.low > 0 else "")

    def count(self) -> str:
        """'5 repeats of 1 instance' where the values are repeats (a file data set from zeros)."""
        n = f"{self.instances} instance{'s' * (self.instances != 1)}"
        if self.shared is None or self.shared == self.instances:
            return n
        return (f"{self.instances} repeat{'s' * (self.instances != 1)} of {self.shared} "
                f"instance{'s' * (self.shared != 1)}")

    def why_open(self) -> str:
        n = self.count()
        if math.isnan(self.low) or math.isinf(self.high):
            return f"{n}: too few for a finite anytime-valid interval"
        return (f"{self.ratio:.3g}x after {n}: its anytime-valid 95% interval {self.bounds()} "
                f"holds 1 and is wider than ±{self.margin:.0%}")


def decide(values, margin: float = MARGIN, alpha: float = ALPHA, g: float = G) -> Verdict:
    """The verdict of the confidence sequence on per-instance log ratios (A over B)."""
    values = np.asarray(values, dtype=float)
    n = values.size
    if n and not np.isfinite(values).all():
        return _with_misses(values, margin, alpha, g)
    if n < 2:
        return Verdict(NONE, math.exp(values.mean()) if n else math.nan, math.nan, math.nan,
                       n, margin, "fewer than 2 instances")
    mean, spread = float(values.mean()), float(values.std(ddof=1)) / math.sqrt(n)
    half = float(critical(n, alpha, g)) * spread if spread > 0 else (
        0.0 if np.isfinite(critical(n, alpha, g)) else math.inf)
    low, high = mean - half, mean + half
    edge = math.log1p(margin)
    kind = MORE if low > 0 else LESS if high < 0 else \
        EQUIVALENT if -edge < low and high < edge else NONE
    return Verdict(kind, math.exp(mean), math.exp(low), math.exp(high), n, margin)


FAILED = ("a failure on some instance (the sequential test needs finite times; the fixed "
          "design's interval of a median stands)")


def _missed_by(values: np.ndarray) -> float:
    """+1 where only A missed the target (its values +inf), -1 where only B did, else NaN (both
    sides missed somewhere, or both on one instance)."""
    missing = values[~np.isfinite(values)]
    signs = set(np.sign(missing[~np.isnan(missing)]))
    return signs.pop() if len(signs) == 1 and not np.isnan(missing).any() else math.nan


def _with_misses(values: np.ndarray, margin: float, alpha: float, g: float) -> Verdict:
    """A miss by the side the finite values find slower only makes it slower: their verdict
    stands, said with the misses; a miss by the faster side, or by both, leaves it open."""
    n, side = values.size, _missed_by(values)
    finite = values[np.isfinite(values)]
    found = decide(finite, margin, alpha, g) if not np.isnan(side) else None
    if found is not None and found.kind == (MORE if side > 0 else LESS):
        return Verdict(found.kind, found.ratio, found.low, math.inf if side > 0 else 0.0, n,
                       margin, missed=n - finite.size)
    return Verdict(NONE, math.nan, math.nan, math.nan, n, margin, FAILED)


def leans_to_misses(values) -> bool:
    """More instances may still decide a comparison whose misses are all by the slower side."""
    values = np.asarray(values, dtype=float)
    finite = values[np.isfinite(values)]
    side = _missed_by(values)
    return finite.size > 0 and not np.isnan(side) and np.sign(finite.mean()) == side


# Below this many values the projection (`instances_needed`) is not trusted: a look that early
# never stops a comparison as out of reach.
PROJECT_FROM = 4


def instances_needed(mean, spread, n, margin: float = MARGIN, limit: int = 1000,
                     alpha: float = ALPHA, g: float = G):
    """The fewest instances (n to `limit`, else inf) at which the sequence would decide if the
    instances to come kept the mean and spread seen so far (arrays work). A projection for
    spending a budget, never a verdict: stopping on it makes no false verdict."""
    counts = np.arange(n, limit + 1, dtype=float)
    half = critical(counts, alpha, g)[:, None] * np.atleast_1d(spread)[None, :] \
        / np.sqrt(counts)[:, None]
    size = np.abs(np.atleast_1d(mean))[None, :]
    decided = (size > half) | (size + half < math.log1p(margin))
    first = np.where(decided.any(0), counts[decided.argmax(0)], np.inf)
    return first if np.ndim(mean) else float(first[0])


def projected(mean, spread, n, margin: float = MARGIN, g: float = G):
    """The instances a verdict would take, projected generously: a difference as if the mean
    were one standard error further from 0, an equivalence as if one nearer. Stopping where
    even that is out of reach keeps nearly every verdict and halves the instances spent where
    none is reached (docs/measurement.md)."""
    mean, spread = np.abs(mean), np.asarray(spread, dtype=float)
    error = spread / math.sqrt(n)
    return np.minimum(instances_needed(mean + error, spread, n, margin, g=g),
                      instances_needed(np.maximum(mean - error, 0.0), spread, n, margin, g=g))


def needed(values, margin: float = MARGIN) -> float | None:
    """`projected` from the log ratios seen; None where too early to tell (fewer than
    PROJECT_FROM, or a failure among them)."""
    values = np.asarray(values, dtype=float)
    if not np.isfinite(values).all() and leans_to_misses(values):
        values = values[np.isfinite(values)]  # a verdict is the finite values' (`decide`)
    if values.size < PROJECT_FROM or not np.isfinite(values).all():
        return None
    return float(projected(values.mean(), values.std(ddof=1), values.size, margin))


def simulate(ratio: float, spread: float, *, first: int = 3, batch: int = 2,
             max_instances: int = MAX_INSTANCES, margin: float = MARGIN, runs: int = 2000,
             seed: int = 0, g: float = G, futility: bool = True) -> dict:
    """The procedure on synthetic log ratios N(log ratio, spread^2), looking after `first`
    instances then every `batch` (with `futility`, stopping where a verdict is out of reach, as
    the sweep does): the share of runs ending with each verdict, and the mean instances taken."""
    rng = np.random.default_rng(seed)
    values = rng.normal(math.log(ratio), spread, (runs, max_instances))
    verdict = np.full(runs, NONE, dtype=object)
    taken = np.full(runs, max_instances)
    stopped = np.zeros(runs, bool)  # out of reach: no more instances
    looks = sorted({*range(first, max_instances, batch), max_instances})
    edge = math.log1p(margin)
    for n in looks:
        open_ = (verdict == NONE) & ~stopped
        part = values[open_, :n]
        mean, sd = part.mean(1), part.std(1, ddof=1)
        half = critical(n, g=g) * sd / math.sqrt(n)
        low, high = mean - half, mean + half
        kind = np.where(low > 0, MORE, np.where(high < 0, LESS, np.where(
            (low > -edge) & (high < edge), EQUIVALENT, NONE)))
        verdict[open_] = kind
        rows = np.flatnonzero(open_)
        taken[rows[kind != NONE]] = n
        if futility and n >= PROJECT_FROM and n < max_instances:
            hopeless = (kind == NONE) & (projected(mean, sd, n, margin, g=g) > max_instances)
            stopped[rows[hopeless]] = True
            taken[rows[hopeless]] = n
    shares = {k: float(np.mean(verdict == k)) for k in (MORE, LESS, EQUIVALENT, NONE)}
    return {**shares, "instances": float(taken.mean())}


def sequential_verdict(c, margin: float = MARGIN) -> Verdict:
    """The verdict on a study.paired.Comparison, the one source for the report and the adaptive
    loop (so they never disagree); none where most of its runs were measured on a busy machine."""
    verdict = replace(decide(c.units, margin), shared=c.instances)
    if c.busy:
        verdict = replace(verdict, kind=NONE,
                          reason="measured on a busy machine (`--remeasure-noisy`)")
    return verdict
