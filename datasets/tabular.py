"""The user's own CSV or Parquet file, with feature and label columns chosen by name.

Least squares by default; objective="logistic" takes one binary label column. The counterpart
of the original `network_cluster(data_frame, feature_cols, label_cols)`: every
column is checked by name before any optimizer sees it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from datasets.errors import InputError
from datasets.problem import Problem

READERS = {".csv": pd.read_csv, ".parquet": pd.read_parquet, ".pq": pd.read_parquet}


def read_table(path) -> pd.DataFrame:
    path = Path(path)
    if not path.exists():
        raise InputError(f"tabular: file '{path}' does not exist")
    if path.is_dir():
        raise InputError(f"tabular: '{path}' is a directory, not a CSV or Parquet file")
    reader = READERS.get(path.suffix.lower())
    if reader is None:
        raise InputError(f"tabular: '{path}' has suffix '{path.suffix}'; allowed: "
                         f"{', '.join(READERS)}")
    try:
        frame = reader(path)
    except pd.errors.EmptyDataError:
        raise InputError(f"tabular: file '{path}' is empty") from None
    except Exception as exc:  # a parser's own message names the broken spot
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"tabular: cannot read '{path}': {first_line}") from None
    check_unique_columns(frame, f"'{path}'")
    return frame


def check_unique_columns(frame: pd.DataFrame, source: str) -> None:
    """pandas renames a CSV's repeated header 'a' to 'a.1': treat that as the duplicate it is."""
    names = [str(c) for c in frame.columns]
    repeated = {c for c in names if names.count(c) > 1}
    repeated |= {c for c in names if (m := re.fullmatch(r"(.+)\.\d+", c)) and m.group(1) in names}
    if repeated:
        raise InputError(f"tabular: {source} has duplicate column names {sorted(repeated)}")


def select_columns(frame: pd.DataFrame, columns, role: str, source: str) -> pd.DataFrame:
    columns = [columns] if isinstance(columns, str) else list(columns or [])
    if not columns:
        raise InputError(f"tabular: no {role} columns chosen; pass {role}=[...]")
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(f"tabular: {role} column '{missing[0]}' is not in {source}; "
                         f"columns present: {list(frame.columns)}")
    chosen = frame[columns]
    for column in columns:
        dtype = chosen[column].dtype
        if pd.api.types.is_bool_dtype(dtype) or not pd.api.types.is_numeric_dtype(dtype):
            example = f", e.g. {chosen[column].iloc[0]!r}" if len(chosen) else ""
            raise InputError(f"tabular: {role} column '{column}' is not numeric "
                             f"(dtype {dtype}{example})")
    return chosen


def from_frame(frame: pd.DataFrame, features, labels, *, standardize: bool = False,
               intercept: bool = True, source: str = "the data frame",
               params: dict | None = None, objective: str = "least-squares",
               lam: float | None = None) -> Problem:
    check_unique_columns(frame, source)
    X = select_columns(frame, features, "feature", source)
    y = select_columns(frame, labels, "label", source)
    overlap = set(X.columns) & set(y.columns)
    if overlap:
        raise InputError(f"tabular: column '{sorted(overlap)[0]}' is both a feature and a label")
    return Problem.from_arrays(
        X.to_numpy(float), y.to_numpy(float), name="tabular",
        params=params or {"features": list(X.columns), "labels": list(y.columns)},
        feature_names=tuple(X.columns), label_names=tuple(y.columns),
        intercept=intercept, standardize=standardize, objective=objective, lam=lam,
    )


def validate_params(path, features, labels, standardize: bool = False,
                    intercept: bool = True, objective: str = "least-squares",
                    lam: float | None = None) -> None:
    """The cheap checks a study config can make before anything runs."""
    if not Path(path).is_file():
        raise InputError(f"tabular: file '{path}' does not exist or is not a file")


def load(path, features, labels, standardize: bool = False, intercept: bool = True,
         objective: str = "least-squares", lam: float | None = None) -> Problem:
    """objective 'logistic': one binary label column ({-1, +1} or {0, 1}); lam the L2 penalty
    (default 1/n for logistic, none for least squares)."""
    frame = read_table(path)
    if frame.empty:
        raise InputError(f"tabular: file '{path}' has zero rows")
    params = {"path": str(path), "features": list(features) if not isinstance(features, str)
              else [features], "labels": list(labels) if not isinstance(labels, str) else [labels]}
    return from_frame(frame, features, labels, standardize=standardize, intercept=intercept,
                      source=f"'{path}'", params=params, objective=objective, lam=lam)
