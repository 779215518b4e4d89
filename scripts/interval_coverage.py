"""Do the paired intervals hold on the next run? Measured on K results folders of the same study
(the same config swept K times on one idle machine).

For each comparison (per data set, its fastest configuration in the first folder against every
other, on time to the target; every engine against NumPy float64 on seconds per iteration for GD
and Adadelta), each folder gives a ratio and a 95% interval, by the current method
(study/paired.py) and by the one it replaced (a percentile bootstrap of the median). Reported
per method: replication (how often another run's ratio falls in a run's interval), coverage of
the pooled value (the other runs' geometric mean) and verdict flips between runs.

    python scripts/interval_coverage.py results/cov1/regression results/cov2/regression ...

`--simulate` checks the sequential verdicts (study/sequential.py) instead, on synthetic log
ratios: under no true difference, a true 1.3x and the equivalence margin (1.1), at several
spreads, beside a fixed 95% t interval looked at as often. The rates in docs/measurement.md come
from

    python scripts/interval_coverage.py --simulate --runs 20000
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from study.paired import compare  # noqa: E402
from study.regression.labels import label_runs  # noqa: E402
from study.regression.summary import INSTANCE_COLUMNS, time_to_target  # noqa: E402
from study.sequential import EQUIVALENT, LESS, MORE, NONE, simulate  # noqa: E402
from study.sweep.tuning import measured_runs  # noqa: E402


def bootstrap_median(a: pd.DataFrame, b: pd.DataFrame, value: str, resamples=2000, seed=0):
    """The replaced method: per instance the median of repeats, their ratio; the median over
    instances with a percentile bootstrap resampling instances and repeats."""
    keys = [c for c in INSTANCE_COLUMNS if c in a and c in b]
    ag = {k: g[value].to_numpy(float) for k, g in a.groupby(keys)}
    bg = {k: g[value].to_numpy(float) for k, g in b.groupby(keys)}
    common = [k for k in ag if k in bg]
    if not common:
        return math.nan, math.nan, math.nan

    def ratio(x, y):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(np.isinf(x) & np.isinf(y), 1.0, x / y)

    rng = np.random.default_rng(seed)
    per = ratio(np.array([np.median(ag[k]) for k in common]),
                np.array([np.median(bg[k]) for k in common]))
    boot = np.column_stack([ratio(np.median(ag[k][rng.integers(0, ag[k].size, (resamples,
                                                                             ag[k].size))], 1),
                                  np.median(bg[k][rng.integers(0, bg[k].size, (resamples,
                                                                             bg[k].size))], 1))
                            for k in common])
    pick = rng.integers(0, len(common), (resamples, len(common)))
    medians = np.median(np.take_along_axis(boot, pick, 1), 1)
    low, high = np.quantile(medians, [0.025, 0.975], method="inverted_cdf")
    if min(len(ag[k]) for k in common) * len(common) <= 1:
        low = high = math.nan
    return float(np.median(per)), float(low), float(high)


def labelled(folder: Path) -> pd.DataFrame:
    runs = pd.read_parquet(folder / "runs.parquet")
    runs = measured_runs(runs)
    runs = label_runs(runs[runs["status"] != "skipped"])
    return runs.assign(time_to_target=time_to_target(runs))


def comparisons(first: pd.DataFrame) -> list[tuple[str, str, str, str]]:
    """(data, config a, config b, value): A over B."""
    out = []
    for data, part in first.groupby("data"):
        typical = part.groupby("config")["time_to_target"].apply(
            lambda s: float(np.exp(np.mean(np.log(s)))) if np.isfinite(s).all() else math.inf)
        if not np.isfinite(typical.min()):
            continue
        best = typical.idxmin()
        out += [(data, config, best, "time_to_target") for config in typical.index
                if config != best]
        per_iteration = part[part["optimizer"].isin(["gd", "adadelta"])]
        for _, rows in per_iteration.groupby("method"):
            numpy = rows[(rows["engine"] == "numpy/cpu") & (rows["dtype"] == "float64")]
            if numpy.empty:
                continue
            out += [(data, config, numpy["config"].iloc[0], "seconds_per_iteration")
                    for config in rows["config"].unique() if config != numpy["config"].iloc[0]]
    return out


def verdict(low, high) -> str:
    if math.isnan(low):
        return "no interval"
    return "slower" if low > 1 else "faster" if high < 1 else "not distinguishable"


def measure(folders: list[Path]) -> pd.DataFrame:
    tables = [labelled(f) for f in folders]
    rows = []
    for data, a, b, value in comparisons(tables[0]):
        for run, runs in enumerate(tables):
            on = runs[runs["data"] == data]
            side_a, side_b = on[on["config"] == a], on[on["config"] == b]
            if side_a.empty or side_b.empty:
                continue
            c = compare(side_a, side_b, INSTANCE_COLUMNS, value)
            old = bootstrap_median(side_a, side_b, value)
            rows.append({"data": data, "a": a, "b": b, "value": value, "run": run,
                         "new": c.ratio, "new_low": c.low, "new_high": c.high,
                         "old": old[0], "old_low": old[1], "old_high": old[2]})
    return pd.DataFrame(rows)


def summarize(table: pd.DataFrame, method: str) -> dict:
    inside = covered = flips = pairs_seen = comparisons_seen = 0
    pooled_total = replication_total = 0
    for _, group in table.groupby(["data", "a", "b", "value"]):
        group = group[np.isfinite(group[method]) & (group[method] > 0)]
        if len(group) < 2:
            continue
        comparisons_seen += 1
        values = group[method].to_numpy()
        lows, highs = group[f"{method}_low"].to_numpy(), group[f"{method}_high"].to_numpy()
        verdicts = [verdict(lo, hi) for lo, hi in zip(lows, highs, strict=True)]
        for i, j in itertools.permutations(range(len(group)), 2):
            if math.isnan(lows[i]):
                continue
            replication_total += 1
            inside += lows[i] <= values[j] <= highs[i]
        for i in range(len(group)):
            if math.isnan(lows[i]):
                continue
            others = np.delete(values, i)
            pooled = float(np.exp(np.mean(np.log(others))))
            pooled_total += 1
            covered += lows[i] <= pooled <= highs[i]
        for i, j in itertools.combinations(range(len(group)), 2):
            pairs_seen += 1
            firm = {verdicts[i], verdicts[j]} & {"faster", "slower"}
            flips += bool(firm) and verdicts[i] != verdicts[j]
    return {"method": method, "comparisons": comparisons_seen,
            "replication": inside / max(replication_total, 1),
            "replication_n": replication_total,
            "pooled_coverage": covered / max(pooled_total, 1), "pooled_n": pooled_total,
            "verdict_flips": flips / max(pairs_seen, 1), "pairs": pairs_seen,
            "with_interval": float(np.mean(~np.isnan(table[f"{method}_low"])))}


def naive_false_verdicts(spread: float, runs: int, seed: int = 0, first: int = 3,
                         batch: int = 2, max_instances: int = 12) -> float:
    """Under no difference, the share of runs in which a fixed 95% t interval, looked at after
    each batch, excludes 1 at some look."""
    from scipy import stats

    values = np.random.default_rng(seed).normal(0, spread, (runs, max_instances))
    hit = np.zeros(runs, bool)
    for n in sorted({*range(first, max_instances, batch), max_instances}):
        t = values[:, :n].mean(1) / (values[:, :n].std(1, ddof=1) / math.sqrt(n))
        hit |= np.abs(t) > stats.t.ppf(0.975, n - 1)
    return float(hit.mean())


def simulation(runs: int, seed: int = 0) -> pd.DataFrame:
    """The sequential procedure's verdict rates per true ratio and spread."""
    rows = []
    for spread in (0.03, 0.1, 0.2, 0.3):
        for ratio in (1.0, 1.1, 1.3):
            found = simulate(ratio, spread, runs=runs, seed=seed)
            rows.append({"true ratio": ratio, "spread": spread,
                         "false faster/slower": found[LESS] if ratio > 1 else
                         found[MORE] + found[LESS],
                         "slower (right)": found[MORE] if ratio > 1 else math.nan,
                         "equivalent": found[EQUIVALENT], "no verdict": found[NONE],
                         "mean instances": found["instances"],
                         "fixed t, same looks: false": naive_false_verdicts(spread, runs, seed)
                         if ratio == 1.0 else math.nan})
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", type=Path)
    parser.add_argument("--csv", type=Path, help="write every comparison of every run here")
    parser.add_argument("--simulate", action="store_true",
                        help="the sequential verdicts' error rates on synthetic samples")
    parser.add_argument("--runs", type=int, default=20000, help="with --simulate: runs each")
    args = parser.parse_args()
    if args.simulate:
        with pd.option_context("display.width", 160, "display.max_columns", None):
            print(simulation(args.runs).to_string(index=False, float_format=lambda x: f"{x:.3f}"))
        return
    if not args.folders:
        parser.error("give results folders, or --simulate")
    table = measure(args.folders)
    if args.csv:
        table.to_csv(args.csv, index=False)
    summary = pd.DataFrame([summarize(table, "old"), summarize(table, "new")])
    with pd.option_context("display.width", 160, "display.max_columns", None):
        print(summary.to_string(index=False, float_format=lambda x: f"{x:.3f}"))


if __name__ == "__main__":
    main()
