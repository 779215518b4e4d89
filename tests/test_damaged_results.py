"""Readers of results (issue 17): a damaged, empty, mistyped or missing table is named in one
line with how to recover, exit 2, from summarize, figures and report alike."""

import os

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


# ---- a fixed name of the wrong kind (issue 43, case 8) ----------------------------------------

SWEEP = """name = "t"
seeds = [0]
run_timeout = 60
[stopping]
max_iter = 50
[[datasets]]
name = "synthetic"
n = 100
[[optimizers]]
name = "gd"
[[backends]]
name = "numpy"
"""

WRONG_KINDS = {
    "directory": lambda p: p.mkdir(),
    "file": lambda p: p.write_text("x"),
    "FIFO": lambda p: os.mkfifo(p),
    "dangling symlink": lambda p: p.symlink_to(p.parent / "nowhere"),
}
# name in a results folder -> whether the toolkit makes it a folder
FIXED_NAMES = {".lock": False, "study.json": False, "runs.parquet": False,
               "traces.parquet": False, "runs": True, "logs": True, "cache": True,
               "fingerprints": True, "runs/.pending": True, "runs/damaged": True,
               "logs/server-numpy.log": False}
CASES = [(name, kind) for name, folder in FIXED_NAMES.items() for kind in WRONG_KINDS
         if kind != ("directory" if folder else "file")]


@pytest.mark.parametrize("name, kind", CASES)
def test_a_fixed_name_of_the_wrong_kind_is_one_line_before_any_run(tmp_path, capsys, name,
                                                                   kind):
    config = tmp_path / "t.toml"
    config.write_text(SWEEP)
    out = tmp_path / "r"
    (out / name).parent.mkdir(parents=True, exist_ok=True)
    WRONG_KINDS[kind](out / name)
    assert main(["run", str(config), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert f"'{out / name}' is a" in err and "remove it" in err
    assert not list((out / "runs").glob("*.parquet")) if (out / "runs").is_dir() else True


def test_readers_say_a_fifo_instead_of_waiting_on_it(results, capsys):
    from convergence_study.errors import InputError
    from study.results import code_versions
    from study.sweep.fingerprint import explain

    folder = results / "results" / "regression"
    (folder / "study.json").unlink()
    os.mkfifo(folder / "study.json")
    for args in commands(results):
        assert main(args) == 2, args  # not a wait for a writer that never comes
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "study.json' is a FIFO" in err, err
    (folder / "fingerprints").mkdir()
    os.mkfifo(folder / "fingerprints" / "abc.json")
    runs = pd.DataFrame({"status": ["converged"], "code_fingerprint": ["abc"]})
    with pytest.raises(InputError, match="abc, whose file list is not in"):
        code_versions(runs, folder)
    assert "abc (its file list is not stored)" in explain(folder / "fingerprints", "abc", {})


@pytest.mark.parametrize("kind", ["directory", "FIFO", "dangling symlink"])
@pytest.mark.parametrize("where", ["cache", "entry", "key.json"])
def test_a_cache_entry_of_the_wrong_kind_is_one_line(tmp_path, kind, where):
    from convergence_study.errors import InputError
    from study.sweep import cache

    key = {"x": 1}
    entry = tmp_path / "cache" / cache.key_digest(key)
    path = {"cache": tmp_path / "cache", "entry": entry, "key.json": entry / "key.json"}[where]
    path.parent.mkdir(parents=True, exist_ok=True)
    WRONG_KINDS["file" if kind == "directory" and where != "key.json" else kind](path)
    with pytest.raises(InputError, match=f"'{path}' is a .*; remove it"):
        cache.entry(tmp_path / "cache", key, lambda folder: None)
