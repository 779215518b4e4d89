"""The names a reader sees for a run's method, engine and data set, the same in every figure,
table and sentence (kept apart from the figures so that summaries need no plotting stack)."""

from __future__ import annotations

import json

import pandas as pd

from optimizers.backends.registry import BACKENDS


def method_label(row) -> str:
    """optimizer(hyperparameters) as a short legend entry; a run under the original program's
    own rule (no target, stop when the RMSE repeats) says so, as does a tuned learning rate."""
    hp = json.loads(row["hyperparameters"]) if isinstance(row["hyperparameters"], str) else {}
    tuned = row.get("tuning") == "tuned"
    inner = ",".join(f"{k}={v}" + (" tuned" if tuned and k == "learning_rate" else "")
                     for k, v in hp.items() if v is not None)
    label = f"{row['optimizer']}({inner})" if inner else row["optimizer"]
    stopping = row.get("stopping")
    rules = json.loads(stopping) if isinstance(stopping, str) else {}
    if rules.get("exact_repeat") and rules.get("tol") is None:
        label += " [original rule]"
    return label


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
    params = json.loads(row["dataset_params"]) if isinstance(row["dataset_params"], str) else {}
    inner = ",".join(f"{k}={v}" for k, v in params.items())
    return f"{row['dataset']}({inner})" if inner else row["dataset"]


def label_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """Add the label columns every figure groups by."""
    runs = runs.copy()
    for column in ("feed", "xla", "device", "formulation", "hyperparameters", "dataset_params"):
        if column not in runs:
            runs[column] = None
    if runs.empty:
        return runs.assign(method=pd.Series(dtype=str), engine=pd.Series(dtype=str),
                           config=pd.Series(dtype=str), data=pd.Series(dtype=str))
    runs["method"] = runs.apply(method_label, axis=1)
    runs["engine"] = runs.apply(engine_label, axis=1)
    runs["config"] = runs["method"] + " " + runs["engine"] + " " + runs["dtype"]
    runs["data"] = runs.apply(dataset_label, axis=1)
    return runs
