"""The installed toolkit lives beside other top-level `datasets`, `optimizers` and `study`
packages (Hugging Face's `datasets` is in most ML environments) without shadowing them or being
shadowed.

Each test installs the project (editable, then regular) into a fresh venv whose site-packages
already holds stand-ins of those three names that raise on import, and runs the
`convergence-study` command from a folder holding a second set of stand-ins, also first on
PYTHONPATH: the command, its fork servers and their runs, and a Dask scheduler and worker started
there (regular install), must import the toolkit's own packages, while `import datasets`
elsewhere in that environment still finds the stand-in. The venv reuses this interpreter's
site-packages through a .pth file (no download, no 1.5 GB TensorFlow copy).
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import sysconfig
import time
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
NAMES = ("datasets", "optimizers", "study")
SOURCES = ("pyproject.toml", "setup.py", "README.md", "convergence_study", *NAMES)
SWEEP = """
name = "installed"
seeds = [0]
run_timeout = 120
[stopping]
tol = 1e-8
max_iter = 3000
[[datasets]]
name = "synthetic"
n = 300
kappa = [10]
[[optimizers]]
name = "lbfgs"
[[backends]]
name = "numpy"
dtype = ["float64"]
"""


def write_stand_ins(folder: Path) -> None:
    """Packages named like ours that fail loudly when imported."""
    for name in NAMES:
        (folder / name).mkdir(parents=True)
        (folder / name / "__init__.py").write_text(
            f"raise ImportError('the stand-in {name} package was imported')\n")


def make_venv(tmp_path: Path) -> tuple[Path, Path]:
    """A venv without pip that sees this interpreter's site-packages after its own (a path line
    in a .pth file: the .pth files there, such as an editable install's finder, stay inactive).
    Returns its python and its site-packages."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    purelib = Path(sysconfig.get_path("purelib", vars={"base": str(venv),
                                                       "platbase": str(venv)}))
    (purelib / "outer.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    write_stand_ins(purelib)
    return venv / "bin" / "python", purelib


def project_copy(tmp_path: Path) -> Path:
    """The project's source, so that building it writes nothing into the checkout."""
    copy = tmp_path / "project"
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            copy.mkdir(exist_ok=True)
            shutil.copy2(source, copy / name)
    return copy


@contextmanager
def dask_cluster(python: Path, cwd: Path, env: dict[str, str]):
    """A Dask scheduler and one worker (no nanny: one process each), as `dask scheduler` and
    `dask worker` would start them, logging to cwd/dask.log; yields the scheduler's address."""
    address_file = cwd / "scheduler.json"
    started = []
    try:
        with open(cwd / "dask.log", "a") as log:
            started.append(subprocess.Popen(
                [str(python), "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                 "--port", "0", "--dashboard-address", ":0", "--scheduler-file",
                 str(address_file)], cwd=cwd, env=env, stdout=log, stderr=log))
            address = scheduler_address(address_file)
            started.append(subprocess.Popen(
                [str(python), "-m", "distributed.cli.dask_worker", address, "--no-nanny",
                 "--nthreads", "1", "--resources", "timing_slot=1", "--no-dashboard",
                 "--death-timeout", "120"], cwd=cwd, env=env, stdout=log, stderr=log))
        yield address
    finally:
        for proc in reversed(started):
            proc.kill()
            proc.wait()


def scheduler_address(address_file: Path, wait: float = 120.0) -> str:
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            return json.loads(address_file.read_text())["address"]
        except (OSError, ValueError, KeyError):  # not written yet, or half written
            time.sleep(0.2)
    raise AssertionError(f"the Dask scheduler wrote no address within {wait:g} s")


def clean_env(**extra) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    return {**env, "CUDA_VISIBLE_DEVICES": "-1", **extra}


@pytest.mark.parametrize("editable", [True, False], ids=["editable", "regular"])
def test_installed_command_runs_its_own_packages_beside_others(tmp_path, editable):
    python, purelib = make_venv(tmp_path)
    project = project_copy(tmp_path)
    install = [str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
               "--no-build-isolation", "--ignore-installed", "--disable-pip-version-check",
               *(["-e"] if editable else []), str(project)]
    done = subprocess.run(install, capture_output=True, text=True, cwd=tmp_path, env=clean_env())
    assert done.returncode == 0, done.stderr[-3000:]

    # nothing of ours where the environment's other code would import it
    for name in NAMES:
        assert (purelib / name / "__init__.py").read_text().startswith("raise ImportError")
    probe = subprocess.run([str(python), "-c", "import datasets"], capture_output=True,
                           text=True, cwd=tmp_path, env=clean_env())
    assert "the stand-in datasets package was imported" in probe.stderr, probe.stderr[-2000:]

    # our command, from a folder full of stand-ins that are also first on PYTHONPATH
    elsewhere = tmp_path / "elsewhere"
    write_stand_ins(elsewhere)
    command = python.parent / "convergence-study"
    env = clean_env(PYTHONPATH=str(elsewhere))
    regress = subprocess.run([str(command), "regress", "--rows", "500", "--optimizer", "lbfgs"],
                             capture_output=True, text=True, cwd=elsewhere, env=env)
    assert regress.returncode == 0, regress.stderr[-3000:]
    assert "\nlbfgs on numpy/cpu float64: converged" in regress.stdout  # after the bound's line

    (elsewhere / "sweep.toml").write_text(SWEEP)
    out = tmp_path / "results"
    sweep = subprocess.run([str(command), "run", "sweep.toml", "--out", str(out), "--quiet"],
                           capture_output=True, text=True, cwd=elsewhere, env=env)
    logs = "\n".join(p.read_text() for p in sorted(out.glob("logs/*.log")))
    assert sweep.returncode == 0, sweep.stderr[-3000:] + logs[-3000:]
    runs = pd.read_parquet(out / "runs.parquet")
    assert list(runs["status"]) == ["converged"], runs["message"].tolist()

    # the code fingerprints hash the files that run: the installed copy's, or the project's
    code = ("import convergence_study; convergence_study.activate(); "
            "from study.sweep.fingerprint import ROOT; print(ROOT)")
    root = subprocess.run([str(python), "-c", code], capture_output=True, text=True,
                          cwd=elsewhere, env=env)
    assert root.returncode == 0, root.stderr[-3000:]
    expected = project if editable else purelib / "convergence_study" / "_lib"
    assert Path(root.stdout.strip()) == expected.resolve()

    if not editable:  # the Dask part is the same for both installs (and takes 10-20 s)
        # the same sweep on a Dask cluster started in that environment, from that folder
        with dask_cluster(python, elsewhere, env) as scheduler:
            # its own folder: one inside the first sweep's results folder is refused
            sweep = subprocess.run([str(command), "run", "sweep.toml", "--out",
                                    str(tmp_path / "dask"), "--quiet", "--executor", "dask",
                                    "--scheduler", scheduler],
                                   capture_output=True, text=True, cwd=elsewhere, env=env)
        dask_log = (elsewhere / "dask.log").read_text()
        assert sweep.returncode == 0, sweep.stderr[-3000:] + dask_log[-3000:]
        runs = pd.read_parquet(tmp_path / "dask" / "runs.parquet")
        assert list(runs["status"]) == ["converged"], runs["message"].tolist()
