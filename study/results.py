"""Reading a study's results folder for summaries, figures and reports.

The tables are checked against the study's schema, and a comparison is only ever made within
one code fingerprint and one environment fingerprint: a folder mixing them (`--keep-stale`) is
refused until re-measured. A folder measured by code that has changed since is read, with a
note in its provenance line naming the files that differ now.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pandas as pd

from convergence_study.errors import InputError
from study.output import check_kind, check_output_path, reading, write_text_atomic
from study.sweep.fingerprint import ROOT, fingerprint_of, manifest
from study.sweep.plugin import ENGINE_STATUSES, STUDIES, load_kind
from study.sweep.schema import read_table

ENGINE_FAILURES = ("error", "timeout", "oom")  # the engine's statuses of a run that failed


@dataclass
class Results:
    folder: Path
    kind: str
    plugin: ModuleType
    runs: pd.DataFrame
    code: str  # one fingerprint of every source file behind the rows (one version each)
    changed: tuple[str, ...] = ()  # of those files, the ones that differ in the code here now

    def table(self, name: str) -> pd.DataFrame:
        """A side table (traces, calls), checked like the runs table, and refused when it
        holds runs the runs table does not (copied from another folder)."""
        path = self.folder / f"{name}.parquet"
        try:
            table = read_table(path, self.plugin.SIDE_TABLES[name],
                               recover=recovery(self.folder))
        except InputError:
            self.all_failed(name)
            raise
        if table.empty:
            self.all_failed(name)
        check_times(table, path, recovery(self.folder))
        foreign = set(table["run_id"].dropna()) - set(self.runs["run_id"])
        if foreign:
            raise InputError(f"'{path}' holds {len(foreign)} runs that '{self.folder}/"
                             f"runs.parquet' does not (e.g. {sorted(foreign)[0]}): the two "
                             f"tables do not belong together; {recovery(self.folder)}")
        return table

    def all_failed(self, name: str) -> None:
        """Where every run failed (a timeout too, with no rows to draw), say so and where
        their logs are: "run again" alone would repeat the failure."""
        statuses = self.runs["status"]
        failed = statuses.isin({*self.plugin.FAILED_STATUSES, *ENGINE_FAILURES})
        if failed.any() and (failed | (statuses == "skipped")).all():
            counts = ", ".join(f"{n} {s}" for s, n in statuses.value_counts().items())
            how = "failed" if failed.all() else "failed or was skipped"
            raise InputError(f"every run in '{self.folder}' {how} ({counts}), so there is no "
                             f"{name} table to read: their logs are in '{self.folder / 'logs'}' "
                             "(<run_id>.log); fix the cause, then run the config again")

    def provenance(self) -> str:
        """One line naming what the numbers are based on."""
        measured = self.runs[self.runs["code_fingerprint"].notna()]
        commits = sorted({str(c) for c in measured.get("env_git_commit", pd.Series()).dropna()})
        return (f"code fingerprint {self.code}, environment fingerprint "
                f"{_only(measured['env_fingerprint'])}"
                + (f", git commit {', '.join(c[:12] for c in commits)}" if commits else "")
                + older_code_note(self.changed, self.folder))


def recovery(folder: Path) -> str:
    return (f"run `convergence-study run CONFIG --out {folder}` again to rebuild it from "
            f"{folder / 'runs'}")


def owner(folder: Path, key: str):
    """A value of the folder's study.json (the config that owns it), None where unreadable."""
    try:
        return json.loads((folder / "study.json").read_text()).get(key)
    except (OSError, ValueError, AttributeError):
        return None


def study_kind(folder: Path, expected: str | None = None) -> str:
    check_kind(folder / "study.json")  # a FIFO there would hold every reader forever
    kind = owner(folder, "kind")
    if kind is None and (folder / "runs.parquet").is_file():
        try:
            kinds = pd.read_parquet(folder / "runs.parquet", columns=["kind"])["kind"].dropna()
            kind = kinds.iloc[0] if len(kinds) else None
        except Exception:  # noqa: BLE001 -- read_table names the damage below
            kind = None
    kind = kind or expected
    if kind not in STUDIES:
        raise InputError(f"'{folder}' is not a study results folder (no study.json and no "
                         f"readable runs.parquet); run `convergence-study run CONFIG` first")
    if expected is not None and kind != expected:
        raise InputError(f"'{folder}' holds a {kind} study, not {expected}")
    return kind


def load(folder, expected_kind: str | None = None) -> Results:
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(f"no results folder at '{folder}'; run `convergence-study run CONFIG` "
                         "first")
    kind = study_kind(folder, expected_kind)
    plugin = load_kind(kind)
    runs = read_table(folder / "runs.parquet", plugin.SCHEMA, recover=recovery(folder))
    check_rows(runs, plugin, folder / "runs.parquet", recovery(folder))
    check_belongs(runs, folder)
    versions = code_versions(runs, folder)
    code = check_one_fingerprint(runs, folder, versions)
    note_inputs(folder, versions)
    return Results(folder, kind, plugin, runs, code, changed_since(versions))


def note_inputs(folder: Path, versions: dict) -> None:
    """No output of a command reading the folder may replace its config or the data and model
    files its rows hashed."""
    source = owner(folder, "source")
    reading(folder, source if isinstance(source, str) else None,
            *(path for path in versions if Path(path).is_absolute()))


def check_rows(runs: pd.DataFrame, plugin, path, recover: str) -> None:
    """Refuse rows no sweep writes: a run id twice, an unknown status, a negative time."""
    twice = runs["run_id"][runs["run_id"].duplicated()].dropna()
    if len(twice):
        times = int(runs["run_id"].eq(twice.iloc[0]).sum())
        raise InputError(f"'{path}' holds run {twice.iloc[0]} {times} times (each run is one "
                         f"row): the table was edited or assembled twice; {recover}")
    allowed = (*plugin.MEASURE_STATUSES, *ENGINE_STATUSES)
    unknown = sorted({str(s) for s in runs["status"].dropna()} - set(allowed))
    if unknown or runs["status"].isna().any():
        shown = repr(unknown[0]) if unknown else "no status"
        raise InputError(f"'{path}': column status holds {shown}, not a status of the "
                         f"{plugin.KIND} study ({', '.join(allowed)}); {recover}")
    check_times(runs, path, recover)


def check_times(table: pd.DataFrame, path, recover: str) -> None:
    """Refuse a negative time in any column of seconds: no clock runs back."""
    for column in table.columns:
        if "seconds" in str(column).split("_"):
            values = pd.to_numeric(table[column], errors="coerce")
            if (values < 0).any():
                row = table[values < 0].iloc[0]
                raise InputError(f"'{path}': column {column} holds "
                                 f"{values[values < 0].iloc[0]:g} (run {row['run_id']}): a time "
                                 f"cannot be negative; {recover}")


def check_belongs(runs: pd.DataFrame, folder: Path) -> None:
    """Refuse a runs table that is not this folder's: rows of another study than study.json
    names, or rows with no run file of their own in runs/ (copied in from elsewhere)."""
    name = owner(folder, "name")
    if name is not None and "study" in runs:
        others = sorted({str(s) for s in runs["study"].dropna()} - {name})
        if others:
            raise InputError(f"'{folder}/runs.parquet' holds rows of study '{others[0]}', but "
                             f"the folder belongs to study '{name}' (study.json): the table "
                             f"was copied from another folder; {recovery(folder)}")
    runs_dir = folder / "runs"
    if runs_dir.is_dir():
        on_file = {p.name.split(".", 1)[0] for p in runs_dir.glob("*.parquet")}
        missing = sorted(set(runs["run_id"].dropna()) - on_file)
        if missing:
            raise InputError(f"'{folder}/runs.parquet' holds {len(missing)} rows with no run "
                             f"file in '{runs_dir}' (e.g. {missing[0]}): they were not measured "
                             f"into this folder; {recovery(folder)}")


def code_versions(runs: pd.DataFrame, folder) -> dict[str, set]:
    """Each source file behind the measured rows -> its digests (fingerprints/ lists them)."""
    measured = runs[runs["status"] != "skipped"]
    versions: dict[str, set] = {}
    for code in measured["code_fingerprint"].dropna().unique():
        try:
            files = json.loads(check_kind(Path(folder) / "fingerprints" / f"{code}.json")
                               .read_text())  # a FIFO: said, not waited on
        except (OSError, ValueError):
            raise InputError(
                f"'{folder}' has rows with code fingerprint {code}, whose file list is not in "
                f"{Path(folder) / 'fingerprints'}: nothing says which code measured them; run "
                "`convergence-study run CONFIG` (without --keep-stale) to re-measure them") \
                from None
        for path, digest in files.items():
            versions.setdefault(path, set()).add(digest)
    return versions


def check_one_fingerprint(runs: pd.DataFrame, folder, versions: dict[str, set]) -> str:
    """Refuse a table that mixes versions of any source file, or environments."""
    measured = runs[runs["status"] != "skipped"]
    mixed = sorted(path for path, digests in versions.items() if len(digests) > 1)
    if mixed:
        raise InputError(f"'{folder}' mixes rows measured by two versions of "
                         f"{', '.join(mixed[:4])}{' ...' if len(mixed) > 4 else ''}; "
                         "comparisons need one: run `convergence-study run CONFIG` without "
                         "--keep-stale or --only to re-measure the stale rows")
    environments = measured["env_fingerprint"].dropna().unique()
    if len(environments) > 1:
        raise InputError(f"'{folder}' mixes rows measured in {len(environments)} environments "
                         f"({', '.join(sorted(map(str, environments)))}); comparisons need one: "
                         "run `convergence-study run CONFIG` here to re-measure the others")
    return fingerprint_of({path: next(iter(digests)) for path, digests in versions.items()}) \
        if versions else "unknown"


def changed_since(versions: dict[str, set]) -> tuple[str, ...]:
    """The files behind the rows that differ here now (or are gone)."""
    changed = []
    for path, digests in sorted(versions.items()):
        try:
            now = manifest([path])[path] if (ROOT / path).is_file() else None
        except OSError:
            now = None
        if now not in digests:
            changed.append(path)
    return tuple(changed)


def older_code_note(changed, folder) -> str:
    if not changed:
        return ""
    names = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
    return (f"; NOTE: measured by older code, {names} now differ{'s' if len(changed) == 1 else ''}"
            f" (run `convergence-study run CONFIG --out {folder}` to re-measure)")


def _only(values: pd.Series) -> str:
    unique = sorted({str(v) for v in values.dropna()})
    return "/".join(unique) or "none"


# ---- the summarize command --------------------------------------------------------------------

def add_arguments(parser) -> None:
    parser.add_argument("results", help="a results folder, e.g. results/regression")
    parser.add_argument("--csv", help="also write the summary table as CSV")


def main(args) -> int:
    results = load(args.results)  # first: the inputs it notes are checked against --csv
    if args.csv:
        check_output_path(args.csv, "--csv")
    print(results.plugin.summary(results.runs))
    print(f"based on {results.provenance()}")
    if args.csv:
        table = results.plugin.summary_table(results.runs)
        if table is None:
            raise InputError(f"--csv: a {results.kind} study has no summary table to write")
        write_text_atomic(table.to_csv(index=False), args.csv)
    return 0
