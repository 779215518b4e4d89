"""docs/your-optimizer.md works as written: its file blocks (first line `# NAME`) are written to a
fresh folder outside the checkout and its commands run there with the installed command, in the
reader's order, on a tiny size (fewer rows and one seed); its optimizer block is the shipped
examples/bb_step.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "your-optimizer.md"
COMMAND = "convergence-study"
TINY = {"--rows 2000": "--rows 200", "n = 2000": "n = 200", "seeds = [0, 1, 2]": "seeds = [0]",
        "max_iter = 20000": "max_iter = 3000"}


def blocks() -> list[tuple[str, str]]:
    """(info string, body) of every fenced block, in order."""
    found, lines, i = [], DOC.read_text().splitlines(), 0
    while i < len(lines):
        if lines[i].startswith("```"):
            info, body = lines[i][3:].strip(), []
            i += 1
            while not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            found.append((info, "\n".join(body) + "\n"))
        i += 1
    return found


def tiny(text: str) -> str:
    for big, small in TINY.items():
        text = text.replace(big, small)
    return text


def test_its_optimizer_is_the_shipped_example():
    files = {body.splitlines()[0][2:]: body for info, body in blocks() if info != "sh"}
    assert files["bb_step.py"] == (ROOT / "examples" / "bb_step.py").read_text()
    assert set(files) == {"bb_step.py", "bb-study.toml", "sign_momentum.py"}


@pytest.mark.slow
def test_the_tutorial_as_written(tmp_path):
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    for info, body in blocks():
        if info != "sh":
            (tmp_path / body.splitlines()[0][2:]).write_text(tiny(body))
            continue
        for command in filter(None, (line.strip() for line in body.splitlines())):
            assert command.startswith(COMMAND + " ")
            argv = [str(Path(sys.executable).parent / COMMAND),
                    *tiny(command)[len(COMMAND):].split()]
            done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True,
                                  timeout=600, stdin=subprocess.DEVNULL)
            assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    runs = pd.read_parquet(tmp_path / "results/bb-study/runs.parquet")
    assert set(runs["optimizer"]) == {"bb", "gd", "nesterov", "lbfgs"}
    assert set(runs["backend"]) == {"numpy", "jax"}
    bb = runs[runs["optimizer"] == "bb"]
    assert set(bb["status"]) == {"converged"} and (bb["suboptimality"] <= 1e-8).all()
    assert set(bb["optimizer_file"]) == {str((tmp_path / "bb_step.py").resolve())}
    assert "bb" in (tmp_path / "reports/bb-study/report.md").read_text()
    assert (tmp_path / "figures/bb-study/headline.png").exists()
