import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


@pytest.fixture(scope="session")
def well_conditioned():
    from datasets import make_problem

    return make_problem("synthetic", n=2000, d=5, kappa=10.0, noise=0.1, seed=1)


@pytest.fixture(scope="session")
def numpy64():
    from optimizers import make_backend

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
