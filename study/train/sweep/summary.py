"""Per configuration: time to the target with its interval over seeds, the success rate, time per
step, setup and evaluation time apart; and each configuration against its problem's fastest,
paired by seed.

Configurations are ranked by training time alone (`to_target`: a compilation is paid once per
process); `to_target_with_setup` is AlgoPerf's count, which favours eager frameworks on targets
reached in a fraction of a second. A run that did not reach the target counts as infinite time,
never as a missing row. Tuning and target-setting runs are left out."""

from __future__ import annotations

import numpy as np
import pandas as pd

from datasets.user_file import is_file_name
from study.names import short_names
from study.paired import compare, typical
from study.sweep.plugin import load_kind

INSTANCE = ["model", "data_params", "seed"]  # weights, order and split: the same instance
# what a summary row shows of its configuration; runs are grouped by their spec's whole
# configuration (`keyed`), every optimizer parameter included
SHOWN = ["model", "data", "data_params", "optimizer", "backend", "device", "batch_size"]
LEFT_OUT = ("skipped",)


def named(runs: pd.DataFrame) -> pd.DataFrame:
    """`model` and `data` by their short names (a file's stem, study.names), the full ones kept
    in `model_full` and `data_full` for the one sentence that says what each name stands for."""
    if "model_full" in runs or runs.empty:
        return runs
    return runs.assign(model_full=runs["model"], data_full=runs["data"],
                       model=runs["model"].map(short_names(runs["model"])),
                       data=runs["data"].map(short_names(runs["data"])),
                       optimizer=optimizer_labels(runs))


def optimizer_labels(runs: pd.DataFrame) -> pd.Series:
    """A file's optimizer (`/abs/path.py:Name`) as its library's names are, `<library>:<Name>`
    (the regression study's label), unless two files would share it; others as they are."""
    library = runs.get("optimizer_library", pd.Series(None, index=runs.index)).astype(object)
    labels = {value: f"{lib}:{str(value).rpartition(':')[2]}"
              for value, lib in zip(runs["optimizer"], library, strict=True)
              if is_file_name(value) and isinstance(lib, str) and lib}
    taken = pd.Series(list(labels.values())).value_counts()
    return runs["optimizer"].map(lambda v: labels[v] if v in labels and taken[labels[v]] == 1
                                 else v)


def measured(runs: pd.DataFrame) -> pd.DataFrame:
    """The rows a comparison reads: no tuning or target-setting runs, no fit-overhead runs."""
    runs = named(runs)
    keep = ~runs["tuning"].astype(object).eq("tuning") if "tuning" in runs else True
    keep = keep & ~runs["target_how"].astype(object).isin(["setting", "tuning"])
    keep = keep & runs["loop"].astype(object).ne("fit") & ~runs["status"].isin(LEFT_OUT)
    return runs[keep]


def with_device(runs: pd.DataFrame) -> pd.DataFrame:
    """Rows from before the device axis ran on the CPU."""
    device = runs["device"].astype(object).fillna("cpu") if "device" in runs else "cpu"
    return runs.assign(device=device)


def with_time(runs: pd.DataFrame) -> pd.DataFrame:
    """`to_target` and `to_target_with_setup`: seconds to the target, inf where not reached."""
    reached = runs["status"].eq("reached")
    value = pd.to_numeric(runs["seconds_to_target"], errors="coerce")
    setup = pd.to_numeric(runs["seconds_to_target_with_setup"], errors="coerce") \
        if "seconds_to_target_with_setup" in runs else value + pd.to_numeric(
            runs["setup_seconds"], errors="coerce")
    return with_device(runs).assign(to_target=np.where(reached, value, np.inf),
                                    to_target_with_setup=np.where(reached, setup, np.inf))


def label(row) -> str:
    size = "full" if int(row["batch_size"]) == 0 else int(row["batch_size"])
    device = "" if row.get("device", "cpu") == "cpu" else f" {row['device'].upper()}"
    return f"{row['optimizer']} on {row['backend']}{device} (batch {size})"


def keyed(runs: pd.DataFrame) -> pd.DataFrame:
    """`config_key`, the run's configuration, and `configuration`, its label, one per
    configuration within a problem (e.g. 'optax:adamw on jax (batch 32) [learning_rate=0.005]')."""
    from study.sweep.grid import configurations, distinct_labels  # heavy: psutil

    if "config_key" in runs:
        return runs
    keys = configurations(runs, load_kind("train"))
    labels = runs.apply(label, axis=1) if len(runs) else pd.Series(dtype=object)
    problem = runs["model"].astype(str) + " on " + runs["data"].astype(str)
    return runs.assign(config_key=keys, configuration=distinct_labels(labels, keys, problem))


def configurations_of(runs: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """(key, rows) per configuration, in the order of their shown columns and label."""
    groups = list(runs.groupby("config_key", sort=False))
    return sorted(groups, key=lambda g: (tuple(map(str, g[1][SHOWN].iloc[0])),
                                         g[1]["configuration"].iloc[0]))


def summarize(runs: pd.DataFrame) -> pd.DataFrame:
    runs = keyed(with_time(measured(runs)))
    out = []
    for key, group in configurations_of(runs):
        found = typical(group, INSTANCE, "to_target")
        config = group[SHOWN].head(1).to_dict("records")[0]
        problem = runs[(runs["model"] == config["model"]) & (runs["data"] == config["data"])]
        best = fastest(problem)
        paired = None
        if best is not None and best != key:
            paired = compare(group, problem[problem["config_key"] == best], INSTANCE,
                             "to_target")
        out.append({**config, "config_key": key,
                    "configuration": group["configuration"].iloc[0], "runs": len(group),
                    "reached": int(group["status"].eq("reached").sum()),
                    "to_target": found.value, "low": found.low, "high": found.high,
                    "interval": found.method,
                    "to_target_with_setup": typical(group, INSTANCE,
                                                    "to_target_with_setup").value,
                    "ms_per_step": 1e3 * pd.to_numeric(group["seconds_per_step"]).median(),
                    "setup_s": pd.to_numeric(group["setup_seconds"]).median(),
                    "eval_s": pd.to_numeric(group["eval_seconds"]).median(),
                    "steps_to_target": pd.to_numeric(group["steps_to_target"]).median(),
                    "target": pd.to_numeric(group["target_value"]).median(),
                    "vs_fastest": None if paired is None else paired.ratio,
                    "vs_low": None if paired is None else paired.low,
                    "vs_high": None if paired is None else paired.high,
                    "vs_text": ("fastest" if best == key else "none reached the target")
                    if paired is None else paired.cell()})
    return pd.DataFrame(out)


def fastest(problem: pd.DataFrame, column: str = "to_target"):
    """The configuration (its key) with the smallest typical time to the target on a problem."""
    best, found = np.inf, None
    for key, group in configurations_of(keyed(problem)):
        value = typical(group, INSTANCE, column).value
        if value < best:
            best, found = value, key
    return found


def overhead(runs: pd.DataFrame) -> pd.DataFrame:
    """Our loop's seconds per step over model.fit's, per configuration where both ran."""
    runs = keyed(with_device(named(runs)))
    steps_key = runs["config_key"].str.replace('"loop": "fit"', '"loop": "steps"', regex=False)
    fit = runs[runs["loop"].astype(object).eq("fit") & runs["status"].eq("completed")]
    out = []
    for _key, group in configurations_of(fit):
        mine = runs[(steps_key == steps_key[group.index[0]])
                    & runs["loop"].astype(object).eq("steps")]
        if mine.empty:
            continue
        a = pd.to_numeric(mine["seconds_per_step"]).median()
        b = pd.to_numeric(group["seconds_per_step"]).median()
        out.append({**group[SHOWN].head(1).to_dict("records")[0],
                    "configuration": mine["configuration"].iloc[0], "loop_ms_per_step": 1e3 * a,
                    "fit_ms_per_step": 1e3 * b, "loop_over_fit": a / b})
    return pd.DataFrame(out)


def summary_table(runs: pd.DataFrame) -> str:
    table = summarize(runs)
    if table.empty:
        return "(no measured runs)"
    shown = pd.DataFrame({
        "model": table["model"], "data": table["data"], "configuration": table["configuration"],
        "reached": [f"{r}/{n}" for r, n in zip(table["reached"], table["runs"], strict=True)],
        "s to target": [_interval(v, lo, hi) for v, lo, hi in
                        zip(table["to_target"], table["low"], table["high"], strict=True)],
        "vs fastest (paired) [95%]": table["vs_text"],
        "s with setup": [_interval(v, None, None) for v in table["to_target_with_setup"]],
        "ms/step": table["ms_per_step"].map(_g), "setup s": table["setup_s"].map(_g),
        "eval s (apart)": table["eval_s"].map(_g)})
    text = ("ranked by training time to the target (setup excluded); 's with setup' counts "
            "setup (compilation) in, as AlgoPerf does\n" + shown.to_string(index=False))
    extra = overhead(runs)
    if not extra.empty:
        text += "\n\nloop over model.fit (seconds per step):\n" + extra.to_string(index=False)
    return text


def _g(value) -> str:
    return "-" if value is None or pd.isna(value) else f"{value:.3g}"


def _interval(value, low, high, unit: str = "") -> str:
    if value is None or pd.isna(value):
        return "-"
    if np.isinf(value):
        return "not reached"
    text = f"{value:.3g}{unit}"
    if low is not None and not pd.isna(low) and not pd.isna(high):
        text += f" [{low:.3g}, {high:.3g}]"
    return text
