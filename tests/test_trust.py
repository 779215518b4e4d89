"""Issue 28: every label and every row stays true under hostile use. A changed input file is
re-measured, a table from another study or with fingerprints nobody can vouch for is refused,
and a tuning seed that rebuilds the measured instance is caught."""

import json
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
    code = main(["run", str(config), "--out", str(tmp_path / "results"), "--quiet", *extra])
    return code, capsys.readouterr().out


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
    assert main(["run", str(config), "--out", str(tmp_path / "results"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "1 to measure again: stale: changed " + str(tmp_path / "data.csv") in out
    runs = pd.read_parquet(tmp_path / "results" / "runs.parquet")
    assert len(runs) == 2 and runs["f_star"].nunique() == 1  # one data set, measured anew
    assert runs["f_star"].iloc[0] != first["f_star"].iloc[0]
    assert main(["summarize", str(tmp_path / "results")]) == 0  # one version of every file
