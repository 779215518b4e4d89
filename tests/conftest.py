import faulthandler
import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# The Python processes tests start (`python -m study ...` in a temporary folder) run this
# checkout: an install no longer puts its packages on every path (convergence_study/__init__.py).
ROOT = Path(__file__).resolve().parents[1]
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)

# seconds the interpreter may take to exit once the session is over
EXIT_GRACE_SECONDS = 120

@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """A thread or process a failed test leaves behind must not keep the session from exiting
    (CI would wait out its whole limit, with no hint why): once the session is over, give the
    interpreter EXIT_GRACE_SECONDS, then print every thread's stack and exit with status 1."""
    faulthandler.dump_traceback_later(EXIT_GRACE_SECONDS, exit=True, file=sys.__stderr__)


@pytest.fixture(scope="session")
def well_conditioned():
    from datasets import make_problem

    return make_problem("synthetic", n=2000, d=5, kappa=10.0, noise=0.1, seed=1)


@pytest.fixture(scope="session")
def numpy64():
    from study.frameworks.registry import make_backend

    return make_backend("numpy", "float64")


@pytest.fixture
def results(tmp_path):
    """A small regression results folder (tmp_path/results/regression) from the plotting
    tests' tables, for the readers and writers of results."""
    from test_plots_report import make_tables

    runs, traces = make_tables()
    folder = tmp_path / "results" / "regression"
    folder.mkdir(parents=True)
    runs.assign(kind="regression").to_parquet(folder / "runs.parquet")
    traces.to_parquet(folder / "traces.parquet")
    (folder / "study.json").write_text('{"kind": "regression"}')
    return tmp_path
