"""Issue 28: every label and every row stays true under hostile use. A changed input file is
re-measured, a table from another study or with fingerprints nobody can vouch for is refused,
and a tuning seed that rebuilds the measured instance is caught."""

import shutil

import numpy as np
import pandas as pd
import pytest

from study.__main__ import main

TABULAR = """
name = "mine"
seeds = [0]
[stopping]
tol = 1e-8
max_iter = 2000
[[datasets]]
name = "tabular"
path = "{path}"
features = ["a", "b"]
labels = ["y"]
[[optimizers]]
name = "{optimizer}"
[[backends]]
name = "numpy"
"""


def frame(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal(300), rng.standard_normal(300)
    return pd.DataFrame({"a": a, "b": b, "y": 2 * a - b + rng.standard_normal(300)})


def sweep(tmp_path, capsys, optimizer: str, *extra) -> tuple[int, str]:
    config = tmp_path / f"{optimizer}.toml"
    config.write_text(TABULAR.format(path=tmp_path / "data.csv", optimizer=optimizer))
    capsys.readouterr()
    code = main(["run", str(config), "--out", str(tmp_path / "results"), "--quiet",
                 "--no-adaptive", *extra])
    return code, capsys.readouterr().out


@pytest.mark.slow
def test_an_edited_data_file_is_measured_again(tmp_path, capsys):
    """Sweep, edit the CSV, add an optimizer, sweep again: the old row is stale (its data
    changed) and is measured again, so the table never holds two versions of the data."""
    frame(0).to_csv(tmp_path / "data.csv", index=False)
    assert sweep(tmp_path, capsys, "lbfgs")[0] == 0
    first = pd.read_parquet(tmp_path / "results" / "runs.parquet")
    frame(1).to_csv(tmp_path / "data.csv", index=False)
    config = tmp_path / "lbfgs.toml"  # the same config, grown by one optimizer
    config.write_text(TABULAR.format(path=tmp_path / "data.csv", optimizer="lbfgs")
                      + '[[optimizers]]\nname = "gd"\n')
    capsys.readouterr()
    assert main(["run", str(config), "--out", str(tmp_path / "results"), "--quiet",
                 "--no-adaptive"]) == 0
    out = capsys.readouterr().out
    assert "1 to measure again: stale: changed " + str(tmp_path / "data.csv") in out
    runs = pd.read_parquet(tmp_path / "results" / "runs.parquet")
    assert len(runs) == 2 and runs["f_star"].nunique() == 1  # one data set, measured anew
    assert runs["f_star"].iloc[0] != first["f_star"].iloc[0]
    assert main(["summarize", str(tmp_path / "results")]) == 0  # one version of every file


def two_folders(tmp_path, capsys):
    """Two small results folders of the same kind: 'mine' (least squares) and 'logit'."""
    frame(0).to_csv(tmp_path / "data.csv", index=False)
    assert sweep(tmp_path, capsys, "lbfgs")[0] == 0
    logit = tmp_path / "logit.toml"
    logit.write_text(TABULAR.format(path=tmp_path / "data.csv", optimizer="lbfgs")
                     .replace('name = "mine"', 'name = "logit"')
                     .replace('name = "tabular"', 'name = "synthetic-logistic"\nn = 300')
                     .replace(f'path = "{tmp_path / "data.csv"}"\nfeatures = ["a", "b"]\n'
                              'labels = ["y"]\n', ""))
    assert main(["run", str(logit), "--out", str(tmp_path / "logit"), "--quiet",
                 "--no-adaptive"]) == 0
    capsys.readouterr()
    return tmp_path / "results", tmp_path / "logit"


@pytest.mark.slow
@pytest.mark.parametrize("command", ["summarize", "figures"])
def test_a_table_or_traces_from_another_study_are_refused(tmp_path, capsys, command):
    mine, logit = two_folders(tmp_path, capsys)

    def ask() -> tuple[int, str]:
        args = (["summarize", str(mine)] if command == "summarize" else
                ["figures", "regression", "--results", str(mine), "--out", str(tmp_path / "f")])
        code = main(args)
        return code, capsys.readouterr().err

    assert ask()[0] == 0
    shutil.copy(mine / "runs.parquet", tmp_path / "saved.parquet")
    shutil.copy(logit / "runs.parquet", mine / "runs.parquet")
    code, err = ask()
    assert code == 2 and "holds rows of study 'logit', but the folder belongs to study 'mine'" \
        in err and len(err.strip().splitlines()) == 1
    if command == "figures":  # the traces: another folder's, beside this folder's own runs
        shutil.copy(tmp_path / "saved.parquet", mine / "runs.parquet")
        shutil.copy(logit / "traces.parquet", mine / "traces.parquet")
        code, err = ask()
        assert code == 2 and "do not belong together" in err


@pytest.mark.slow
def test_rows_without_their_run_files_are_refused(tmp_path, capsys):
    mine, _ = two_folders(tmp_path, capsys)
    runs = pd.read_parquet(mine / "runs.parquet")
    runs.assign(run_id="0123456789abcdef").to_parquet(mine / "runs.parquet")
    assert main(["summarize", str(mine)]) == 2
    assert "with no run file in" in capsys.readouterr().err


@pytest.mark.slow
def test_a_fingerprint_nobody_can_vouch_for_is_refused(tmp_path, capsys):
    """A row whose code fingerprint has no stored file list (set by hand, kept with
    --keep-stale) is refused by every reader, not skipped."""
    mine, _ = two_folders(tmp_path, capsys)
    for path in (mine / "runs").glob("*.parquet"):
        row = pd.read_parquet(path)
        row.assign(code_fingerprint="ffffffffffffffff").to_parquet(path)
    assert sweep(tmp_path, capsys, "lbfgs", "--keep-stale")[0] == 0
    for args in (["summarize", str(mine)],
                 ["figures", "regression", "--results", str(mine), "--out", str(tmp_path / "f")],
                 ["report", "--results", str(tmp_path), "--studies", "results", "--figures",
                  str(tmp_path / "f"), "--out", str(tmp_path / "r")]):
        assert main(args) == 2
        err = capsys.readouterr().err
        assert "ffffffffffffffff, whose file list is not in" in err, err


@pytest.mark.slow
def test_two_versions_of_the_data_kept_with_keep_stale_are_refused(tmp_path, capsys):
    frame(0).to_csv(tmp_path / "data.csv", index=False)
    assert sweep(tmp_path, capsys, "lbfgs")[0] == 0
    frame(1).to_csv(tmp_path / "data.csv", index=False)
    config = tmp_path / "lbfgs.toml"
    config.write_text(config.read_text() + '[[optimizers]]\nname = "gd"\n')
    assert main(["run", str(config), "--out", str(tmp_path / "results"), "--quiet",
                 "--keep-stale", "--no-adaptive"]) == 0
    capsys.readouterr()
    assert main(["summarize", str(tmp_path / "results")]) == 2
    assert "mixes rows measured by two versions of " + str(tmp_path / "data.csv") in \
        capsys.readouterr().err
