"""The README's commands work as written: its code blocks are extracted and run in a fresh folder
(a file block starts with `# NAME`: it is written there first), in the order a reader meets
them, on small stand-ins for the files the README calls `my.csv` and `my.npz`. The two long
commands (`make reproduce`, `make test`) and the Makefile's other targets are checked with
`make -n`; everything else runs for real."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
COMMAND = "convergence-study"  # the installed command: it works from any folder
MAX_LINES = 200


def blocks() -> list[tuple[str, str, str]]:
    """(section, info string, body) of every fenced block, in order."""
    found, section = [], ""
    lines = README.read_text().splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("## "):
            section = line[3:]
        if line.startswith("```"):
            info, body = line[3:].strip(), []
            i += 1
            while not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            found.append((section, info, "\n".join(body) + "\n"))
        i += 1
    return found


def commands(section: str) -> list[tuple[str, str | None, str]]:
    """What a reader of one section does, in order: ("file", name, text) or ("sh", None,
    command)."""
    steps = []
    for where, info, body in blocks():
        if where != section:
            continue
        if info == "sh":
            for line in body.splitlines():
                command = line.split("  #")[0].strip()
                if command:
                    steps.append(("sh", None, command))
        else:
            first = body.splitlines()[0]
            assert first.startswith("# "), f"a {info} block in {section!r} names no file"
            steps.append(("file", first[2:].strip(), body))
    return steps


def my_files(folder: Path) -> None:
    """The README's `my.csv` (a, b, c -> y) and `my.npz` (3 features -> one value)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 3))
    y = x @ np.array([1.5, -2.0, 0.5]) + 0.1 * rng.normal(size=400)
    pd.DataFrame({"a": x[:, 0], "b": x[:, 1], "c": x[:, 2], "y": y}).to_csv(
        folder / "my.csv", index=False)
    np.savez(folder / "my.npz", x_train=x[:320].astype(np.float32), y_train=y[:320],
             x_val=x[320:].astype(np.float32), y_val=y[320:])


def follow(section: str, folder: Path) -> None:
    my_files(folder)
    # the venv's bin first on PATH, as `. .venv/bin/activate` puts it; no PYTHONPATH: the
    # command must find the toolkit from a folder outside the checkout by itself
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    for kind, name, text in commands(section):
        if kind == "file":
            (folder / name).write_text(text)
            continue
        assert text.startswith(COMMAND + " "), f"not a study command: {text}"
        argv = [str(Path(sys.executable).parent / COMMAND), *text[len(COMMAND):].split()]
        done = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True,
                              timeout=600, stdin=subprocess.DEVNULL)
        assert done.returncode == 0, f"{text}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"


def test_the_readme_is_short_and_its_links_resolve():
    text = README.read_text()
    assert len(text.splitlines()) < MAX_LINES
    for target in re.findall(r"\]\(([^)#]+)\)", text):
        assert (ROOT / target).exists(), f"README links to a missing {target}"


def test_every_make_command_in_the_readme_is_a_target():
    made = [line.split("#")[0].split() for _, info, body in blocks() if info == "sh"
            for line in body.splitlines() if line.startswith("make ")]
    named = re.findall(r"`make ([a-z-]+)`", README.read_text())
    targets = {words[1] for words in made} | set(named)
    assert {"reproduce", "test"} <= targets
    for target in sorted(targets):
        done = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True,
                              timeout=120, env={**os.environ, "MAKEFLAGS": ""})
        assert done.returncode == 0, f"make -n {target}: {done.stderr}"


def test_every_block_is_run_by_a_test():
    sections = {where for where, _, _ in blocks()}
    assert sections == {"Two commands", "Your own data", "Your own model"}


@pytest.mark.slow
def test_your_own_data_as_the_readme_says(tmp_path):
    follow("Your own data", tmp_path)
    assert (tmp_path / "results/my-study/runs.parquet").exists()
    assert (tmp_path / "figures/my-study/headline.png").exists()
    assert "my.csv" in (tmp_path / "reports/my-study/report.md").read_text()


@pytest.mark.slow
def test_your_own_model_as_the_readme_says(tmp_path):
    follow("Your own model", tmp_path)
    runs = pd.read_parquet(tmp_path / "results/my-model/runs.parquet")
    assert set(runs["backend"]) == {"jax", "torch"}
    assert (tmp_path / "figures/my-model/headline.png").exists()
    assert (tmp_path / "reports/my-model/report.md").exists()
