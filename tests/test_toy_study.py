"""A study kept in its own folder (tests/toy_study), registered the way a user would register
one (CONVERGENCE_STUDY_STUDIES), gets its runs, its answers, its report section and `compare`
without a line of the engine naming it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


def cli(*args, cwd):
    env = {**os.environ, "CONVERGENCE_STUDY_STUDIES": "toy_study",
           "PYTHONPATH": os.pathsep.join(p for p in (str(TESTS), str(ROOT),
                                                     os.environ.get("PYTHONPATH")) if p)}
    done = subprocess.run([sys.executable, "-m", "study", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_study_in_its_own_folder_answers_reports_and_compares(tmp_path, monkeypatch):
    for name, slower in (("a", 2.0), ("b", 0.5)):  # B cheaper than A in the second
        (tmp_path / f"{name}.toml").write_text(
            f'kind = "toy_study"\nname = "toy"\nseeds = [0, 1, 2, 3, 4, 5]\n'
            f"slower = {slower}\n")
        cli("run", f"{name}.toml", "--out", f"results/{name}", "--quiet", cwd=tmp_path)
    cli("report", "--results", "results", "--studies", "a", "--figures", "figures", "--out",
        "reports", cwd=tmp_path)
    report = (tmp_path / "reports" / "report.md").read_text()
    assert "Convergence study report: the toy methods" in report  # its title's subject
    assert "Toy: was method A cheaper than method B?" in report  # its answer
    assert "Per seed, A took" in report and "## The toy question" in report  # its section
    compared = cli("compare", "results/a", "results/b", cwd=tmp_path)
    assert "toy.a-vs-b" in compared and "changed" in compared  # its conclusion, in both
    assert "B" in compared and "cost" in compared  # its pairs
    from types import SimpleNamespace

    from study.results import load
    from study.sweep import plugin
    from study.sweep.adaptive import answer_comparisons

    monkeypatch.syspath_prepend(str(TESTS))
    monkeypatch.setitem(plugin.STUDIES, "toy_study", "toy_study.plugin")
    folder = tmp_path / "results" / "a"
    found = answer_comparisons(SimpleNamespace(kind="toy_study"), SimpleNamespace(root=folder),
                               load(folder).runs)  # what the adaptive loop refines: its answer
    assert [(id, c.instances) for id, c in found] == [("toy.a-vs-b", 6)]


def test_an_unregistered_study_is_an_unknown_kind(tmp_path):
    (tmp_path / "c.toml").write_text('kind = "toy_study"\n')
    done = subprocess.run([sys.executable, "-m", "study", "run", "c.toml"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300,
                          env={k: v for k, v in os.environ.items()
                               if k != "CONVERGENCE_STUDY_STUDIES"})
    assert done.returncode == 2 and "unknown study kind 'toy_study'" in done.stderr
