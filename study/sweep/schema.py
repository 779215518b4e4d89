"""Declared, typed columns: the one place a results table's shape is written down.

Every row a study writes goes through `Schema.row` (an undeclared column is a programming error),
every table through `Schema.frame` (declared order and dtypes), and every reader through
`read_table` (a damaged, empty or foreign file is named in one line). Families of columns whose
names depend on the configuration (`hp_*`, `data_*`, `stop_*`, `env_*`) are declared by prefix.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from convergence_study.errors import InputError

KINDS = ("str", "int", "float", "bool", "any")
PANDAS_DTYPES = {"str": "object", "int": "Int64", "float": "float64", "bool": "boolean"}
ARROW_TYPES = {"str": pa.string(), "int": pa.int64(), "float": pa.float64(), "bool": pa.bool_()}


class DamagedResults(InputError):
    """A results file that cannot be read as the table it should be."""


@dataclass(frozen=True)
class Column:
    name: str
    kind: str
    doc: str = ""

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"column {self.name}: unknown kind {self.kind!r}")


@dataclass(frozen=True)
class Schema:
    """A table's columns in order, plus column families declared by prefix (kind "any")."""

    name: str
    columns: tuple[Column, ...]
    families: tuple[str, ...] = ()
    required: tuple[str, ...] = ("run_id",)
    # the spec's axes among the columns (a name ending in "_": a family), what a row without a
    # readable spec is grouped by (study.sweep.grid.configurations)
    axes: tuple[str, ...] = ()

    def __add__(self, other: Schema) -> Schema:
        names = {c.name for c in self.columns}
        clash = [c.name for c in other.columns if c.name in names]
        if clash:
            raise ValueError(f"schema {other.name}: columns {clash} are already declared")
        return Schema(other.name, self.columns + other.columns,
                      tuple(dict.fromkeys(self.families + other.families)),
                      tuple(dict.fromkeys(self.required + other.required)),
                      tuple(dict.fromkeys(self.axes + other.axes)))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def kind_of(self, name: str) -> str | None:
        column = self._by_name.get(name)
        if column is not None:
            return column.kind
        return "any" if name.startswith(self.families) and self.families else None

    @cached_property
    def _by_name(self) -> dict[str, Column]:
        return {c.name: c for c in self.columns}

    def row(self, values: dict) -> dict:
        """A complete row: every declared column (missing ones None), values of their kind."""
        unknown = [k for k in values if self.kind_of(k) is None]
        if unknown:
            raise ValueError(f"{self.name}: undeclared columns {unknown}; declare them in the "
                             "study's schema")
        out = {c.name: _coerce(values.get(c.name), c) for c in self.columns}
        out.update({k: v for k, v in values.items() if k not in out})
        return out

    def frame(self, rows) -> pd.DataFrame:
        """Rows (dicts or a DataFrame) as a table in declared order with declared dtypes."""
        if not isinstance(rows, pd.DataFrame):
            return self._from_rows([self.row(r) for r in rows])
        frame = rows
        data = {}  # one frame made at the end: setting ~150 columns one by one is slow
        for column in self.columns:
            series = frame[column.name] if column.name in frame else pd.Series(
                [None] * len(frame), index=frame.index, dtype=object)
            data[column.name] = _cast(series, column) if column.kind in PANDAS_DTYPES \
                else series
        for name in sorted(c for c in frame.columns if c not in self._by_name):
            data[name] = frame[name]
        return pd.DataFrame(data, index=frame.index)

    def table(self, rows) -> pa.Table:
        """Rows (dicts, or a DataFrame such as a run's trace) as an Arrow table in declared
        order and types: a run's own files, written without pandas (25 ms of every run's
        process through a DataFrame for its row, 2 ms this way; 3.3 ms against 0.9 for a
        trace). The file carries no pandas dtypes: readers cast through `frame`."""
        if isinstance(rows, pd.DataFrame):
            columns = {name: rows[name] for name in rows.columns}
        else:
            rows = [self.row(r) for r in rows]
            columns = {name: [r.get(name) for r in rows]
                       for name in dict.fromkeys(k for r in rows for k in r)}
        missing = [None] * len(rows)
        names = [*self.names, *sorted(n for n in columns if n not in self._by_name)]
        arrays = []
        for name in names:
            values = columns.get(name, missing)
            kind = self.kind_of(name)
            if kind == "str":
                _require_text(self._by_name[name], [v for v in values if not _missing(v)])
            arrays.append(pa.array(values, type=ARROW_TYPES.get(kind), from_pandas=True))
        return pa.table(arrays, names=names)

    def _from_rows(self, rows: list[dict]) -> pd.DataFrame:
        """Rows made by `row`: each column built once with its dtype (0.06 s saved a run)."""
        data = {}
        for column in self.columns:
            values = [r[column.name] for r in rows]
            if column.kind == "str":
                _require_text(column, [v for v in values if v is not None])
            data[column.name] = pd.Series(values, dtype=PANDAS_DTYPES.get(column.kind))
        for name in sorted({k for r in rows for k in r if k not in self._by_name}):
            data[name] = pd.Series([r.get(name) for r in rows])
        return pd.DataFrame(data)

    def check(self, frame: pd.DataFrame, source, recover: str = "") -> pd.DataFrame:
        """A table read from `source` has the required columns and declared kinds."""
        tail = f"; {recover}" if recover else ""
        missing = [c for c in self.required if c not in frame.columns]
        if missing:
            raise DamagedResults(f"'{source}' is not a {self.name} table: columns "
                                 f"{missing} are missing{tail}")
        try:
            return self.frame(frame)
        except (TypeError, ValueError) as exc:
            raise DamagedResults(f"'{source}' has a column of the wrong type: "
                                 f"{str(exc).splitlines()[0]}{tail}") from None


CONVERT = {"bool": bool, "int": int, "float": float}


def _coerce(value, column: Column):
    if column.kind == "any" or value is None:
        return value
    if _missing(value):
        return None
    return CONVERT[column.kind](value) if column.kind in CONVERT else value


def _missing(value) -> bool:
    """None, NaN, pd.NA or NaT (scalars only)."""
    try:
        return bool(pd.isna(value)) if np.ndim(value) == 0 else False
    except (TypeError, ValueError):
        return False


def _require_text(column: Column, values) -> None:
    """The values present in a text column are text."""
    for value in values:
        if not isinstance(value, str):
            raise ValueError(f"column '{column.name}' holds {value} ({type(value).__name__}) "
                             "where text belongs")


def _cast(series: pd.Series, column: Column) -> pd.Series:
    if series.dtype == PANDAS_DTYPES[column.kind] and (column.kind != "str" or all(
            v is None or isinstance(v, str) for v in series.to_numpy())):
        return series  # cast already (a table assembled from a scan's frame)
    if column.kind == "str":
        _require_text(column, series[series.notna()])
        return series.astype(object).where(series.notna(), None)
    if column.kind == "float":
        return pd.to_numeric(series, errors="raise").astype("float64")
    if column.kind == "int":
        values = pd.to_numeric(series, errors="raise")
        if values.dtype.kind == "f" and not np.all(np.isnan(values) | (values == np.round(values))):
            raise ValueError(f"column '{column.name}' holds non-integer numbers")
        return values.astype("Int64")
    if column.kind == "bool":
        return series.astype("boolean")
    return series


def side_table(name: str, *columns: Column, required: tuple[str, ...] = ()) -> Schema:
    """A per-run side table (traces, calls): the run's id, then its own columns."""
    return Schema(name, (Column("run_id", "str", "the run"), *columns),
                  required=("run_id", *required))


def read_table(path, schema: Schema, *, recover: str) -> pd.DataFrame:
    """Read a results table, or fail with one line naming the file and how to recover."""
    path = Path(path)
    if not path.is_file():
        raise DamagedResults(f"no {schema.name} table at '{path}'; {recover}")
    try:
        frame = pd.read_parquet(path)
    except Exception as exc:  # pyarrow raises several types for damaged files
        raise DamagedResults(f"'{path}' is damaged ({type(exc).__name__}: "
                             f"{str(exc).splitlines()[0] if str(exc) else ''}); {recover}") \
            from None
    if frame.empty:
        raise DamagedResults(f"'{path}' holds no rows; {recover}")
    return schema.check(frame, path, recover)


# The columns every study's rows have: identity, outcome, provenance, memory and noise.
ENGINE = Schema("runs", (
    Column("run_id", "str", "hash of the spec: the same spec is one run"),
    Column("study", "str", "the study's name (its results folder)"),
    Column("kind", "str", "the study plugin: regression, feedmode"),
    Column("spec", "str", "the spec as JSON: everything needed to repeat the run"),
    Column("repeat", "int", "repeat index of the same spec (repeats are interleaved)"),
    Column("status", "str", "how the run ended (the study lists its own; error, timeout, oom "
                            "and skipped come from the engine)"),
    Column("message", "str", "one line on how it ended"),
    Column("code_fingerprint", "str", "hash of the source files that measured this run"),
    Column("env_fingerprint", "str", "hash of the software and machine settings that matter "
                                     "for timing"),
    Column("env_memory_gb", "float", "the machine's physical memory, GiB (the other env_* "
                                     "columns: study.sweep.environment)"),
    Column("env_blas_kernel", "str", "the kernel the BLAS library chose for this CPU "
                                     "(threadpoolctl's architecture, e.g. SkylakeX, Haswell)"),
    Column("sweep_id", "str", "the `study run` invocation that measured the run"),
    Column("order_seed", "int", "seed of that invocation's shuffled run order"),
    Column("order_position", "int", "the run's place in that order"),
    Column("pid", "int", "the run's own process"),
    Column("worker_host", "str", "machine that ran it"),
    Column("worker_address", "str", "Dask worker address (None for a local sweep)"),
    Column("started_at", "str", "UTC start time"),
    Column("wall_seconds", "float", "the run's process from fork to exit, as the runner saw it"),
    Column("peak_memory_mb", "float", "peak resident memory the run added to what its process "
                                      "inherited (VmHWM reset at the start, minus VmRSS then)"),
    Column("inherited_memory_mb", "float", "resident memory inherited from the warm process"),
    Column("calibration_before_seconds", "float", "a fixed 32 MiB read pass just before the run"),
    Column("calibration_after_seconds", "float", "the same read pass just after the run"),
    Column("probe_seconds", "float", "wall time between the two calibrations"),
    Column("cpu_wait_fraction", "float", "time the run's threads waited for a CPU, over the "
                                         "probe window (schedstat run_delay)"),
    Column("others_cpu_cores", "float", "CPU time other processes used during the probe window, "
                                        "in cores (/proc/stat minus this process)"),
    Column("load_1m_before", "float", "1-minute load average before the run"),
    Column("load_1m_after", "float", "1-minute load average after the run"),
    Column("noisy", "bool", "measured while the machine was disturbed (see noisy_reason)"),
    Column("noisy_reason", "str", "which noise check flagged the run"),
), families=("env_",), required=("run_id", "status"))

# Engine columns that differ between two executions of the same run: the invocation, the
# process, the clock, memory and the machine's noise.
VARYING = ("sweep_id", "order_seed", "order_position", "pid", "started_at", "wall_seconds",
           "peak_memory_mb", "inherited_memory_mb", "calibration_before_seconds",
           "calibration_after_seconds", "probe_seconds", "cpu_wait_fraction",
           "others_cpu_cores", "load_1m_before", "load_1m_after", "noisy", "noisy_reason")
