"""The names a reader sees for a run's method, engine and data set, the same in every figure,
table and sentence (kept apart from the figures so that summaries need no plotting stack)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from datasets import DATASETS, problem_kind
from study.frameworks.registry import BACKENDS
from study.names import short_name
from study.sweep.grid import configurations, distinct_labels
from study.sweep.plugin import load_kind


def json_column(row, column: str) -> dict:
    """A JSON column's value of a row ({} where it has none)."""
    value = row.get(column)
    return json.loads(value) if isinstance(value, str) else {}


def method_label(row, tuned_rate: str = "{} tuned") -> str:
    """optimizer(key=value,...) as a short legend entry, a tuned learning rate written by
    `tuned_rate`, and ' [original rule]' for a run under the original program's own rule (no
    target, stop when the RMSE repeats)."""
    tuned = row.get("tuning") == "tuned"
    inner = ",".join(f"{k}={tuned_rate.format(v) if tuned and k == 'learning_rate' else v}"
                     for k, v in json_column(row, "hyperparameters").items() if v is not None)
    label = f"{row['optimizer']}({inner})" if inner else row["optimizer"]
    rules = json_column(row, "stopping")
    if rules.get("exact_repeat") and rules.get("tol") is None:
        label += " [original rule]"
    return label


def algorithm_label(row) -> str:
    """The algorithm a run ran, whatever the engine (a tuned rate as `tuned`: each engine's
    configuration tunes its own by one protocol): two engines under one label ran the same."""
    return method_label(row, "tuned")


def engine_label(row) -> str:
    """The engine as its backend's declaration names it (numpy, tf-fused+xla, jax-fused,
    torch-compiled, +gram), with the device."""
    options = {key: row.get(key) for key in ("feed", "xla", "formulation")
               if isinstance(row.get(key), (str, bool))}
    engine = BACKENDS[row["backend"]].label(options) if row["backend"] in BACKENDS \
        else str(row["backend"])
    device = row.get("device") or "cpu"
    return f"{engine}/{device}"


def dataset_label(row) -> str:
    """A data set as every sentence and table names it: a file by its stem (the path, columns
    and all, said once: study.names), a generated one with its parameters."""
    params = json_column(row, "dataset_params")
    if "path" in params:
        return short_name(str(params["path"])) + (" (standardized)" if params.get("standardize")
                                                   else "")
    return full_dataset_label(row)


def full_dataset_label(row) -> str:
    params = json_column(row, "dataset_params")
    inner = ",".join(f"{k}={v}" for k, v in params.items())
    return f"{row['dataset']}({inner})" if inner else row["dataset"]


def data_title(row) -> str:
    """A data set as a heading names it: a file by its name and columns ('sales.csv: price
    from area, rooms'), the others by their label."""
    params = json_column(row, "dataset_params")
    if "path" not in params:
        return dataset_label(row)
    labels, features = params.get("labels") or [], params.get("features") or []
    columns = [c if isinstance(c, str) else str(c) for c in labels]
    title = Path(str(params["path"])).name
    if columns:
        title += f": {', '.join(columns)} from {', '.join(map(str, features))}"
    return title + (" (standardized)" if params.get("standardize") else "")


def data_titles(runs: pd.DataFrame) -> list[str]:
    """The data sets of `runs` as headings name them (data_title), sorted."""
    if "dataset_params" not in runs:
        runs = runs.assign(dataset_params=None)
    sets = runs[["dataset", "dataset_params"]].drop_duplicates()
    return sorted({data_title(row) for _, row in sets.iterrows()})


def target_tol(runs: pd.DataFrame) -> float | None:
    """The target as every figure and sentence names it: the most common stop_tol (one block's
    own rules may differ; the first row's would depend on the table's order), None without."""
    tols = runs["stop_tol"].dropna() if "stop_tol" in runs else pd.Series(dtype=float)
    return float(tols.mode().iloc[0]) if len(tols) else None


def is_logistic(runs: pd.DataFrame) -> bool:
    """Every row's data set is a logistic-regression problem (as its declaration says)."""

    if not len(runs):
        return False
    params = runs.get("dataset_params", pd.Series("{}", index=runs.index))
    return all(problem_kind(name, json.loads(p) if isinstance(p, str) else {}).objective
               == "logistic" for name, p in zip(runs["dataset"], params, strict=True))


def original_data(runs: pd.DataFrame) -> bool:
    """Whether the runs hold the original question's data set (eve): its questions (Q1, NumPy
    against TensorFlow) are asked of that data only, a study of other data asks its own."""
    return "dataset" in runs and runs["dataset"].eq("eve").any()


def seed_matters(runs: pd.DataFrame) -> pd.Series:
    """Whether each run's seed draws another instance: it draws the data of a seeded data set
    (unless the parameters fix its seed) and a random starting point. On a file data set from
    zeros every seed is the same problem from the same point: its runs are repeats."""

    def matters(row) -> bool:
        params = json_column(row, "dataset_params")
        declared = DATASETS.get(row["dataset"])
        seeded = declared is None or (declared.seeded and "seed" not in params)
        return bool(seeded or row.get("init") != "zeros")

    if runs.empty:
        return pd.Series(dtype=bool, index=runs.index)
    return runs.apply(matters, axis=1).astype(bool)


def with_instances(runs: pd.DataFrame) -> pd.DataFrame:
    """`instance_seed`: the seed where it draws another instance, else -1 (every seed the same
    instance, so its runs are repeats of it: study.paired gives them a repeats interval)."""
    if "instance_seed" in runs or "seed" not in runs:
        return runs
    runs = runs.assign(**{c: None for c in ("dataset_params", "init") if c not in runs})
    return runs.assign(instance_seed=runs["seed"].where(seed_matters(runs), -1))


def with_keys(runs: pd.DataFrame) -> pd.DataFrame:
    """`config_key`: each run's configuration, from its spec (study.sweep.grid.configurations)."""

    if "config_key" in runs:
        return runs
    return runs.assign(config_key=configurations(runs, load_kind("regression")))


LABELS = ("method", "algorithm", "engine", "data", "config_key", "config")


def label_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """Add the label columns every figure groups by. Rows labelled already keep their labels:
    a label that tells configurations apart depends on the table it was made in, so a figure
    labels the whole table once and its subsets carry those labels (relabelling a subset made
    'gd mine [chunk=1]' plain 'gd mine' where its sibling was filtered out)."""
    if set(LABELS) <= set(runs.columns):
        return runs
    runs = runs.assign(**{c: None for c in ("feed", "xla", "device", "formulation",
                                            "hyperparameters", "dataset_params") if c not in runs})
    if runs.empty:
        return runs.assign(**{c: pd.Series(dtype=str) for c in LABELS},
                           instance_seed=pd.Series(dtype=float))
    runs = with_instances(runs)
    runs["method"] = runs.apply(method_label, axis=1)
    runs["algorithm"] = runs.apply(algorithm_label, axis=1)
    runs["engine"] = runs.apply(engine_label, axis=1)
    runs["data"] = runs.apply(dataset_label, axis=1)
    shared = runs.groupby("data")["dataset_params"].transform(lambda p: p.nunique() > 1)
    if shared.any():  # one file read with other columns: the short name would merge them
        runs.loc[shared, "data"] = runs[shared].apply(full_dataset_label, axis=1)
    runs = with_keys(runs)  # one label per configuration on a data set (what else differs)
    runs["config"] = distinct_labels(runs["method"] + " " + runs["engine"] + " " + runs["dtype"],
                                     runs["config_key"], runs["data"])
    return runs


def headline_data(runs: pd.DataFrame) -> str | None:
    """The original question's data set (raw eve) when the results hold it, else the first."""
    ran = runs[runs["status"] != "skipped"]
    if ran.empty:
        return None
    labelled = label_runs(ran)
    raw_eve = labelled[(labelled["dataset"] == "eve") & ~labelled["dataset_params"].map(
        lambda p: json.loads(p).get("standardize", False) if isinstance(p, str) else False)]
    return (raw_eve if len(raw_eve) else labelled)["data"].sort_values().iloc[0]
