"""The user's own CSV or Parquet file, with feature and label columns chosen by name.

Least squares by default; objective="logistic" takes one binary label column. The counterpart
of the original `network_cluster(data_frame, feature_cols, label_cols)`: every
column is checked by name before any optimizer sees it.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from convergence_study.errors import InputError, first_line
from datasets.declaration import Dataset
from datasets.files import check_input_file
from datasets.problem import OBJECTIVES, Problem
from datasets.values import boolean, choice, names, number
from datasets.values import path as path_value

READERS = {".csv": pd.read_csv, ".parquet": pd.read_parquet, ".pq": pd.read_parquet}


def check_file(path) -> Path:
    """A CSV or Parquet file that is there, a regular file and not empty."""
    path = check_input_file(path, "tabular")
    if path.suffix.lower() not in READERS:
        raise InputError(f"tabular: '{path}' has suffix '{path.suffix}'; allowed: "
                         f"{', '.join(READERS)}")
    if path.stat().st_size == 0:
        raise InputError(f"tabular: file '{path}' is empty")
    return path


def read_table(path) -> pd.DataFrame:
    path = check_file(path)
    reader = READERS[path.suffix.lower()]
    try:
        frame = reader(path)
    except pd.errors.EmptyDataError:
        raise InputError(f"tabular: file '{path}' is empty") from None
    except Exception as exc:  # a parser's own message names the broken spot
        raise InputError(f"tabular: cannot read '{path}': {first_line(exc)}") from None
    check_unique_columns(header(path) if reader is pd.read_csv else frame, f"'{path}'")
    return frame


def header(path) -> list[str]:
    """A CSV's column names as written (pandas renames a repeated 'a' to 'a.1', which cannot
    be told from a real column named 'a.1')."""
    try:
        first = pd.read_csv(path, header=None, nrows=1, dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:
        return []
    return list(first.iloc[0]) if len(first) else []


def columns_of(path) -> list[str]:
    """The column names of a CSV or Parquet file, read without its data."""
    path = Path(path)
    if path.suffix.lower() == ".csv":
        return header(path)
    import pyarrow.parquet as pq

    return list(pq.read_schema(path).names)


def check_unique_columns(frame_or_names, source: str) -> None:
    names = [str(c) for c in getattr(frame_or_names, "columns", frame_or_names)]
    repeated = {c for c in names if names.count(c) > 1}
    if repeated:
        raise InputError(f"tabular: {source} has duplicate column names {sorted(repeated)}")


def check_chosen(columns: list, present: list, role: str, source: str) -> None:
    """Each chosen column is there, and named once: a column chosen twice would be a duplicated
    column of X (or a frame where pandas expects a column)."""
    twice = next((c for i, c in enumerate(columns) if c in columns[:i]), None)
    if twice is not None:
        raise InputError(f"tabular: {role} column '{twice}' is named twice; name each column "
                         "once")
    missing = [c for c in columns if c not in present]
    if missing:
        raise InputError(f"tabular: {role} column '{missing[0]}' is not in {source}; "
                         f"columns present: {present}")


def as_list(columns) -> list:
    """Column names as a list: one name may stand alone."""
    return [columns] if isinstance(columns, str) else list(columns or [])


def check_disjoint(features, labels, where: str = "tabular") -> None:
    """A label that is also a feature is its own answer: any target is "reached". Checked on
    the names, before the file is read (regress and the studies' configs share it)."""
    both = [c for c in as_list(features) if c in as_list(labels)]
    if both:
        raise InputError(f"{where}: column '{both[0]}' is both a feature and a label")


def select_columns(frame: pd.DataFrame, columns, role: str, source: str) -> pd.DataFrame:
    columns = as_list(columns)
    if not columns:
        raise InputError(f"tabular: no {role} columns chosen; pass {role}=[...]")
    check_chosen(columns, list(frame.columns), role, source)
    chosen = frame[columns]
    for column in columns:
        dtype = chosen[column].dtype
        if pd.api.types.is_bool_dtype(dtype) or not pd.api.types.is_numeric_dtype(dtype):
            example = f", e.g. {first_non_number(chosen[column])!r}" if len(chosen) else ""
            raise InputError(f"tabular: {role} column '{column}' is not numeric "
                             f"(dtype {dtype}{example})")
    return chosen


def first_non_number(values: pd.Series):
    """The first value that is not a number (a CSV column with one 'abc' is all text)."""
    for value in values:
        if isinstance(value, bool) or value is None:
            return value
        try:
            float(value)
        except (TypeError, ValueError):
            return value
    return values.iloc[0]


def from_frame(frame: pd.DataFrame, features, labels, *, standardize: bool = False,
               intercept: bool = True, source: str = "the data frame",
               params: dict | None = None, objective: str = "least-squares",
               lam: float | None = None, name: str = "tabular") -> Problem:
    check_unique_columns(frame, source)
    X = select_columns(frame, features, "feature", source)
    y = select_columns(frame, labels, "label", source)
    check_disjoint(list(X.columns), list(y.columns))
    return Problem.from_arrays(
        X.to_numpy(float), y.to_numpy(float), name=name,
        params=params or {"features": list(X.columns), "labels": list(y.columns)},
        feature_names=tuple(X.columns), label_names=tuple(y.columns),
        intercept=intercept, standardize=standardize, objective=objective, lam=lam,
    )


def validate_params(path, features, labels, standardize: bool = False,
                    intercept: bool = True, objective: str = "least-squares",
                    lam: float | None = None) -> None:
    """The cheap checks a study config can make before anything runs (after DATASET's types):
    the file, and that the chosen columns exist, each named once (its header only is read)."""
    check_file(path)
    try:
        present = columns_of(path)
    except Exception as exc:  # noqa: BLE001 -- a damaged file is named; load says more
        raise InputError(f"tabular: cannot read the columns of '{path}' "
                         f"({type(exc).__name__})") from None
    for role, chosen in (("feature", features), ("label", labels)):
        check_chosen(as_list(chosen), present, role, f"'{path}'")
    check_disjoint(features, labels)


def load(path, features, labels, standardize: bool = False, intercept: bool = True,
         objective: str = "least-squares", lam: float | None = None) -> Problem:
    """objective 'logistic': one binary label column ({-1, +1} or {0, 1}); lam the L2 penalty
    (default 1/n for logistic, none for least squares)."""
    frame = read_table(path)
    if frame.empty:
        raise InputError(f"tabular: file '{path}' has zero rows")
    params = {"path": str(path), "features": as_list(features), "labels": as_list(labels)}
    return from_frame(frame, features, labels, standardize=standardize, intercept=intercept,
                      source=f"'{path}'", params=params, objective=objective, lam=lam)


DATASET = Dataset(
    "tabular", load,
    {"path": path_value(), "features": names(), "labels": names(), "standardize": boolean(),
     "intercept": boolean(), "objective": choice(*OBJECTIVES), "lam": number(0, optional=True)},
    seeded=False, objective=None, files=("path",), required=("path", "features", "labels"),
    check=validate_params)
