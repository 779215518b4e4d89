"""Readers of results (issue 17): a damaged, empty, mistyped or missing table is named in one
line with how to recover, exit 2, from summarize, figures and report alike."""

import pandas as pd
import pytest

from study.__main__ import main


def truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


DAMAGE = {
    "truncated runs": (lambda f: truncate(f / "runs.parquet"), "runs.parquet' is damaged"),
    "zero-row runs": (lambda f: pd.read_parquet(f / "runs.parquet").head(0).to_parquet(
        f / "runs.parquet"), "holds no rows"),
    "runs without status": (lambda f: pd.read_parquet(f / "runs.parquet").drop(
        columns="status").to_parquet(f / "runs.parquet"), "columns ['status'] are missing"),
    "status not text": (lambda f: pd.read_parquet(f / "runs.parquet").assign(status=3).to_parquet(
        f / "runs.parquet"), "column 'status' holds 3 (int"),
    "seconds not numbers": (lambda f: pd.read_parquet(f / "runs.parquet").assign(
        seconds="abc").to_parquet(f / "runs.parquet"), "has a column of the wrong type"),
    "no runs table": (lambda f: (f / "runs.parquet").unlink(), "no runs table at"),
    "a foreign table": (lambda f: pd.DataFrame({"x": [1]}).to_parquet(f / "runs.parquet"),
                        "is not a runs table"),
}



def commands(root):
    folder = str(root / "results" / "regression")
    return [["summarize", folder],
            ["figures", "regression", "--results", folder, "--out", str(root / "fig")],
            ["report", "--results", str(root / "results"), "--studies", "regression",
             "--figures", str(root / "fig"), "--out", str(root / "rep")]]


@pytest.mark.parametrize("name", list(DAMAGE))
def test_a_damaged_runs_table_is_named_with_how_to_recover(results, capsys, name):
    damage, message = DAMAGE[name]
    damage(results / "results" / "regression")
    for args in commands(results):
        assert main(args) == 2, args
        err = capsys.readouterr().err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and message in lines[0] and "Traceback" not in err, err
        assert "runs.parquet" in lines[0] and "convergence-study run" in lines[0]
    assert not (results / "fig").exists() and not (results / "rep").exists()


@pytest.mark.parametrize("damage, message", [
    (lambda p: p.write_bytes(b"garbage"), "traces.parquet' is damaged"),
    (lambda p: pd.read_parquet(p).drop(columns="iteration").to_parquet(p),
     "columns ['iteration'] are missing"),
])
def test_a_damaged_traces_table_stops_the_figures(results, capsys, damage, message):
    damage(results / "results" / "regression" / "traces.parquet")
    assert main(commands(results)[1]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and message in err


@pytest.mark.parametrize("layout", ["missing", "empty", "half-written"])
def test_report_figures_summarize_on_no_results_exit_2(tmp_path, capsys, layout):
    folder = tmp_path / "results" / "regression"
    if layout != "missing":
        folder.mkdir(parents=True)
    if layout == "half-written":
        (folder / "runs").mkdir()
        (folder / "runs" / "abc.parquet").write_bytes(b"PAR1")
    for args in commands(tmp_path):
        assert main(args) == 2, args
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "convergence-study run" in err
    assert not (tmp_path / "rep").exists()
