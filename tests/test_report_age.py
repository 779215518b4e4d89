"""A report says how old its numbers are: each study's date and commit from its rows, and which
studies' code has changed since (what a re-run would measure again), or 'none'."""

from __future__ import annotations

import pandas as pd

from study.report import age
from study.report.blocks import render_markdown
from study.report.build import build_blocks
from study.sweep import fingerprint
from study.sweep.grid import load_study
from study.sweep.runner import run_study

CONFIG = """name = "tiny"
seeds = [0]
[stopping]
max_iter = 30
[[datasets]]
name = "synthetic"
n = 200
[[optimizers]]
name = "gd"
step = "1/L"
[[optimizers]]
name = "lbfgs"
[[backends]]
name = "numpy"
"""


def report_text(tmp_path) -> str:
    blocks = build_blocks(tmp_path / "results", tmp_path / "figures", ["tiny"])
    return render_markdown(blocks, tmp_path)


def test_the_report_names_its_date_and_commit_and_the_studies_whose_code_changed(
        tmp_path, monkeypatch):
    config = tmp_path / "tiny.toml"
    config.write_text(CONFIG)
    out = tmp_path / "results" / "tiny"
    run_study(load_study(config), out, quiet=True)
    runs = pd.read_parquet(out / "runs.parquet")
    assert len(runs) == 2
    day = runs["started_at"].min()[:10]
    commit = age.short_commit(runs["env_git_commit"].iloc[0])

    text = report_text(tmp_path)
    section = text[text.index("## How old these results are"):]
    assert f"tiny: 2 runs, measured on {day} at commit {commit}." in section
    assert "Code changed since, against the code that wrote this report (commit " in section
    assert section.split("\n\n")[2].endswith("): none.")  # the line after the dates

    real = fingerprint.manifest

    def edited(paths):  # optimizers/gd.py as if edited since: the GD run is stale, L-BFGS not
        files = real(paths)
        return {path: "edited" if path == "optimizers/gd.py" else digest
                for path, digest in files.items()}

    monkeypatch.setattr(fingerprint, "manifest", edited)
    section = report_text(tmp_path)
    section = section[section.index("## How old these results are"):]
    assert "in 1 of 1 studies; a re-run measures these runs again:" in section
    assert "- tiny: 1 of 2 runs (changed optimizers/gd.py)" in section


def test_a_row_without_date_commit_or_fingerprint_says_so():
    runs = pd.DataFrame({"status": ["ok", "skipped"], "started_at": [None, "2026-12-04T10:00"],
                         "env_git_commit": [None, "abc"]})
    assert age.measured_when(runs) == ("measured on a date not recorded at a commit "
                                      "not recorded")
    runs = pd.DataFrame({"status": ["ok", "ok"],
                         "started_at": ["2026-12-03T23:59:00", "2026-12-04T00:01:00"],
                         "env_git_commit": ["a" * 40 + "+dirty", "b" * 40]})
    assert age.measured_when(runs) == (f"measured from 2026-12-03 to 2026-12-04 at commits "
                                       f"{'a' * 12}+dirty, {'b' * 12}")
