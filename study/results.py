"""Reading a study's results folder for summaries, figures and reports.

The tables are checked against the study's declared schema (a damaged, empty or foreign file is
named in one line, with how to recover), and a comparison is only ever made within one code
fingerprint and one environment fingerprint: a folder whose rows were measured by different code
or in different environments (kept with `--keep-stale`) is refused until it is re-measured.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pandas as pd

from datasets.errors import InputError
from study.sweep.plugin import KINDS, load_kind
from study.sweep.schema import read_table


@dataclass
class Results:
    folder: Path
    kind: str
    plugin: ModuleType
    runs: pd.DataFrame

    def table(self, name: str) -> pd.DataFrame:
        """A side table (traces, calls), checked like the runs table."""
        return read_table(self.folder / f"{name}.parquet", self.plugin.SIDE_TABLES[name],
                          recover=recovery(self.folder))

    def provenance(self) -> str:
        """One line naming what the numbers are based on."""
        measured = self.runs[self.runs["code_fingerprint"].notna()]
        commits = sorted({str(c) for c in measured.get("env_git_commit", pd.Series()).dropna()})
        return (f"code fingerprint {_only(measured['code_fingerprint'])}, environment "
                f"fingerprint {_only(measured['env_fingerprint'])}"
                + (f", git commit {', '.join(c[:12] for c in commits)}" if commits else ""))


def recovery(folder: Path) -> str:
    return (f"run `python -m study run CONFIG --out {folder}` again to rebuild it from "
            f"{folder / 'runs'}")


def study_kind(folder: Path, expected: str | None = None) -> str:
    try:
        kind = json.loads((folder / "study.json").read_text()).get("kind")
    except (OSError, ValueError, AttributeError):
        kind = None
    if kind is None and (folder / "runs.parquet").is_file():
        try:
            kinds = pd.read_parquet(folder / "runs.parquet", columns=["kind"])["kind"].dropna()
            kind = kinds.iloc[0] if len(kinds) else None
        except Exception:  # noqa: BLE001 -- read_table names the damage below
            kind = None
    kind = kind or expected
    if kind not in KINDS:
        raise InputError(f"'{folder}' is not a study results folder (no study.json and no "
                         f"readable runs.parquet); run `python -m study run CONFIG` first")
    if expected is not None and kind != expected:
        raise InputError(f"'{folder}' holds a {kind} study, not {expected}")
    return kind


def load(folder, expected_kind: str | None = None) -> Results:
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(f"no results folder at '{folder}'; run `python -m study run CONFIG` "
                         "first")
    kind = study_kind(folder, expected_kind)
    plugin = load_kind(kind)
    runs = read_table(folder / "runs.parquet", plugin.SCHEMA, recover=recovery(folder))
    check_one_fingerprint(runs, folder)
    return Results(folder, kind, plugin, runs)


def check_one_fingerprint(runs: pd.DataFrame, folder) -> None:
    """Refuse a table whose measured rows come from more than one code or environment."""
    measured = runs[runs["status"] != "skipped"]
    for column, what in (("code_fingerprint", "code"), ("env_fingerprint", "environments")):
        values = measured[column].dropna().unique()
        if len(values) > 1:
            raise InputError(f"'{folder}' mixes rows measured by {len(values)} different "
                             f"{what} ({column}: {', '.join(sorted(map(str, values)))}); "
                             "comparisons need one: run `python -m study run CONFIG` without "
                             "--keep-stale to re-measure the stale rows")


def _only(values: pd.Series) -> str:
    unique = sorted({str(v) for v in values.dropna()})
    return unique[0] if len(unique) == 1 else ("none" if not unique else "/".join(unique))


# ---- the summarize command --------------------------------------------------------------------

def add_arguments(parser) -> None:
    parser.add_argument("results", help="a results folder, e.g. results/regression")
    parser.add_argument("--csv", help="also write the summary table as CSV")


def main(args) -> int:
    from study.output import check_output_path, write_text_atomic

    if args.csv:
        check_output_path(args.csv)
    results = load(args.results)
    print(results.plugin.summary(results.runs))
    print(f"based on {results.provenance()}")
    if args.csv:
        from study.regression.summary import summarize

        if results.kind != "regression":
            raise InputError("--csv writes the regression summary table only")
        write_text_atomic(summarize(results.runs).to_csv(index=False), args.csv)
    return 0
